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
//   7. the micro-batch: WEFT_MICROBATCH_BYTES when set, else the row's;
//   8. the efficiency CTA policy: a plan's instances cut so that its thread blocks stay
//      within kEfficiencyBlocks (tune/cta_policy.hpp), the one-shot kernel's blocks capped;
//   9. memory windows and the zero CTA policy, before all of the above (which then give the
//      fallback): AllGather, AllToAll and Broadcast on one node of 2 to ce::kMaxRanks ranks
//      whose receive buffer lies in a symmetric window every rank mapped run by copy engines
//      with no exchange (CopyEngineDirect); in another window, or in none under the zero
//      policy, by copy engines after the per-call exchange, with a fallback
//      (CopyEngineExchange). Under the zero policy at every size, else from
//      kWindowCopyEngineBytes, and Broadcast beyond 2 ranks only under the zero policy.
// A Decision holds enums and integers only: deciding a call builds and compares no string
// and allocates nothing (the efficiency policy's block count asks the communicator's plan
// cache, which allocates only when it lowers a plan for the first time).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "plan/algorithms.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"

namespace weft {

/// Where a call's receive buffer lies among the communicator's memory windows
/// (runtime/windows.hpp, weftCommWindowRegister / ncclCommWindowRegister).
enum class WindowKind : uint8_t {
  None,       ///< in no window
  Default,    ///< in a window that is not a symmetric one mapped by every rank
  Symmetric,  ///< in a symmetric window (NCCL_WIN_COLL_SYMMETRIC) every rank has mapped
};

/// Payload (one rank's larger buffer) from which calls on windows take the copy engines
/// under the default and efficiency policies: below it, the rendezvous kernels and copy
/// launches cost more than the SM path's whole call.
inline constexpr uint64_t kWindowCopyEngineBytes = 4ull << 20;

/// One collective call as decide() sees it.
struct Call {
  Collective collective = Collective::AllReduce;
  uint64_t bytes = 0;     ///< payload of one rank: the larger of its send and receive buffers
  bool in_place = false;
  WindowKind window = WindowKind::None;  ///< where the receive buffer lies (the same on every rank)
  int32_t root = 0;       ///< Broadcast's and Reduce's (the efficiency policy counts its plan's blocks)
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

/// decide()'s answer: the launch, and for the copy engines after an exchange (executor
/// CopyEngineExchange) the launch every rank runs instead when some rank cannot use them
/// (exec/ce_runner.hpp says when): the runtime never chooses by itself.
struct Decision : Launch {
  Launch fallback;  ///< meaningful where executor == CopyEngineExchange
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
  std::string scheduler;    ///< WEFT_SCHEDULER: the scheduler of the sources WEFT_ALGO names; empty: the row's
  std::string proto;        ///< WEFT_PROTO
  int64_t instances = 0;    ///< WEFT_INSTANCES (0: the table's)
  int64_t microbatch = 0;   ///< WEFT_MICROBATCH_BYTES (0: the row's)
  bool generated = false;   ///< WEFT_EXECUTOR=gen
  /// Whether any override is set (WEFT_ALGO, WEFT_PROTO, WEFT_INSTANCES, WEFT_MICROBATCH_BYTES).
  bool overrides() const { return !algo.empty() || !proto.empty() || instances != 0 || microbatch != 0; }
  static DecideEnv from_environment();
};

/// What a communicator is, for the whole of its life (its CTA policy: until
/// weftCommSetCtaPolicy changes it, Decider::set_cta_policy).
struct CommShape {
  int nranks = 1;
  int cta_policy = 0;            ///< tune/cta_policy.hpp: kCtaDefault, kCtaEfficiency or kCtaZero
  bool multi_node = false;       ///< links across nodes (hosts, or WEFT_EMULATE_NODES)
  int connections = 32;          ///< WEFT_CONNECTIONS: the most instances
  uint64_t slot_bytes = 512 << 10;     ///< WEFT_SLOT_BYTES
  uint64_t ll_slot_bytes = 64 << 10;   ///< WEFT_LL_SLOT_BYTES
  /// WEFT_CTA_POLICY, WEFT_CONNECTIONS, WEFT_SLOT_BYTES and WEFT_LL_SLOT_BYTES from the
  /// environment, one node.
  static CommShape from_environment(int nranks);
};

class Decider {
 public:
  /// Resolves WEFT_ALGO for every collective now (loading the algorithms it names to learn
  /// their collectives); an entry that is wrong is thrown by every decide() (as it was by
  /// every call before), not here.
  Decider(std::shared_ptr<const SelectionTable> table, const CommShape& shape, DecideEnv env);

  /// The one decision for `call` (rules 1 to 9 above). Throws InvalidUsage when the table has
  /// no row for it, InvalidArgument for a WEFT_PROTO other than Simple, LL and LL128 or a
  /// WEFT_ALGO entry naming no collective, and what loading a WEFT_ALGO source threw.
  Decision decide(const Call& call) const;

  /// Rules 1 and 2 alone, overrides applied whether or not any is set.
  Chosen chosen(const Call& call) const;

  const SelectionTable& table() const { return *table_; }
  const CommShape& shape() const { return shape_; }
  const DecideEnv& env() const { return env_; }

  /// The CTA policy from now on (the communicator's, agreed by every rank).
  void set_cta_policy(int policy) { shape_.cta_policy = policy; }
  /// The most plan thread blocks of any rank for plan launch `l` of `call` (the same on
  /// every rank), for the efficiency policy (rule 8): the communicator lowers the plan (and
  /// caches it) to count them. Unset, a plan's blocks are taken to be its instances.
  using PlanBlocks = std::function<int(const Call& call, const Launch& l)>;
  void set_plan_blocks(PlanBlocks f) { plan_blocks_ = std::move(f); }

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
  /// Rules 1 to 7.
  Decision decide_launch(const Call& call) const;
  /// Rule 8 on one launch.
  void cap_for_efficiency(const Call& call, Launch* l) const;
  /// Rule 9: whether the copy engines take the call by the windows or the policy.
  bool window_engines(const Call& call, Decision* d) const;

  std::shared_ptr<const SelectionTable> table_;
  CommShape shape_;
  DecideEnv env_;
  std::optional<algo::Protocol> proto_;           ///< WEFT_PROTO, parsed
  std::array<Named, kCollectives> named_;         ///< by Collective
  std::array<std::string, kCollectives> algo_error_;  ///< WEFT_ALGO's error for a collective, if any
  std::array<ErrorCode, kCollectives> algo_error_code_{};
  PlanBlocks plan_blocks_;
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
  int8_t bucket = 0;  ///< scheduler "auto": the call's size bucket (tune/auto_schedule.hpp); 0 for the others
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept {
    uint64_t h = static_cast<uint64_t>(static_cast<uint16_t>(k.algorithm)) | static_cast<uint64_t>(k.collective) << 16 |
                 static_cast<uint64_t>(k.protocol) << 24 | static_cast<uint64_t>(k.executor) << 32 |
                 static_cast<uint64_t>(k.in_place) << 40 | static_cast<uint64_t>(static_cast<uint8_t>(k.bucket)) << 48;
    h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.instances)) << 32 | static_cast<uint32_t>(k.root)) * 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
/// The key of a plan launch `l` of `call` (root: the call's for Broadcast and Reduce; a
/// source under scheduler "auto": the size bucket of call.bytes, one plan per bucket).
inline PlanKey plan_key(const Call& call, const Launch& l, int root) {
  const bool rooted = call.collective == Collective::Broadcast || call.collective == Collective::Reduce;
  const bool by_size = l.algorithm >= algo::kFirstCompiled && algo::registry().at(l.algorithm).auto_schedule();
  return PlanKey{l.algorithm, call.collective, l.protocol,  l.executor, call.in_place, l.instances, rooted ? root : 0,
                 static_cast<int8_t>(by_size ? algo::auto_bucket(call.bytes) : 0)};
}

}  // namespace weft
