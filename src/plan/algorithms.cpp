#include "plan/algorithms.hpp"

#include <algorithm>

#include "util/error.hpp"

namespace weft::algo {

namespace {

const std::string kEmpty;

constexpr uint8_t bit(Collective c) { return static_cast<uint8_t>(1u << static_cast<unsigned>(c)); }

class OneShotAlgorithm final : public Algorithm {
 public:
  OneShotAlgorithm() : Algorithm(kOneShotName) {}
  Executor executor() const override { return Executor::OneShot; }
  bool implements(Collective c) const override {
    return c == Collective::AllReduce || c == Collective::AllGather || c == Collective::ReduceScatter;
  }
  int min_ranks() const override { return 2; }
  int max_ranks() const override { return oneshot::kMaxRanks; }
  uint64_t max_peer_bytes() const override { return oneshot::kMaxPeerBytes; }
  // It stores into every peer's memory, which only ranks of one node map.
  bool across_nodes() const override { return false; }
  ProtocolSet protocols() const override { return protocol_bit(Protocol::LL); }
};

class CopyEngineAlgorithm final : public Algorithm {
 public:
  CopyEngineAlgorithm() : Algorithm(kCopyEngineName) {}
  Executor executor() const override { return Executor::CopyEngine; }
  bool implements(Collective c) const override { return c == Collective::AllGather || c == Collective::AllReduce; }
  int min_ranks() const override { return 2; }
  // Its programs travel as kernel arguments (runtime/ce_plan.hpp, ce::kMaxRanks).
  int max_ranks() const override { return 8; }
  // The copy engines write into the peers' mapped buffers (one host).
  bool across_nodes() const override { return false; }
};

class HandBuiltAlgorithm final : public Algorithm {
 public:
  HandBuiltAlgorithm(const char* name, uint8_t collectives) : Algorithm(name), collectives_(collectives) {}
  Executor executor() const override { return Executor::Interpreter; }
  PlanOrigin plan_origin() const override { return PlanOrigin::HandBuilt; }
  bool implements(Collective c) const override { return (collectives_ & bit(c)) != 0; }

 private:
  uint8_t collectives_;
};

class CompiledAlgorithm final : public Algorithm {
 public:
  CompiledAlgorithm(std::string name, std::string scheduler, std::string allocator)
      : Algorithm(std::move(name)), scheduler_(std::move(scheduler)), allocator_(std::move(allocator)) {}
  Executor executor() const override { return Executor::Interpreter; }
  PlanOrigin plan_origin() const override { return PlanOrigin::Compiled; }
  const std::string& scheduler() const override { return scheduler_; }
  const std::string& allocator() const override { return allocator_; }
  bool implements(Collective c) const override { return c != Collective::Custom; }

 private:
  std::string scheduler_, allocator_;
};

// The hand-built plans by collective (runtime/builtin_plans.cpp's builders; the unit tests
// check that the two agree).
constexpr uint8_t kRingCollectives = bit(Collective::AllReduce) | bit(Collective::AllGather) | bit(Collective::ReduceScatter);
constexpr uint8_t kAllPairsCollectives = kRingCollectives | bit(Collective::AllToAll) | bit(Collective::Broadcast) |
                                         bit(Collective::Reduce);
constexpr uint8_t kChainCollectives = bit(Collective::Broadcast) | bit(Collective::Reduce);

}  // namespace

std::string_view to_string(Executor e) {
  switch (e) {
    case Executor::OneShot: return "oneshot";
    case Executor::CopyEngine: return "copy engines";
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

const std::string& Algorithm::scheduler() const { return kEmpty; }
const std::string& Algorithm::allocator() const { return kEmpty; }

bool Algorithm::supports(const CallShape& s) const {
  return implements(s.collective) && s.nranks >= min_ranks() && s.nranks <= max_ranks() &&
         peer_bytes(s.collective, s.bytes, s.nranks) <= max_peer_bytes() && (!s.multi_node || across_nodes());
}

Registry& Registry::get() {
  static Registry r;
  return r;
}

Registry::Registry() {
  add(std::make_unique<OneShotAlgorithm>());
  add(std::make_unique<CopyEngineAlgorithm>());
  add(std::make_unique<HandBuiltAlgorithm>("ring", kRingCollectives));
  add(std::make_unique<HandBuiltAlgorithm>("allpairs", kAllPairsCollectives));
  add(std::make_unique<HandBuiltAlgorithm>("chain", kChainCollectives));
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
  const Id id = add(std::make_unique<CompiledAlgorithm>(name, scheduler, allocator));
  compiled_.emplace(std::move(key), id);
  return id;
}

bool is_hand_built(std::string_view name) {
  const Id id = registry().named(name);
  return id != kNone && registry().at(id).plan_origin() == PlanOrigin::HandBuilt;
}

int oneshot_blocks(uint64_t peer_bytes) {
  const uint64_t words = (peer_bytes + 7) / 8;
  const uint64_t per_block_max = static_cast<uint64_t>(oneshot::kThreads) * oneshot::kWordsPerThread;
  uint64_t b = std::min<uint64_t>((words + oneshot::kThreads - 1) / oneshot::kThreads, 16);
  b = std::max<uint64_t>(b, (words + per_block_max - 1) / per_block_max);
  return static_cast<int>(std::clamp<uint64_t>(b, 1, oneshot::kBlocks));
}

}  // namespace weft::algo
