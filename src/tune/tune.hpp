// `weft tune`: the candidates a collective can run with (algorithm, scheduler, protocol,
// instances, micro-batch, executor), their times per size (measured on GPUs by the command,
// src/cli/tune_gpu.cpp, or simulated here), the winner per size, and the selection table that
// records the winners in the format the runtime loads (tune/selection_table.hpp).
// docs/tune.md describes the command.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"
#include "tune/selection_table.hpp"

namespace weft::tune {

/// `sizes` rounded down to whole float32 elements per rank (multiples of 4 x nranks bytes, so
/// that every collective's payload, as the selection table counts it, is the size itself),
/// without zeros and repeats. Throws InvalidArgument when none is left.
std::vector<uint64_t> whole_sizes(const std::vector<uint64_t>& sizes, int nranks);

/// One way to run a collective: what a selection row names.
struct Candidate {
  Choice choice;  ///< instances: the row's fixed count (oneshot: the kernel's own rule)
  /// The incumbent: what weft's default table (selection/default.json) chooses at each
  /// size, timed through a WEFT_SELECTION file holding that table. A size it keeps
  /// (pick_winners' `keep`) gets no tuned row, so such calls take the default table's row,
  /// whether the tuned table is loaded with its fallback rows (WEFT_SELECTION) or ships as
  /// selection/ranks-N.json (which falls through to default.json).
  bool incumbent = false;
  /// "ring_allreduce (compiled algo/state, Simple, x8)", as `weft bench` names what ran
  /// ("oneshot (kernel)": its blocks follow from the size).
  std::string label() const;
  bool oneshot() const;
  /// Whether a row naming `other` would run this candidate.
  bool same(const Choice& other) const;
};

/// What to sweep. Empty lists take the defaults named.
struct SweepOptions {
  std::vector<std::string> algorithms;          ///< empty: algorithms_for()
  std::vector<std::string> schedulers;          ///< compiled plans; empty: hpds, algo
  std::vector<std::string> protocols;           ///< empty: selection_protocols()
  std::vector<int> instances;                   ///< empty: 2, 8, 24
  std::vector<uint64_t> microbatches;           ///< 0: the runtime's sizing; empty: {0}
  std::vector<std::string> executors;           ///< "": the runtime's default; empty: {""}
  bool oneshot = true;                          ///< include the one-shot kernel where it runs
};

/// The algorithms a row can name for `c` on `nranks` ranks: oneshot (AllReduce, AllGather,
/// ReduceScatter on 2 to 8 ranks), the hand-built plans of `c`, and the algorithms of
/// algorithms/ that implement `c` and load for `nranks` ranks.
std::vector<std::string> algorithms_for(Collective c, int nranks);

/// Every combination of `o`'s lists for `c` on `nranks` ranks, in a fixed order (algorithm,
/// scheduler, protocol, instances, micro-batch, executor). Hand-built plans take no scheduler
/// and oneshot is one candidate (LL, its own blocks). Throws InvalidArgument for an
/// algorithm, scheduler, protocol or executor a row could not name, or an empty sweep.
std::vector<Candidate> candidates(Collective c, int nranks, const SweepOptions& o);

/// Whether `cand` runs a call of `bytes` payload: the one-shot kernel only where it fits.
bool applies(const Candidate& cand, Collective c, uint64_t bytes, int nranks);

/// Times per candidate and size, in microseconds; negative: not run there.
using Times = std::vector<std::vector<double>>;  ///< [candidate][size]

/// The fastest candidate at one size, and the next fastest.
struct Winner {
  uint64_t bytes = 0;
  size_t best = 0;            ///< index into the candidates
  double us = 0;
  size_t runner_up = 0;       ///< meaningful when ratio > 0
  double ratio = 0;           ///< runner-up's time / best's (0: no runner-up)
};

/// One collective's outcome.
struct Tuned {
  Collective collective = Collective::AllReduce;
  int ranks = 0;
  std::vector<Candidate> candidates;
  std::vector<uint64_t> sizes;  ///< ascending
  Times times;
  std::vector<Winner> winners;  ///< per size that some candidate ran, ascending
};

/// The winner per size (the earliest candidate on a tie). Sizes no candidate ran are left out.
/// With `incumbent` (an index, or -1: none) the incumbent keeps a size where it was timed
/// unless the fastest candidate beats it by more than `keep` (its time more than keep x the
/// fastest's); the fastest is then its runner-up (ratio below 1: faster, within the margin).
/// Small calls are launch-bound and their times differ by a few percent from run to run: a
/// measured table should not trade what ships for a tie.
std::vector<Winner> pick_winners(const Times& times, const std::vector<uint64_t>& sizes, long incumbent = -1,
                                 double keep = 1.0);

/// The incumbent candidate (Candidate::incumbent).
Candidate incumbent_candidate();

/// A run of adjacent sizes with the same winner: one row covering bytes lo..hi (hi
/// UINT64_MAX: no bound). The first run starts at 0 and the last has no bound, so that
/// the rows cover every size; a run ends one byte below the next run's first size (a size
/// between two timed ones goes to the smaller one's winner). The incumbent's runs are runs
/// too; selection_json writes no row for them.
struct Merged {
  uint64_t lo = 0, hi = UINT64_MAX;
  size_t candidate = 0;
  std::vector<size_t> winners;  ///< indexes into Tuned::winners
};
std::vector<Merged> merge_winners(const Tuned& t);

/// Where the times come from, for the rows' notes and the description.
struct Provenance {
  bool simulated = false;
  std::string machine;  ///< the GPU's name, or the topology ("h200-1x8 (8 GPUs)")
  std::string date;     ///< YYYY-MM-DD (UTC)
};

/// Today's date, UTC, as YYYY-MM-DD.
std::string today();

/// The selection table (format weft-selection, version 1) of the tuned collectives: their
/// merged rows first (placement "out", as timed, for all but Broadcast and Reduce; ranks
/// exactly as tuned; a note with provenance, sizes and times), then, unless `fallback` is
/// false, weft's default table's rows, so that every other call still has a row.
std::string selection_json(const std::vector<Tuned>& tuned, const Provenance& p, bool fallback = true);

/// A table whose one row runs `k` for `c` at any size and rank count, out of place (what
/// the GPU timing loads through WEFT_SELECTION for each candidate); for the incumbent, the
/// default table itself.
std::string candidate_table(Collective c, const Candidate& k);

/// Pruning (`weft tune --prune F --prune-from SIZE`): a candidate whose time at a size of at
/// least `from_bytes` is more than `factor` times the best that earlier candidates reached at
/// that size is not timed at the larger sizes (their times stay unmeasured). The expensive
/// part of a GPU sweep is the large sizes (each checked against the host reference), and a
/// candidate that far behind in the bandwidth regime does not win further up. factor 0: off.
struct PruneRule {
  double factor = 1.5;
  uint64_t from_bytes = 16ull << 20;
};

/// Whether a candidate that took `us` at `bytes` stops there; `best_before` is the best time
/// of the earlier candidates at that size (negative: none yet, so never).
bool prune_after(const PruneRule& r, uint64_t bytes, double us, double best_before);

/// Prints progress lines to a stream (nothing when it is null): the collective, the size,
/// candidate i of N, its time and the best so far at that size.
class Progress {
 public:
  Progress(std::FILE* out, Collective c, size_t ncandidates, size_t nsizes);
  void timed(size_t i, const Candidate& cand, size_t size_index, uint64_t bytes, double us);
  void skipped(size_t i, const Candidate& cand, const std::string& why);

 private:
  std::FILE* out_;
  Collective c_;
  size_t n_;
  std::vector<double> best_;
  std::vector<std::string> best_label_;
};

/// One node of `nranks` GPUs with `preset_or_file`'s figures (nranks 0: a node's worth).
/// Throws InvalidArgument for fewer than 2 ranks or more than a node holds.
Topology simulation_topology(const std::string& preset_or_file, int nranks);

/// Times every candidate at every size on the simulator: each plan built as the runtime
/// builds it (plan/plan_source.hpp's make_plan, out of place, root 0), micro-batches
/// sized as the runtime sizes them from the protocol's staging slot (WEFT_SLOT_BYTES,
/// WEFT_LL_SLOT_BYTES / 2) and capped at the candidate's micro-batch. The simulator models
/// neither the one-shot kernel (skipped), nor protocol costs, nor the executor.
Times simulate_times(Collective c, int nranks, const std::vector<Candidate>& cands, const std::vector<uint64_t>& sizes,
                     const Topology& topo, Progress& progress);

/// The winners as a text table per collective: size, winner, time, runner-up and its ratio.
std::string winners_text(const Tuned& t);

}  // namespace weft::tune
