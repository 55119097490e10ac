#include "plan/algorithms.hpp"

#include <algorithm>

#include "plan/ce_plan.hpp"
#include "plan/hand_built.hpp"
#include "util/error.hpp"

namespace weft::algo {

namespace {

constexpr uint8_t bit(Collective c) { return static_cast<uint8_t>(1u << static_cast<unsigned>(c)); }

constexpr Collective kStandard[] = {Collective::AllGather, Collective::ReduceScatter, Collective::AllReduce,
                                    Collective::AllToAll,  Collective::Broadcast,     Collective::Reduce};

/// The collectives plan/hand_built.cpp builds the hand-built algorithm `name` for.
uint8_t hand_built_collectives(std::string_view name) {
  uint8_t bits = 0;
  for (Collective c : kStandard)
    for (const std::string& a : hand_built_algorithms(c))
      if (a == name) bits |= bit(c);
  return bits;
}

/// The collectives the copy-engine path implements (plan/ce_plan.hpp).
uint8_t copy_engine_collectives() {
  uint8_t bits = 0;
  for (Collective c : kStandard)
    if (ce::supports(c)) bits |= bit(c);
  return bits;
}

static_assert(std::string_view(kCopyEngineName) == ce::kAlgorithm, "the copy-engine path's name is plan/ce_plan.hpp's");

}  // namespace

std::string_view to_string(Executor e) {
  switch (e) {
    case Executor::OneShot: return "oneshot";
    case Executor::CopyEngineExchange: return "copy engines";
    case Executor::CopyEngineDirect: return "copy engines, direct";
    case Executor::Interpreter: return "interp";
    case Executor::Generated: return "gen";
  }
  return "?";
}

std::string_view to_string(Protocol p) {
  switch (p) {
    case Protocol::Simple: return "Simple";
    case Protocol::LL: return "LL";
    case Protocol::LL128: return "LL128";
  }
  return "?";
}

std::optional<Protocol> protocol_from_string(std::string_view s) {
  for (Protocol p : {Protocol::Simple, Protocol::LL, Protocol::LL128})
    if (s == to_string(p)) return p;
  return std::nullopt;
}

std::unique_ptr<Algorithm> Registry::make(std::string name, Executor e, PlanOrigin o, Limits l, std::string scheduler,
                                          std::string allocator) {
  return std::unique_ptr<Algorithm>(new Algorithm(std::move(name), e, o, l, std::move(scheduler), std::move(allocator)));
}

Registry::Registry() {
  // The one-shot kernel: AllReduce, AllGather, ReduceScatter on 2 to 8 ranks, 1 MiB per
  // rank and peer (plan/oneshot_limits.hpp), LL by nature; it stores into every peer's
  // memory, which only ranks of one node map.
  Limits oneshot_limits;
  // Broadcast, Reduce and AllToAll where WEFT_ALGO names it for them, or a table's row does
  // (docs/runtime.md, "The one-shot kernel"); a bare WEFT_ALGO=oneshot names the other three.
  oneshot_limits.collectives = bit(Collective::AllReduce) | bit(Collective::AllGather) | bit(Collective::ReduceScatter) |
                               bit(Collective::Broadcast) | bit(Collective::Reduce) | bit(Collective::AllToAll);
  oneshot_limits.min_ranks = 2;
  oneshot_limits.max_ranks = exec::kOneShotMaxRanks;
  oneshot_limits.max_peer_bytes = exec::kOneShotMaxBytes;
  oneshot_limits.across_nodes = false;
  oneshot_limits.protocols = protocol_bit(Protocol::LL);
  add(make(kOneShotName, Executor::OneShot, PlanOrigin::None, oneshot_limits));
  // The copy engines: plan/ce_plan.hpp's collectives on 2 to ce::kMaxRanks ranks (their
  // programs travel as kernel arguments), into the peers' mapped buffers (one host).
  Limits ce_limits;
  ce_limits.collectives = copy_engine_collectives();
  ce_limits.min_ranks = 2;
  ce_limits.max_ranks = ce::kMaxRanks;
  ce_limits.across_nodes = false;
  add(make(kCopyEngineName, Executor::CopyEngineExchange, PlanOrigin::None, ce_limits));
  // The hand-built plans, for the collectives plan/hand_built.cpp builds each for.
  for (const char* name : {"ring", "allpairs", "chain"}) {
    Limits l;
    l.collectives = hand_built_collectives(name);
    add(make(name, Executor::Interpreter, PlanOrigin::HandBuilt, l));
  }
}

Id Registry::add(std::unique_ptr<Algorithm> a) {
  const size_t n = count_.load(std::memory_order_relaxed);
  if (n >= kCapacity)
    fail(ErrorCode::Internal, "the algorithm registry holds " + std::to_string(kCapacity) +
                                  " algorithms, no more: '" + a->name() + "' was not registered");
  a->id_ = static_cast<Id>(n);
  slots_[n].store(a.get(), std::memory_order_release);
  owned_.push_back(std::move(a));
  count_.store(n + 1, std::memory_order_release);
  return static_cast<Id>(n);
}

Id Registry::named(std::string_view name) const {
  for (Id id = 0; id < kFirstCompiled; ++id)
    if (at(id).name() == name) return id;
  return kNone;
}

Id Registry::compiled(const std::string& name, const std::string& scheduler, const std::string& allocator) {
  if (named(name) != kNone)
    fail(ErrorCode::InvalidArgument, "'" + name + "' is a named primitive, not a source to compile");
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_tuple(name, scheduler, allocator);
  auto it = compiled_.find(key);
  if (it != compiled_.end()) return it->second;
  // Any standard collective: the source's own is checked when its plan is built.
  Limits l;
  for (Collective c : kStandard) l.collectives |= bit(c);
  const Id id = add(make(name, Executor::Interpreter, PlanOrigin::Compiled, l, scheduler, allocator));
  compiled_.emplace(std::move(key), id);
  return id;
}

bool is_hand_built(std::string_view name) {
  const Id id = registry().named(name);
  return id != kNone && registry().at(id).plan_origin() == PlanOrigin::HandBuilt;
}

}  // namespace weft::algo
