// decide(): the one place that says how a collective call runs: which algorithm (an id of
// plan/algorithms.hpp), on which executor, with which protocol, instances and micro-batch,
// and what runs instead where the copy engines decline at run time. docs/runtime.md
// ("Algorithms and the selection table", "The one decision") lists its rules.
//
// It reads, in this order:
//   1. the selection table's first matching row (tune/selection_table.hpp; WEFT_SELECTION or
//      selection/default.json, parsed once into integer ids);
//   2. WEFT_ALGO, WEFT_PROTO and WEFT_INSTANCES, read once when the Decider is made (a
//      communicator's creation): only when one of them or WEFT_MICROBATCH_BYTES is set, and
//      then with instances clamped to 1..WEFT_CONNECTIONS;
//   3. the copy engines: a ce choice runs where the copy engines support the call, with the
//      table's first row other than ce and oneshot as its fallback for the ranks that cannot
//      (a buffer not registered: only known when the call runs);
//   4. links across nodes: no one-shot kernel and no copy engines there (the table's first
//      plan row instead, with WEFT_INSTANCES), and every protocol runs as Simple;
//   5. LL128 runs as Simple where the staging slots are not multiples of 128 bytes;
//   6. the executor of a plan: a generated kernel where the row says "gen", or it says
//      nothing and WEFT_EXECUTOR=gen; never for LL128 or across nodes;
//   7. the micro-batch: WEFT_MICROBATCH_BYTES when set, else the row's.
// A Decision holds enums and integers only: deciding a call builds and compares no string
// and allocates nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "plan/algorithms.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"

namespace weft {

/// One collective call as decide() sees it.
struct Call {
  Collective collective = Collective::AllReduce;
  uint64_t bytes = 0;     ///< payload of one rank: the larger of its send and receive buffers
  bool in_place = false;
};

/// Why a plan's protocol is not the one chosen.
enum class ProtocolNote : uint8_t {
  None,
  AcrossNetwork,   ///< LL and LL128 run as Simple across the network
  LL128Unaligned,  ///< LL128 runs as Simple: the staging slots are not multiples of 128 bytes
};

/// How a call launches.
struct Launch {
  algo::Id algorithm = algo::kNone;
  algo::Executor executor = algo::Executor::Interpreter;
  algo::Protocol protocol = algo::Protocol::Simple;  ///< as it runs (oneshot: LL)
  algo::Protocol chosen = algo::Protocol::Simple;    ///< as the table (or WEFT_PROTO) chose it
  ProtocolNote note = ProtocolNote::None;            ///< why `protocol` is not `chosen`
  int32_t instances = 1;          ///< thread blocks per link; oneshot: the kernel's thread blocks
  uint64_t microbatch_bytes = 0;  ///< plans: the most bytes per chunk slot and micro-batch; 0: sized by the slots
  bool operator==(const Launch&) const = default;
};

/// decide()'s answer: the launch, and for the copy engines (executor CopyEngine) the launch
/// every rank runs instead when some rank cannot use them (exec/ce_runner.hpp says
/// when): the runtime never chooses by itself.
struct Decision : Launch {
  Launch fallback;  ///< meaningful where executor == CopyEngine
  bool operator==(const Decision&) const = default;
};

/// The table's choice with WEFT_ALGO / WEFT_PROTO / WEFT_INSTANCES applied, before the
/// communicator's links and slots are taken into account (steps 1 and 2 above): what
/// select_algorithm returns in names.
struct Chosen {
  algo::Id algorithm = algo::kNone;
  algo::Protocol protocol = algo::Protocol::Simple;
  int32_t instances = 1;
  uint64_t microbatch_bytes = 0;                   ///< the row's (0: sized by the slots)
  std::optional<algo::Executor> plan_executor;     ///< the row's "executor"; nullopt: the default
  const SelectionRow* row = nullptr;               ///< the row it came from
};

/// The environment decide() reads (from_environment: once, when a communicator is created).
struct DecideEnv {
  std::string algo;         ///< WEFT_ALGO
  std::string proto;        ///< WEFT_PROTO
  int64_t instances = 0;    ///< WEFT_INSTANCES (0: the table's)
  int64_t microbatch = 0;   ///< WEFT_MICROBATCH_BYTES (0: the row's)
  bool generated = false;   ///< WEFT_EXECUTOR=gen
  /// Whether any override is set (WEFT_ALGO, WEFT_PROTO, WEFT_INSTANCES, WEFT_MICROBATCH_BYTES).
  bool overrides() const { return !algo.empty() || !proto.empty() || instances != 0 || microbatch != 0; }
  static DecideEnv from_environment();
};

/// What a communicator is, for the whole of its life.
struct CommShape {
  int nranks = 1;
  bool multi_node = false;       ///< links across nodes (hosts, or WEFT_EMULATE_NODES)
  int connections = 32;          ///< WEFT_CONNECTIONS: the most instances
  uint64_t slot_bytes = 512 << 10;     ///< WEFT_SLOT_BYTES
  uint64_t ll_slot_bytes = 64 << 10;   ///< WEFT_LL_SLOT_BYTES
  /// WEFT_CONNECTIONS, WEFT_SLOT_BYTES and WEFT_LL_SLOT_BYTES from the environment, one node.
  static CommShape from_environment(int nranks);
};

class Decider {
 public:
  /// Resolves WEFT_ALGO for every collective now (loading the algorithms it names to learn
  /// their collectives); an entry that is wrong is thrown by every decide() (as it was by
  /// every call before), not here.
  Decider(std::shared_ptr<const SelectionTable> table, const CommShape& shape, DecideEnv env);

  /// The one decision for `call` (rules 1 to 7 above). Throws InvalidUsage when the table has
  /// no row for it, InvalidArgument for a WEFT_PROTO other than Simple, LL and LL128 or a
  /// WEFT_ALGO entry naming no collective, and what loading a WEFT_ALGO source threw.
  Decision decide(const Call& call) const;

  /// Rules 1 and 2 alone, overrides applied whether or not any is set.
  Chosen chosen(const Call& call) const;

  const SelectionTable& table() const { return *table_; }
  const CommShape& shape() const { return shape_; }
  const DecideEnv& env() const { return env_; }

 private:
  /// WEFT_ALGO's last entry for one collective.
  struct Named {
    algo::Id fixed = algo::kNone;   ///< oneshot, ce or a hand-built plan
    std::vector<algo::Id> by_row;   ///< a compiled source: its id under each row's scheduler and allocator
    bool any() const { return fixed != algo::kNone || !by_row.empty(); }
  };
  static constexpr size_t kCollectives = 7;

  void resolve_algo_env();
  Chosen from_row(const SelectionRow& r, const Call& call) const;
  const SelectionRow& row(const Call& call, bool plans_only) const;
  /// Rules 1 and 2; `overrides`: apply WEFT_* (else the row alone).
  Chosen choose(const Call& call, bool overrides) const;
  /// Rules 5 to 7 for a plan launch (protocol, executor, micro-batch).
  Launch plan_launch(const Chosen& ch) const;

  std::shared_ptr<const SelectionTable> table_;
  CommShape shape_;
  DecideEnv env_;
  std::optional<algo::Protocol> proto_;           ///< WEFT_PROTO, parsed
  std::array<Named, kCollectives> named_;         ///< by Collective
  std::array<std::string, kCollectives> algo_error_;  ///< WEFT_ALGO's error for a collective, if any
  std::array<ErrorCode, kCollectives> algo_error_code_{};
};

/// The protocol a plan runs with when `chosen` was chosen (rules 4 and 5): Simple across the
/// network, Simple for LL128 where `slot_bytes` or `ll_slot_bytes` is not a multiple of 128
/// bytes; `note` says why (None where it is `chosen`).
algo::Protocol effective_protocol(algo::Protocol chosen, bool multi_node, uint64_t slot_bytes, uint64_t ll_slot_bytes,
                                  ProtocolNote* note);

/// The reason for a protocol change, in words, for logs.
std::string describe(ProtocolNote note, algo::Protocol chosen, uint64_t slot_bytes, uint64_t ll_slot_bytes);

/// A launch in names (for tables, traces and `weft bench`); its executor is "gen" where a
/// generated kernel runs it, else empty.
Choice to_choice(const Launch& l);
Choice to_choice(const Chosen& ch);
/// What a launch runs, in words: describe_choice(to_choice(l)).
std::string describe(const Launch& l);

/// The runtime's key for a plan it has lowered and uploaded (runtime/communicator.hpp):
/// integers only, hashed without a string.
struct PlanKey {
  algo::Id algorithm = algo::kNone;  ///< a compiled source's id carries its scheduler and allocator
  Collective collective = Collective::AllReduce;
  algo::Protocol protocol = algo::Protocol::Simple;
  algo::Executor executor = algo::Executor::Interpreter;
  bool in_place = false;
  int32_t instances = 1;
  int32_t root = 0;  ///< Broadcast and Reduce; 0 for the others
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept {
    uint64_t h = static_cast<uint64_t>(static_cast<uint16_t>(k.algorithm)) | static_cast<uint64_t>(k.collective) << 16 |
                 static_cast<uint64_t>(k.protocol) << 24 | static_cast<uint64_t>(k.executor) << 32 |
                 static_cast<uint64_t>(k.in_place) << 40;
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.instances)) << 32 | static_cast<uint32_t>(k.root)) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
/// The key of a plan launch `l` of `call` (root: the call's for Broadcast and Reduce).
inline PlanKey plan_key(const Call& call, const Launch& l, int root) {
  const bool rooted = call.collective == Collective::Broadcast || call.collective == Collective::Reduce;
  return PlanKey{l.algorithm, call.collective, l.protocol, l.executor, call.in_place, l.instances, rooted ? root : 0};
}

}  // namespace weft
