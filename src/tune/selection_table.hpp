// The selection table: which algorithm, protocol and instances run a collective call, by
// collective, rank count and payload size, read from a JSON file (docs/runtime.md, "The
// selection table file"). weft's default table is selection/default.json, built into the
// library; WEFT_SELECTION=path loads another when a communicator is created.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/algorithm.hpp"
#include "plan/algorithms.hpp"

namespace weft {

struct Choice {
  std::string algorithm;  ///< a named primitive ("oneshot"; the hand-built plans "ring",
                          ///< "allpairs", "chain" of plan/hand_built.hpp) or a source the
                          ///< plan builder takes: an algorithm of algorithms/, dsl:NAME or a file
  std::string protocol;   ///< "Simple", "LL" or "LL128" ("LL" for oneshot)
  int instances = 1;      ///< thread blocks per link; for oneshot, the kernel's thread blocks
  std::string scheduler = "hpds";  ///< compiled sources only: the compiler's scheduler
  std::string allocator = "state"; ///< compiled sources only: its thread-block allocation
  uint64_t microbatch_bytes = 0;   ///< plans: the most bytes per chunk slot and micro-batch (0: the runtime's sizing)
  std::string executor = "";       ///< plans: "interp" or "gen" ("": the runtime's default, WEFT_EXECUTOR)
};

/// The protocols a selection row may name, in the order `weft tune` tries them: the one list
/// the table's reader checks against.
const std::vector<std::string>& selection_protocols();

/// The executors a selection row may name ("executor"): the plan interpreter and generated kernels.
const std::vector<std::string>& selection_executors();

/// A closed range of unsigned values; `hi` absent in the file means no upper bound.
struct Range {
  uint64_t lo = 0, hi = UINT64_MAX;
  bool contains(uint64_t v) const { return v >= lo && v <= hi; }
};

struct SelectionRow {
  std::vector<Collective> collectives;
  Range ranks{1, UINT64_MAX};
  Range bytes;       ///< payload of one rank: the larger of its send and receive buffers
  Range sent_bytes;  ///< what one rank sends in all to its peers: (R - 1) x payload per peer
  int placement = -1;  ///< -1: any call; 0: out-of-place calls only; 1: in-place calls only
  std::string algorithm, protocol;
  /// Instances: fixed (per_bytes == 0), or bytes / per_bytes within [min, max]; `kernel`:
  /// the one-shot kernel's own rule (oneshot_blocks).
  bool kernel = false;
  uint64_t per_bytes = 0;
  int min = 1, max = 1;
  std::string scheduler = "hpds", allocator = "state";
  uint64_t microbatch_bytes = 0;  ///< 0: the runtime's micro-batch sizing
  std::string executor;           ///< "": the runtime's default
  int line = 0;  ///< where the row starts in its file (1-based)

  // The same, parsed once into integers for decide() (tune/decide.hpp), which compares no
  // strings per call.
  uint8_t collective_mask = 0;                     ///< bit (1 << Collective) of each of `collectives`
  algo::Id algorithm_id = algo::kNone;             ///< `algorithm` (with scheduler and allocator) in the registry
  algo::Protocol proto = algo::Protocol::Simple;   ///< `protocol`
  /// `executor`: Interpreter or Generated; nullopt: the runtime's default.
  std::optional<algo::Executor> plan_executor;

  bool has(Collective c) const { return (collective_mask >> static_cast<unsigned>(c)) & 1u; }
  /// The row's instances for a call of `bytes` payload among `nranks` ranks: oneshot's
  /// blocks (algo::oneshot_blocks), the fixed count, or bytes / per_bytes within [min, max].
  int instances_for(Collective c, uint64_t bytes, int nranks) const {
    if (kernel) return algo::oneshot_blocks(algo::peer_bytes(c, bytes, nranks));
    if (per_bytes == 0) return min;
    const uint64_t n = bytes / per_bytes;
    return n < static_cast<uint64_t>(min) ? min : n > static_cast<uint64_t>(max) ? max : static_cast<int>(n);
  }
};

struct SelectionTable {
  std::string origin;  ///< the file it came from ("(built-in selection/default.json)" for the default)
  std::vector<SelectionRow> rows;

  /// The first row that matches `bytes` of payload among `nranks` ranks, in place or not, as
  /// a Choice. A oneshot row matches only where the kernel fits (oneshot_fits); `plans_only`
  /// skips oneshot rows (what runs when the kernel cannot). Throws InvalidUsage naming the
  /// table when no row matches.
  Choice choose(Collective c, uint64_t bytes, int nranks, bool in_place = false, bool plans_only = false) const;

  /// The row choose() takes, or null where none matches: what decide() reads, on integers only.
  const SelectionRow* match(Collective c, uint64_t bytes, int nranks, bool in_place, bool plans_only) const {
    const uint64_t peer = algo::peer_bytes(c, bytes, nranks);
    const uint64_t sent = static_cast<uint64_t>(nranks > 1 ? nranks - 1 : 0) * peer;
    for (const SelectionRow& r : rows) {
      if (!r.has(c) || !r.ranks.contains(static_cast<uint64_t>(nranks)) || !r.bytes.contains(bytes) ||
          !r.sent_bytes.contains(sent))
        continue;
      if (r.placement >= 0 && r.placement != (in_place ? 1 : 0)) continue;
      if (r.algorithm_id == algo::kCopyEngine && plans_only) continue;
      // A oneshot row matches only where the kernel fits (one node: decide() sees to links
      // across nodes).
      if (r.algorithm_id == algo::kOneShot &&
          (plans_only || !algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, bytes, nranks, false})))
        continue;
      return &r;
    }
    return nullptr;
  }
  /// The error choose() throws where match() finds no row (InvalidUsage naming the table).
  [[noreturn]] void no_row(Collective c, uint64_t bytes, int nranks, bool in_place, bool plans_only) const;
};

/// Parses a table. Throws weft::Error (Parse) naming `origin`, the line and the JSON path of
/// what is wrong: malformed JSON, a wrong format or version, an unknown field, collective
/// or protocol, an empty or reversed range, instances out of 1..1024, a placement other than
/// "in" or "out" or on Broadcast or Reduce (whose root alone is in place), oneshot for a
/// collective or protocol the kernel does not run, a hand-built plan a collective lacks,
/// or a scheduler or allocator the compiler does not know.
SelectionTable parse_selection_table(std::string_view text, const std::string& origin);

/// Reads and parses the file at `path` (System error when it cannot be read).
SelectionTable load_selection_table(const std::string& path);

/// A table for one rank count: selection/ranks-N.json as built into the library.
struct RankTableText {
  int ranks = 0;           ///< N: the communicators it is for
  std::string_view file;   ///< "ranks-4.json"
  std::string_view text;
};

/// `fallback`'s rows preceded, for each (N, table) of `per_count`, by that table's rows
/// narrowed to N ranks: a communicator of N ranks takes the first row of N's table that
/// matches, and any call that table does not cover (and every call of a rank count no
/// table is for) falls through to `fallback`'s rows. A row whose `ranks` leaves out N, or two
/// tables for one N, is a Parse error naming the table, the row's line and the field. With
/// no table the result is `fallback` itself, origin included.
SelectionTable compose_selection_tables(const SelectionTable& fallback,
                                        const std::vector<std::pair<int, SelectionTable>>& per_count);

/// weft's built-in table: selection/default.json with the tables of selection/ranks-N.json
/// before it (compose_selection_tables), as built into the library, parsed once.
const SelectionTable& default_selection_table();

/// selection/default.json alone, as built into the library, parsed once: the rules
/// docs/runtime.md writes down, without the measured tables per rank count. What `weft tune`
/// times as its incumbent and appends as fallback rows; what tests of those rules read.
const SelectionTable& default_json_table();

/// The text of selection/default.json as built into the library.
std::string_view default_selection_text();

/// The tables of selection/ranks-N.json built into the library, by ascending N (none when
/// the folder has none).
const std::vector<RankTableText>& builtin_rank_table_texts();

/// The table a communicator uses: WEFT_SELECTION's file when set, else the default.
std::shared_ptr<const SelectionTable> selection_table_for_environment();

/// What a choice runs, in words, for logs and `weft bench`: "oneshot (kernel, 4 blocks)",
/// "ring (hand-built, Simple, x24)", "ring_allreduce (compiled hpds/state, LL, x4)".
std::string describe_choice(const Choice& ch);

}  // namespace weft
