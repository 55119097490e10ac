// The algorithms that can run a collective call, each known by a small integer id: what
// each supports (collectives, rank counts, bytes per rank and peer, links across nodes,
// protocols) and how it runs a call (an executor; for plans, whether the plan is hand-built
// or compiled).
//
//   id  name      executor            plan
//   0   oneshot   OneShot             none: the one-shot kernel (exec/oneshot.hpp)
//   1   ce        CopyEngineExchange  none here: copy engines into registered buffers
//                                     (plan/ce_plan.hpp, run by exec/ce_runner.hpp)
//   2   ring      Interpreter         hand-built (plan/hand_built.hpp)
//   3   allpairs  Interpreter         hand-built
//   4   chain     Interpreter         hand-built
//   5.. a source  Interpreter         compiled by the plan builder (plan/builder.hpp): an
//                                     algorithm of algorithms/, dsl:NAME or a file, with a
//                                     scheduler (or "auto": tune/auto_schedule.hpp) and
//                                     allocator
//
// A plan algorithm runs on the interpreter or on a kernel generated for the plan
// (Executor::Generated): decide() (tune/decide.hpp) chooses per call. Compiled sources are
// registered when a selection table or WEFT_ALGO first names them, one id per source,
// scheduler and allocator, and keep it for the life of the process.
//
// The runtime (tune/decide.cpp chooses, runtime/collectives.cpp runs), the simulator's call
// model (sim/call_model.hpp) and `weft bench --predict` ask these objects; none keeps a copy
// of their rules.
//
// The name: ir/algorithm.hpp's weft::Algorithm is what a front-end writes (chunks and
// transfers); this header's weft::algo::Algorithm is a way the runtime can run a call.
#pragma once

#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ir/algorithm.hpp"
#include "plan/oneshot_limits.hpp"

namespace weft::algo {

/// How a call runs.
enum class Executor : uint8_t {
  OneShot,      ///< the one-shot kernel: LL packets into every peer's memory, no plan
  CopyEngineExchange,  ///< copy engines into the peers' registered buffers or windows, after a per-call exchange
  CopyEngineDirect,    ///< copy engines into the peers' symmetric windows, mapped at registration: no exchange
  Interpreter,  ///< a plan, run by the plan interpreter (exec/executor.hpp)
  Generated,    ///< a plan, run by a kernel generated for it (gen/kernels.hpp)
};
std::string_view to_string(Executor e);

/// A plan's wire protocol; the values are exec::Protocol's (exec/exec_plan.hpp).
enum class Protocol : uint8_t { Simple = 0, LL = 1, LL128 = 2 };
/// "Simple", "LL", "LL128".
std::string_view to_string(Protocol p);
/// The protocol named exactly so; nullopt otherwise.
std::optional<Protocol> protocol_from_string(std::string_view s);

/// A set of protocols, one bit per Protocol value.
using ProtocolSet = uint8_t;
constexpr ProtocolSet protocol_bit(Protocol p) { return static_cast<ProtocolSet>(1u << static_cast<unsigned>(p)); }
inline constexpr ProtocolSet kAllProtocols = 0x7;

/// Where a plan algorithm's plan comes from.
enum class PlanOrigin : uint8_t {
  None,       ///< no plan (oneshot, ce)
  HandBuilt,  ///< plan/hand_built.hpp builds it for any rank count
  Compiled,   ///< the plan builder loads and compiles (or reads) a source
};

using Id = int16_t;
inline constexpr Id kNone = -1;
inline constexpr Id kOneShot = 0;
inline constexpr Id kCopyEngine = 1;
inline constexpr Id kRing = 2;
inline constexpr Id kAllPairs = 3;
inline constexpr Id kChain = 4;
/// The first id of a compiled source.
inline constexpr Id kFirstCompiled = 5;

/// The names selection tables and WEFT_ALGO use for the first two.
inline constexpr const char* kOneShotName = "oneshot";
inline constexpr const char* kCopyEngineName = "ce";

/// Payload bytes per rank and peer for `bytes` of payload (the larger of one rank's send and
/// receive buffers): `bytes` for AllReduce, Broadcast and Reduce; AllGather's output,
/// ReduceScatter's input and AllToAll's buffers hold one such part per rank.
constexpr uint64_t peer_bytes(Collective c, uint64_t bytes, int nranks) {
  const bool whole = c == Collective::AllReduce || c == Collective::Broadcast || c == Collective::Reduce;
  return whole ? bytes : bytes / static_cast<uint64_t>(nranks > 1 ? nranks : 1);
}

/// One call as the algorithms' limits see it.
struct CallShape {
  Collective collective = Collective::AllReduce;
  uint64_t bytes = 0;        ///< payload of one rank: the larger of its send and receive buffers
  int nranks = 1;
  bool multi_node = false;   ///< the communicator has links across nodes (the network transport)
};

/// What an algorithm can carry: its collectives, rank counts, bytes per rank and peer, links
/// across nodes and protocols.
struct Limits {
  uint8_t collectives = 0;          ///< one bit (1 << Collective) per collective it implements
  int min_ranks = 1, max_ranks = INT_MAX;
  uint64_t max_peer_bytes = UINT64_MAX;  ///< the most payload per rank and peer (peer_bytes)
  bool across_nodes = true;         ///< runs where links cross nodes (only Simple messages cross them)
  ProtocolSet protocols = kAllProtocols;
};

/// A way to run a collective call: one class, four kinds (oneshot, ce, hand-built plans,
/// compiled sources), each made once by the registry and described by its data, so that
/// asking it costs no virtual call. Every algorithm runs in place and out of place, except a
/// plan file, which runs the placement it was compiled for (the plan builder refuses the
/// other when it builds the plan).
class Algorithm {
 public:
  Algorithm(const Algorithm&) = delete;
  Algorithm& operator=(const Algorithm&) = delete;

  Id id() const { return id_; }
  /// As selection tables and WEFT_ALGO name it ("oneshot", "ring", "ring_allreduce", "dsl:x", a path).
  const std::string& name() const { return name_; }
  /// How it runs a call: OneShot, CopyEngineExchange (decide() runs it as CopyEngineDirect
  /// on symmetric windows), or Interpreter for a plan (which decide() may
  /// run on a generated kernel instead).
  Executor executor() const { return executor_; }
  PlanOrigin plan_origin() const { return origin_; }
  /// Compiled sources: the compiler's scheduler and allocator; empty for the others.
  const std::string& scheduler() const { return scheduler_; }
  const std::string& allocator() const { return allocator_; }
  /// Scheduler "auto": the schedule is chosen per size bucket (tune/auto_schedule.hpp).
  bool auto_schedule() const { return auto_; }
  const Limits& limits() const { return limits_; }

  /// Whether it implements `c`. A compiled source answers for every standard collective: the
  /// one it implements is known once it is loaded, and the plan builder refuses another
  /// (make_plan, InvalidArgument); WEFT_ALGO asks the loaded source (tune/decide.cpp).
  bool implements(Collective c) const { return (limits_.collectives >> static_cast<unsigned>(c)) & 1u; }
  int min_ranks() const { return limits_.min_ranks; }
  int max_ranks() const { return limits_.max_ranks; }
  uint64_t max_peer_bytes() const { return limits_.max_peer_bytes; }
  bool across_nodes() const { return limits_.across_nodes; }
  ProtocolSet protocols() const { return limits_.protocols; }

  /// Whether it can carry the call: a collective it implements, a rank count within its
  /// limits, at most max_peer_bytes per rank and peer, and no link across nodes unless it
  /// runs there.
  bool supports(const CallShape& s) const {
    return implements(s.collective) && s.nranks >= limits_.min_ranks && s.nranks <= limits_.max_ranks &&
           peer_bytes(s.collective, s.bytes, s.nranks) <= limits_.max_peer_bytes && (!s.multi_node || limits_.across_nodes);
  }

 private:
  friend class Registry;
  Algorithm(std::string name, Executor executor, PlanOrigin origin, Limits limits, std::string scheduler = {},
            std::string allocator = {})
      : name_(std::move(name)), executor_(executor), origin_(origin), limits_(limits), scheduler_(std::move(scheduler)),
        allocator_(std::move(allocator)), auto_(scheduler_ == "auto") {}

  Id id_ = kNone;
  std::string name_;
  Executor executor_;
  PlanOrigin origin_;
  Limits limits_;
  std::string scheduler_, allocator_;
  bool auto_ = false;
};

/// Every algorithm of the process, by id: the named primitives at their fixed ids, then the
/// compiled sources in the order they were first named. at() takes no lock (ids are only
/// ever added) and, like supports(), is inline: deciding a call enters no other file.
class Registry {
 public:
  static Registry& get() {
    static Registry r;  // one per process (an inline function's static)
    return r;
  }

  /// The algorithm of `id`; `id` must be one this registry gave out.
  const Algorithm& at(Id id) const { return *slots_[static_cast<size_t>(id)].load(std::memory_order_acquire); }
  /// The named primitive called `name` (oneshot, ce, ring, allpairs, chain), or kNone.
  Id named(std::string_view name) const;
  /// The compiled source `name` (an algorithm of algorithms/, dsl:NAME or a file) under the
  /// compiler's `scheduler` and `allocator`: registered when first asked for, the same id
  /// after. Throws InvalidArgument for a named primitive's name, and Internal past kCapacity
  /// distinct sources.
  Id compiled(const std::string& name, const std::string& scheduler, const std::string& allocator);
  /// How many ids are given out.
  size_t size() const { return count_.load(std::memory_order_acquire); }

  static constexpr size_t kCapacity = 4096;

 private:
  Registry();
  Id add(std::unique_ptr<Algorithm> a);
  static std::unique_ptr<Algorithm> make(std::string name, Executor e, PlanOrigin o, Limits l, std::string scheduler = {},
                                         std::string allocator = {});

  std::array<std::atomic<const Algorithm*>, kCapacity> slots_{};
  std::atomic<size_t> count_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<Algorithm>> owned_;
  std::map<std::tuple<std::string, std::string, std::string>, Id> compiled_;
};

inline Registry& registry() { return Registry::get(); }

/// Whether the hand-built plans have one called `name` (ring, allpairs, chain).
bool is_hand_built(std::string_view name);

/// The one-shot kernel's thread blocks for `peer_bytes` per rank and peer (a selection row's
/// "kernel" instances): one 8-byte word per thread (512 threads) up to 16 blocks, then more
/// words per thread; within 1..exec::kOneShotBlocks.
constexpr int oneshot_blocks(uint64_t peer_bytes) {
  const uint64_t words = (peer_bytes + 7) / 8;
  const uint64_t per_block_max = static_cast<uint64_t>(exec::kOneShotThreads) * exec::kOneShotWordsPerThread;
  uint64_t b = (words + exec::kOneShotThreads - 1) / exec::kOneShotThreads;
  b = b < 16 ? b : 16;
  const uint64_t need = (words + per_block_max - 1) / per_block_max;
  b = b > need ? b : need;
  return static_cast<int>(b < 1 ? 1 : b > exec::kOneShotBlocks ? exec::kOneShotBlocks : b);
}

/// Scheduler "auto" (tune/auto_schedule.hpp): a call of `bytes` falls in size bucket
/// ceil(log2(bytes)), at least kAutoMinBucket (every call of at most 4 KiB shares one bucket)
/// and at most kAutoMaxBucket.
inline constexpr int kAutoMinBucket = 12, kAutoMaxBucket = 40;
constexpr int auto_bucket(uint64_t bytes) {
  int b = 0;
  while (b < kAutoMaxBucket && (uint64_t{1} << b) < bytes) ++b;
  return b < kAutoMinBucket ? kAutoMinBucket : b;
}
/// The size a bucket is chosen at: 2^bucket bytes (its largest call).
constexpr uint64_t auto_bucket_bytes(int bucket) { return uint64_t{1} << bucket; }

}  // namespace weft::algo
