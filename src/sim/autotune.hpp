// Automatic instances: a compiler schedule's instance counts and execution model chosen by the
// simulator for one call size, within a thread-block budget (docs/compile.md, "Automatic
// instances"), and the choice among schedulers and an MSCCL file's own schedule that
// `weft compile --size` and `weft simulate` make with it.
//
// The compiler's derived instances (compile/lower.hpp) come from bandwidth arithmetic; what
// a plan needs also depends on dependencies, staging and the size of the call, which only
// the simulator sees. autotune() compiles a few variants of one schedule and keeps the one
// the simulator runs fastest at the call's size:
//   - shape: the scheduler's own (its execution model, one logical channel per connection,
//     chunks aggregated, the given allocator); for the task-level schedulers also algorithm
//     level in step order (each block runs one micro-batch of every slot in turn; fused
//     chains may cross sub-pipelines, so a ring runs as one chain per block, as NCCL's does),
//     and one logical channel per connection and chunk DAG without aggregation, one block
//     per connection end (chunks crossing one link stream side by side on blocks of their
//     own, as an MSCCL file's channels do);
//   - instances: from the derived counts, each link class's count multiplied or divided by
//     2, then by 1.5, as long as the result improves (coordinate descent);
//   - across nodes, at task level: the best variants again with NIC-fed NVLink work on only
//     the blocks that keep pace with the network (CompileOptions::pace), the connection's
//     other blocks ending early;
//   - across nodes, at task level: the fastest variants again with each connection's ops side
//     by side on fewer of its blocks (CompileOptions::op_blocks, sim/op_blocks.hpp), and each
//     of those once more with its reduce chains in another order per chunk so that the blocks
//     that end early are reached first (OpPlacer::order_chains: CompileOptions::chain_keys
//     and op_order);
//   - blocks merged on the simulated timeline (task level): the variant is simulated once,
//     and blocks whose work never overlaps are merged (compile/merge_blocks.hpp) when the
//     merged plan is no slower;
//   - the budget: a variant over `max_tbs` blocks per rank after merging is compiled again
//     with CompileOptions::max_tbs (fewer instances) and merged again; one still over it is
//     discarded.
// Among variants whose simulated time is within `tolerance` of the fastest, the one with the
// fewest thread blocks per rank wins, then the faster; with `max_idle`, among those whose
// thread blocks idle no more than that only. With neither, across nodes: when the fastest
// variant's blocks idle more than kDefaultMaxIdle, the fastest within `idle_cost` of it whose
// blocks idle at most that, when one does. Across nodes, of variants as fast (the same
// simulated time), the one whose blocks idle less counts as faster; in one node the one tried
// first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "ir/topology.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {

/// The idle bound the tuner's default applies across nodes (TuneOptions::idle_cost): the top
/// of paper 001's Table 3 (Avg Idle 1.7-15%).
inline constexpr double kDefaultMaxIdle = 0.15;

struct TuneOptions {
  uint64_t bytes = 0;      ///< the call's size (SimOptions::bytes convention); required
  /// Thread blocks per rank a variant may take: > 0 that many; 0 (default) no more than the
  /// scheduler's own plan with derived instances; < 0 no limit.
  int32_t max_tbs = 0;
  SimOptions sim;          ///< how variants are simulated (bytes is set from `bytes`)
  double tolerance = 0.0;  ///< variants this close to the fastest (a fraction) count as as fast
  /// Only variants whose mean thread-block idle (SimReport::tb_idle_mean) is at most this
  /// compete (paper 001 Table 3's "Avg Idle"); when none is, all do, and the reason says so.
  /// 1 (default): no bound.
  double max_idle = 1.0;
  /// Across nodes, when neither `tolerance` nor `max_idle` is given: if the fastest variant's
  /// blocks idle more than kDefaultMaxIdle, the fastest of the variants at most this fraction
  /// slower whose blocks idle at most that is taken, when one is (docs/compile.md,
  /// "Automatic instances"). 0 turns it off; in one node it does not apply.
  double idle_cost = 0.02;
  int32_t max_trials = 192; ///< variants compiled at most
  /// Largest plan tuned: past this many slots (all ranks) the derived plan is taken as it
  /// is (1,024-GPU HM AllReduce has 4.6 million; simulating it takes a minute).
  int64_t max_slots = 200'000;
};

/// One variant compiled and simulated.
struct TuneTrial {
  std::string label;     ///< e.g. "task, link channels, instances x1/x1/x1"
  std::string execution; ///< "task" or "algorithm"
  std::string channels = "link";
  bool aggregate = true;
  std::string allocator = "state";
  int32_t spare_blocks = 0;  ///< peer: blocks added for local work
  double pace = 0;           ///< CompileOptions::pace: NIC-fed NVLink work on fewer blocks
  /// CompileOptions::op_blocks from the simulated timeline of this variant without it
  /// (sim/op_blocks.hpp): ops of a connection side by side on fewer of its blocks.
  bool placed = false;
  /// With `placed`: reduce chains run in another order per chunk, so that the blocks that end
  /// early are reached first in their chains (OpPlacer::order_chains; CompileOptions::
  /// chain_keys and op_order).
  bool chains = false;
  double scale_intra = 1, scale_inter = 1, scale_local = 1;
  int32_t instances_intra = 0, instances_inter = 0, instances_local = 0;  ///< the largest per class
  int32_t tbs = 0;       ///< thread blocks per rank, max
  int32_t tbs_unmerged = 0;  ///< before blocks were merged on the timeline
  double time_us = 0;
  double busbw_GBps = 0;
  double tb_idle_mean = 0;
  std::string error;     ///< non-empty when the variant failed to compile (e.g. over the budget)
};

struct TuneResult {
  CompileResult result;            ///< the chosen variant's compilation
  std::vector<TuneTrial> trials;   ///< every variant, in the order tried
  int32_t chosen = -1;             ///< index into trials
  bool tuned = false;              ///< false: the plan was too large, the derived plan is taken
  int32_t max_tbs = 0;             ///< the budget the variants kept to (0: none)
  std::string reason;              ///< one sentence: why this variant
};

/// Compiles `algo` with `base` (its scheduler, allocator, placement; instances must be 0,
/// derived) in several variants and returns the one the simulator runs fastest at
/// options.bytes within options.max_tbs. Throws InvalidArgument when no variant fits the
/// budget (naming it) and what compile() throws for bad options.
TuneResult autotune(const Algorithm& algo, const Topology& topo, const CompileOptions& base, const TuneOptions& options);

}  // namespace weft::sim
