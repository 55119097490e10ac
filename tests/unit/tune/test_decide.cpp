// decide() (tune/decide.hpp) over the shipped selection table against the rules
// docs/runtime.md states ("Algorithms and the selection table", "Mid sizes on 3 to 8 ranks",
// "The one decision", "Memory windows and CTA policies"), written
// out here as this test's own expectations; the overrides; the algorithm registry; the
// simulator's call model and `weft bench --predict` asking the same objects as the runtime.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "exec/oneshot.hpp"
#include "plan/hand_built.hpp"
#include "plan/ce_plan.hpp"
#include "sim/call_model.hpp"
#include "tune/cta_policy.hpp"
#include "tune/decide.hpp"
#include "util/error.hpp"

// Counts operator new while `g_counting` is set: deciding a call must allocate nothing.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
bool g_counting = false;
size_t g_allocations = 0;
}  // namespace
void* operator new(size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace weft {
namespace {

using algo::Executor;
using algo::Protocol;

const Collective kCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                   Collective::AllToAll,  Collective::Broadcast, Collective::Reduce};

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

/// 0, every power of two to 1 GiB, the odd sizes beside them, and the table's boundaries.
std::vector<uint64_t> sizes() {
  std::vector<uint64_t> s = {0};
  for (int k = 0; k <= 30; ++k) {
    const uint64_t p = 1ull << k;
    s.push_back(p);
    if (k >= 2) s.push_back(p - 1);
    s.push_back(p + 1);
    if (k <= 28) s.push_back(3 * p + 5);
  }
  for (uint64_t b : {uint64_t{786431}, uint64_t{786432}, 2 * MiB - 1, 128 * KiB + 8}) s.push_back(b);
  return s;
}

/// What docs/runtime.md says runs: the algorithm, its scheduler ("" for hand-built plans and
/// the kernel), protocol, instances and executor.
struct Want {
  std::string algorithm, scheduler;
  Protocol protocol = Protocol::Simple;
  int instances = 1;
  Executor executor = Executor::Interpreter;
};

int clamp_div(uint64_t bytes, uint64_t per, int lo, int hi) {
  const uint64_t n = bytes / per;
  return n < static_cast<uint64_t>(lo) ? lo : n > static_cast<uint64_t>(hi) ? hi : static_cast<int>(n);
}

/// The rows for mid sizes on 3 to 8 ranks (docs/runtime.md, "Mid sizes on 3 to 8 ranks"),
/// which come before the others there (their one-shot row is in documented()).
std::optional<Want> mid_size(Collective c, uint64_t bytes, int R, bool in_place) {
  if (R < 3 || R > 8) return std::nullopt;
  auto want = [](const char* name, const char* scheduler, Protocol p, int instances) {
    return Want{name, scheduler, p, instances, Executor::Interpreter};
  };
  auto within = [&](uint64_t lo, uint64_t hi) { return bytes >= lo && bytes <= hi; };
  switch (c) {
    case Collective::AllReduce:
      if (within(128 * KiB + 1, MiB)) return want("twoshot_allreduce", "hpds", Protocol::LL, 8);
      if (within(MiB + 1, 2 * MiB)) return want("ring_allreduce", "algo", Protocol::LL, 24);
      break;
    case Collective::ReduceScatter:
      if (within(128 * KiB + 1, 2 * MiB)) return want("twoshot_reducescatter", "algo", Protocol::LL, 16);
      break;
    case Collective::AllGather:
      if (within(128 * KiB + 1, 2 * MiB)) return want("allpairs_allgather", "algo", Protocol::LL, 8);
      if (R >= 4 && !in_place && within(2 * MiB + 1, 8 * MiB)) return want("allpairs_allgather", "algo", Protocol::Simple, 8);
      break;
    case Collective::Broadcast:
      if (bytes <= 128 * KiB) return want("direct_broadcast", "algo", Protocol::LL, clamp_div(bytes, 8 * KiB, 1, 8));
      if (R <= 4 && bytes <= 2 * MiB) return want("direct_broadcast", "algo", Protocol::LL, 16);
      if (R >= 5 && bytes <= 2 * MiB) return want("scatter_broadcast", "hpds", Protocol::LL, 4);
      if (R >= 5 && bytes < 16 * MiB) return want("scatter_broadcast", "hpds", Protocol::Simple, 4);
      if (bytes >= 16 * MiB) return want("pipe_broadcast", "algo", Protocol::Simple, 24);
      break;
    case Collective::Reduce:
      if (within(128 * KiB + 1, 2 * MiB)) return want("pipe_reduce", "algo", Protocol::LL, 24);
      if (within(2 * MiB + 1, 32 * MiB)) return want("chain_reduce", "algo", Protocol::Simple, 24);
      break;
    case Collective::AllToAll:
      if (!in_place && bytes <= MiB) return want("alltoall_direct", "algo", Protocol::LL, clamp_div(bytes, 8 * KiB, 1, 4));
      break;
    default: break;
  }
  return std::nullopt;
}

/// The default table, as its table in docs/runtime.md puts it, and the decision's rules for
/// links across nodes (no one-shot kernel; Simple only).
Want documented(Collective c, uint64_t bytes, int R, bool in_place, bool multi_node) {
  // Broadcast and Reduce take it on 2 ranks (measured there; their payload per peer is the
  // whole payload).
  const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
  const bool a2a_two = c == Collective::AllToAll && R == 2 && !in_place;  // measured on 2 ranks, out of place
  const bool kernel_collective = c == Collective::AllReduce || c == Collective::AllGather ||
                                 c == Collective::ReduceScatter || (rooted && R == 2) || a2a_two;
  const uint64_t per_peer = c == Collective::AllReduce || rooted ? bytes : bytes / static_cast<uint64_t>(R);
  // "2 to 8 ranks, while each rank sends at most 512 KiB ((R - 1) x the payload per peer)",
  // and AllReduce on 3 to 8 ranks while each rank sends at most 1 MiB (the mid-size rows):
  // the one-shot kernel, LL; thread blocks one per 4 KiB per peer up to 16 (64 KiB), then one
  // per 16 KiB, up to 32; never across nodes.
  // On 2 ranks AllReduce, AllGather, ReduceScatter and AllToAll up to 1 MiB sent (measured,
  // session 9); the per-16-KiB blocks then reach 64.
  const bool two_mib = R == 2 && (c == Collective::AllReduce || c == Collective::AllGather ||
                                  c == Collective::ReduceScatter || c == Collective::AllToAll);
  const uint64_t sent_limit = (c == Collective::AllReduce && R >= 3 && R <= 8) || two_mib ? MiB : 512 * KiB;
  if (kernel_collective && !multi_node && R >= 2 && R <= 8 && static_cast<uint64_t>(R - 1) * per_peer <= sent_limit) {
    const uint64_t by4 = std::min<uint64_t>((per_peer + 4 * KiB - 1) / (4 * KiB), 16);
    const uint64_t by16 = (per_peer + 16 * KiB - 1) / (16 * KiB);
    const int blocks = static_cast<int>(std::clamp<uint64_t>(std::max(by4, by16), 1, 64));
    return Want{"oneshot", "", Protocol::LL, blocks, Executor::OneShot};
  }
  if (std::optional<Want> m = mid_size(c, bytes, R, in_place)) {
    // Across nodes every protocol runs as Simple.
    if (multi_node) m->protocol = Protocol::Simple;
    return *m;
  }
  Want w;
  const bool small = bytes <= 128 * KiB;
  w.protocol = small ? Protocol::LL : Protocol::Simple;
  w.instances = small ? clamp_div(bytes, 8 * KiB, 1, 16) : clamp_div(bytes, 32 * KiB, 4, 24);
  auto compiled = [&](const char* name, const char* scheduler) {
    w.algorithm = name;
    w.scheduler = scheduler;
  };
  switch (c) {
    case Collective::AllReduce:
      if (small || (R <= 2 && !(R == 2 && in_place && bytes >= 2 * MiB))) w.algorithm = "allpairs";
      else compiled("ring_allreduce", "algo");
      break;
    case Collective::AllGather:
      if (R == 2) compiled("allpairs_allgather", "hpds");
      else if (small) compiled("peerwise_allgather", "algo");
      else compiled("ring_allgather", "algo");
      break;
    case Collective::ReduceScatter:
      if (small && R > 2) w.algorithm = "allpairs";
      else compiled("ring_reducescatter", "algo");
      break;
    case Collective::Broadcast: small ? compiled("allpairs_broadcast", "algo") : compiled("pipe_broadcast", "hpds"); break;
    case Collective::Reduce: small ? compiled("allpairs_reduce", "algo") : compiled("pipe_reduce", "hpds"); break;
    case Collective::AllToAll:
      if (in_place) w.algorithm = "allpairs";
      else if (!small && R >= 4 && R <= 8 && bytes >= 768 * KiB) compiled("alltoall_direct", "hpds");
      else compiled("peerwise_alltoall", "algo");
      break;
    default: break;
  }
  // Across nodes every protocol runs as Simple.
  if (multi_node) w.protocol = Protocol::Simple;
  return w;
}

// default.json alone: the rules these tests check are its rows (docs/runtime.md); the
// measured tables per rank count (selection/ranks-N.json) go before it at run time.
std::shared_ptr<const SelectionTable> default_table() {
  return std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &default_json_table());
}

CommShape one_node(int R) {
  CommShape s;
  s.nranks = R;
  return s;
}

std::string where(Collective c, uint64_t b, int R, bool in_place, bool multi_node) {
  std::ostringstream o;
  o << to_string(c) << " of " << b << " B on " << R << " ranks, " << (in_place ? "in place" : "out of place")
    << (multi_node ? ", across nodes" : ", one node");
  return o.str();
}

TEST(Decide, ShippedTableFollowsTheDocumentedRules) {
  size_t checked = 0;
  for (int R = 1; R <= 16; ++R)
    for (bool multi_node : {false, true}) {
      CommShape shape = one_node(R);
      shape.multi_node = multi_node;
      const Decider d(default_table(), shape, DecideEnv{});
      for (Collective c : kCollectives)
        for (uint64_t b : sizes())
          for (bool in_place : {false, true}) {
            const Want w = documented(c, b, R, in_place, multi_node);
            const Decision got = d.decide(Call{c, b, in_place});
            const algo::Algorithm& a = algo::registry().at(got.algorithm);
            const std::string at = where(c, b, R, in_place, multi_node);
            ASSERT_EQ(a.name(), w.algorithm) << at;
            EXPECT_EQ(a.scheduler(), w.scheduler) << at;
            if (!w.scheduler.empty()) {
              EXPECT_EQ(a.allocator(), "state") << at;
            }
            EXPECT_EQ(a.plan_origin(), w.algorithm == "oneshot" ? algo::PlanOrigin::None
                                       : w.scheduler.empty()    ? algo::PlanOrigin::HandBuilt
                                                                : algo::PlanOrigin::Compiled)
                << at;
            EXPECT_EQ(got.executor, w.executor) << at;
            EXPECT_EQ(got.protocol, w.protocol) << at;
            EXPECT_EQ(got.instances, w.instances) << at;
            EXPECT_EQ(got.microbatch_bytes, 0u) << at;
            // Across nodes LL runs as Simple, and says so.
            const bool demoted = multi_node && got.chosen == Protocol::LL;
            EXPECT_EQ(got.note, demoted ? ProtocolNote::AcrossNetwork : ProtocolNote::None) << at;
            ++checked;
          }
    }
  EXPECT_EQ(checked, 16u * 2 * 6 * 2 * sizes().size());
}

TEST(Decide, PlanExecutorFollowsTheRowThenWeftExecutorNeverLL128OrAcrossNodes) {
  const SelectionTable t = parse_selection_table(R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllReduce"], "bytes": [0, 1024], "algorithm": "allpairs", "protocol": "LL", "instances": 2, "executor": "gen"},
    {"collectives": ["AllReduce"], "bytes": [1025, 4096], "algorithm": "allpairs", "protocol": "LL", "instances": 2, "executor": "interp"},
    {"collectives": ["AllReduce"], "bytes": [4097, 8192], "algorithm": "ring", "protocol": "LL128", "instances": 2, "executor": "gen"},
    {"collectives": ["AllReduce"], "algorithm": "ring", "protocol": "Simple", "instances": 2, "microbatch_bytes": 4096}
  ]})", "executors.json");
  const auto shared = std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &t);
  for (bool env_gen : {false, true})
    for (bool multi_node : {false, true}) {
      CommShape s = one_node(4);
      s.multi_node = multi_node;
      DecideEnv env;
      env.generated = env_gen;
      const Decider d(shared, s, env);
      auto exec = [&](uint64_t b) { return d.decide(Call{Collective::AllReduce, b, false}).executor; };
      const Executor gen = multi_node ? Executor::Interpreter : Executor::Generated;
      EXPECT_EQ(exec(512), gen);                                                       // the row says gen
      EXPECT_EQ(exec(2048), Executor::Interpreter);                                    // the row says interp
      EXPECT_EQ(exec(6000), multi_node ? gen : Executor::Interpreter);                 // LL128: interp (across nodes: Simple)
      EXPECT_EQ(exec(1 << 20), env_gen && !multi_node ? Executor::Generated : Executor::Interpreter);  // WEFT_EXECUTOR
      EXPECT_EQ(d.decide(Call{Collective::AllReduce, 1 << 20, false}).microbatch_bytes, 4096u);
    }
  // WEFT_MICROBATCH_BYTES wins over the row's.
  DecideEnv env;
  env.microbatch = 1 << 16;
  EXPECT_EQ(Decider(shared, one_node(4), env).decide(Call{Collective::AllReduce, 1 << 20, false}).microbatch_bytes, 1u << 16);
}

TEST(Decide, LL128RunsAsSimpleOnUnalignedSlots) {
  DecideEnv env;
  env.proto = "LL128";
  CommShape s = one_node(4);
  EXPECT_EQ(Decider(default_table(), s, env).decide(Call{Collective::AllReduce, 1 << 20, false}).protocol, Protocol::LL128);
  s.slot_bytes = 65552;  // a multiple of 16, not of 128
  const Decision d = Decider(default_table(), s, env).decide(Call{Collective::AllReduce, 1 << 20, false});
  EXPECT_EQ(d.protocol, Protocol::Simple);
  EXPECT_EQ(d.chosen, Protocol::LL128);
  EXPECT_EQ(d.note, ProtocolNote::LL128Unaligned);
  EXPECT_NE(describe(d.note, d.chosen, s.slot_bytes, s.ll_slot_bytes).find("WEFT_SLOT_BYTES (65552)"), std::string::npos);
}

Decision decide_with(const DecideEnv& env, Collective c, uint64_t b, int R, bool in_place = false, int connections = 32,
                     bool multi_node = false) {
  CommShape s = one_node(R);
  s.connections = connections;
  s.multi_node = multi_node;
  return Decider(default_table(), s, env).decide(Call{c, b, in_place});
}

std::string name_of(const Launch& l) { return algo::registry().at(l.algorithm).name(); }

TEST(Decide, WeftAlgoNamesTheAlgorithmOfTheCollectivesItImplements) {
  DecideEnv env;
  env.algo = "ring";
  // A hand-built plan, for the collectives that have one; the row's protocol and instances.
  Decision d = decide_with(env, Collective::AllReduce, 64 * KiB, 4);
  EXPECT_EQ(name_of(d), "ring");
  EXPECT_EQ(d.protocol, Protocol::LL);
  EXPECT_EQ(d.instances, 8);
  EXPECT_EQ(name_of(decide_with(env, Collective::Broadcast, 64 * KiB, 4)), "direct_broadcast");  // no ring there
  // No ring for Broadcast: the table's row, on 2 ranks the one-shot kernel up to 512 KiB.
  EXPECT_EQ(name_of(decide_with(env, Collective::Broadcast, 64 * KiB, 2)), "oneshot");
  EXPECT_EQ(name_of(decide_with(env, Collective::Broadcast, 1 * MiB, 2)), "pipe_broadcast");
  // The one-shot kernel's calls go to the plans when another algorithm is named.
  d = decide_with(env, Collective::AllReduce, 8, 2);
  EXPECT_EQ(name_of(d), "ring");
  EXPECT_EQ(d.executor, Executor::Interpreter);
  // "Collective:name" for one collective; the last entry wins; a compiled source keeps the
  // row's scheduler.
  env.algo = "AllReduce:allpairs, AllReduce:ring_allreduce";
  d = decide_with(env, Collective::AllReduce, 256 * MiB, 4);
  EXPECT_EQ(name_of(d), "ring_allreduce");
  EXPECT_EQ(algo::registry().at(d.algorithm).scheduler(), "algo");
  EXPECT_EQ(name_of(decide_with(env, Collective::AllGather, 256 * MiB, 4)), "ring_allgather");  // the table's
  // A bare compiled name applies to the collective it implements.
  env.algo = "ring_reducescatter";
  EXPECT_EQ(name_of(decide_with(env, Collective::ReduceScatter, 64 * KiB, 4)), "ring_reducescatter");
  EXPECT_EQ(name_of(decide_with(env, Collective::AllReduce, 64 * KiB, 9)), "allpairs");
  // oneshot where it fits, LL, its own blocks; past its limits the table's plan.
  env.algo = "oneshot";
  env.proto = "Simple";
  d = decide_with(env, Collective::AllReduce, 8, 2);
  EXPECT_EQ(d.executor, Executor::OneShot);
  EXPECT_EQ(d.protocol, Protocol::LL);
  EXPECT_EQ(name_of(decide_with(env, Collective::AllReduce, exec::kOneShotMaxBytes + 8, 2)), "allpairs");
  EXPECT_EQ(name_of(decide_with(env, Collective::AllReduce, 8, 9)), "allpairs");
  EXPECT_EQ(decide_with(env, Collective::AllReduce, 8, 2, false, 32, true).executor, Executor::Interpreter);  // across nodes
}

TEST(Decide, WeftProtoAndWeftInstances) {
  DecideEnv env;
  env.proto = "LL128";
  // A forced LL128 (or Simple) sends the table's oneshot to its plan.
  Decision d = decide_with(env, Collective::AllReduce, 8, 2);
  EXPECT_EQ(d.executor, Executor::Interpreter);
  EXPECT_EQ(d.protocol, Protocol::LL128);
  env.proto = "LL";
  EXPECT_EQ(decide_with(env, Collective::AllReduce, 8, 2).executor, Executor::OneShot);  // LL keeps it
  EXPECT_EQ(decide_with(env, Collective::AllGather, 256 * MiB, 4).protocol, Protocol::LL);
  // WEFT_INSTANCES, clamped to the connections; it sets the kernel's blocks too.
  env = DecideEnv{};
  env.instances = 99;
  EXPECT_EQ(decide_with(env, Collective::AllReduce, 256 * MiB, 4).instances, 32);
  EXPECT_EQ(decide_with(env, Collective::AllReduce, 256 * MiB, 4, false, 16).instances, 16);
  env.instances = 5;
  EXPECT_EQ(decide_with(env, Collective::AllReduce, 256 * MiB, 4).instances, 5);
  d = decide_with(env, Collective::AllReduce, 8, 2);
  EXPECT_EQ(d.executor, Executor::OneShot);
  EXPECT_EQ(d.instances, 5);
  d = decide_with(env, Collective::AllReduce, 8, 2, false, 32, true);  // across nodes: a plan, x5
  EXPECT_EQ(d.executor, Executor::Interpreter);
  EXPECT_EQ(d.instances, 5);
  // Without overrides the table's instances stand, even above the connections (as before).
  EXPECT_EQ(decide_with(DecideEnv{}, Collective::AllReduce, 256 * MiB, 4, false, 16).instances, 24);
}

TEST(Decide, BadOverridesFailEveryCallNotTheDecider) {
  DecideEnv env;
  env.proto = "LL64";
  const Decider d(default_table(), one_node(4), env);
  try {
    d.decide(Call{Collective::AllReduce, 8, false});
    ADD_FAILURE() << "WEFT_PROTO=LL64 was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("WEFT_PROTO='LL64' is not Simple, LL or LL128"), std::string::npos) << e.what();
  }
  env = DecideEnv{};
  env.algo = "Allsum:ring";
  const Decider d2(default_table(), one_node(4), env);
  for (Collective c : kCollectives) EXPECT_THROW(d2.decide(Call{c, 8, false}), Error);
  env.algo = "no_such_algorithm_anywhere";
  const Decider d3(default_table(), one_node(4), env);
  EXPECT_THROW(d3.decide(Call{Collective::AllReduce, 8, false}), Error);
}

TEST(Decide, EnvironmentIsReadOnceWhenTheDeciderIsMade) {
  setenv("WEFT_ALGO", "ring", 1);
  setenv("WEFT_INSTANCES", "7", 1);
  const Decider d(default_table(), one_node(4), DecideEnv::from_environment());
  unsetenv("WEFT_ALGO");
  unsetenv("WEFT_INSTANCES");
  const Decision got = d.decide(Call{Collective::AllReduce, 64 * KiB, false});
  EXPECT_EQ(name_of(got), "ring");
  EXPECT_EQ(got.instances, 7);
  EXPECT_FALSE(DecideEnv::from_environment().overrides());
}

TEST(Decide, CopyEnginesComeWithTheirFallback) {
  const SelectionTable t = parse_selection_table(R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllGather", "AllReduce"], "bytes": [1048576, null], "algorithm": "ce", "protocol": "Simple", "instances": 1},
    {"collectives": ["AllGather", "AllReduce"], "algorithm": "ring", "protocol": "LL", "instances": 40}
  ]})", "ce.json");
  const auto shared = std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &t);
  DecideEnv env;
  env.generated = true;
  const Decision d = Decider(shared, one_node(4), env).decide(Call{Collective::AllGather, 4 * MiB, false});
  EXPECT_EQ(d.executor, Executor::CopyEngineExchange);
  EXPECT_EQ(d.algorithm, algo::kCopyEngine);
  // The fallback: the table's first other row, overrides left out, as a plan launch.
  EXPECT_EQ(d.fallback.algorithm, algo::kRing);
  EXPECT_EQ(d.fallback.protocol, Protocol::LL);
  EXPECT_EQ(d.fallback.instances, 40);
  EXPECT_EQ(d.fallback.executor, Executor::Generated);
  // Where the copy engines cannot run at all (more than 8 ranks, across nodes) the fallback
  // is the decision.
  CommShape nine = one_node(9);
  EXPECT_EQ(Decider(shared, nine, env).decide(Call{Collective::AllGather, 4 * MiB, false}).executor, Executor::Generated);
  CommShape net = one_node(4);
  net.multi_node = true;
  const Decision across = Decider(shared, net, env).decide(Call{Collective::AllReduce, 4 * MiB, false});
  EXPECT_EQ(across.algorithm, algo::kRing);
  EXPECT_EQ(across.protocol, Protocol::Simple);
  EXPECT_EQ(across.executor, Executor::Interpreter);
}

/// docs/runtime.md, "Memory windows and CTA policies": AllGather, AllToAll and Broadcast on
/// one node of 2 to 8 ranks run by copy engines when the receive buffer lies in a window
/// (from 4 MiB; Broadcast only on 2 ranks) or under the zero policy (at every size, in a
/// window or not): straight into a symmetric window every rank mapped, else after the
/// per-call exchange, with what would have run otherwise as the fallback.
std::optional<Executor> window_rule(const Call& call, int R, bool multi_node, int policy) {
  const bool moving = call.collective == Collective::AllGather || call.collective == Collective::AllToAll ||
                      call.collective == Collective::Broadcast;
  const bool zero = policy == kCtaZero;
  if (!moving || multi_node || R < 2 || R > 8) return std::nullopt;
  if (!zero && (call.window == WindowKind::None || call.bytes < 4 * MiB)) return std::nullopt;
  if (!zero && call.collective == Collective::Broadcast && R > 2) return std::nullopt;
  return call.window == WindowKind::Symmetric ? Executor::CopyEngineDirect : Executor::CopyEngineExchange;
}

/// The efficiency policy without a block count: a plan's or the kernel's thread blocks are
/// its instances, at most 16.
Launch capped(Launch l, int policy) {
  const bool runs_blocks = l.executor == Executor::OneShot || l.executor == Executor::Interpreter ||
                           l.executor == Executor::Generated;
  if (policy == kCtaEfficiency && runs_blocks) l.instances = std::min(l.instances, 16);
  return l;
}

TEST(Decide, WindowsAndCtaPoliciesFollowTheDocumentedRules) {
  size_t engines = 0, checked = 0;
  std::vector<uint64_t> sz = sizes();
  for (uint64_t b : {4 * MiB - 1, 4 * MiB}) sz.push_back(b);
  for (int R = 1; R <= 10; ++R)
    for (bool multi_node : {false, true}) {
      CommShape shape = one_node(R);
      shape.multi_node = multi_node;
      const Decider plain(default_table(), shape, DecideEnv{});
      for (int policy : {kCtaDefault, kCtaEfficiency, kCtaZero}) {
        CommShape ps = shape;
        ps.cta_policy = policy;
        const Decider d(default_table(), ps, DecideEnv{});
        for (Collective c : kCollectives)
          for (uint64_t b : sz)
            for (bool in_place : {false, true})
              for (WindowKind w : {WindowKind::None, WindowKind::Default, WindowKind::Symmetric}) {
                const Call call{c, b, in_place, w, 0};
                const Decision got = d.decide(call);
                const Decision base = plain.decide(Call{c, b, in_place});
                const std::string at = where(c, b, R, in_place, multi_node) + ", policy " + cta_policy_name(policy) +
                                       ", window " + std::to_string(static_cast<int>(w));
                ++checked;
                if (const std::optional<Executor> e = window_rule(call, R, multi_node, policy)) {
                  ++engines;
                  ASSERT_EQ(got.executor, *e) << at;
                  EXPECT_EQ(got.algorithm, algo::kCopyEngine) << at;
                  EXPECT_EQ(got.protocol, Protocol::Simple) << at;
                  EXPECT_EQ(got.instances, 1) << at;
                  if (*e == Executor::CopyEngineExchange) EXPECT_EQ(got.fallback, capped(base, policy)) << at;
                  continue;
                }
                Decision want = base;
                static_cast<Launch&>(want) = capped(base, policy);
                if (want.executor == Executor::CopyEngineExchange) want.fallback = capped(base.fallback, policy);
                ASSERT_EQ(got, want) << at;
              }
      }
    }
  EXPECT_GT(engines, 1000u);
  EXPECT_GT(checked, engines * 4);
}

TEST(Decide, ZeroPolicyKeepsATableCopyEngineRowsFallback) {
  const SelectionTable t = parse_selection_table(R"({"format": "weft-selection", "version": 1, "rows": [
    {"collectives": ["AllGather"], "bytes": [1048576, null], "algorithm": "ce", "protocol": "Simple", "instances": 1},
    {"collectives": ["AllGather"], "algorithm": "ring", "protocol": "LL", "instances": 40}
  ]})", "ce.json");
  const auto shared = std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &t);
  CommShape s = one_node(4);
  s.cta_policy = kCtaZero;
  const Decision d = Decider(shared, s, DecideEnv{}).decide(Call{Collective::AllGather, 4 * MiB, false});
  EXPECT_EQ(d.executor, Executor::CopyEngineExchange);
  EXPECT_EQ(d.fallback.algorithm, algo::kRing);  // the row's fallback, not a copy engine again
  EXPECT_EQ(d.fallback.instances, 40);
  // WEFT_ALGO does not keep a window's call off the copy engines.
  DecideEnv env;
  env.algo = "ring";
  s.cta_policy = kCtaDefault;
  const Decider forced(shared, s, env);
  ASSERT_EQ(forced.decide(Call{Collective::AllGather, 8 * MiB, false}).algorithm, algo::kRing);
  const Decision w = forced.decide(Call{Collective::AllGather, 8 * MiB, false, WindowKind::Symmetric});
  EXPECT_EQ(w.executor, Executor::CopyEngineDirect);
}

TEST(Decide, EfficiencyCutsInstancesByTheCommunicatorsBlockCount) {
  CommShape s = one_node(4);
  s.cta_policy = kCtaEfficiency;
  Decider d(default_table(), s, DecideEnv{});
  // Three thread blocks per instance: 24 instances (72 blocks) become 5 (15 blocks).
  std::vector<std::pair<int, int32_t>> asked;  // (instances, root)
  d.set_plan_blocks([&](const Call& call, const Launch& l) {
    asked.emplace_back(l.instances, call.root);
    return 3 * l.instances;
  });
  const Call big{Collective::Broadcast, 64 * MiB, false, WindowKind::None, 2};
  const Decision base = Decider(default_table(), one_node(4), DecideEnv{}).decide(big);
  ASSERT_EQ(base.instances, 24);
  const Decision got = d.decide(big);
  EXPECT_EQ(got.instances, 5);
  EXPECT_EQ(got.algorithm, base.algorithm);
  EXPECT_EQ(got.protocol, base.protocol);
  ASSERT_EQ(asked.size(), 2u);  // 24, then 5 (within the cap: done)
  EXPECT_EQ(asked[0], std::make_pair(24, 2));
  EXPECT_EQ(asked[1], std::make_pair(5, 2));
  // Within the cap: unchanged, one count.
  asked.clear();
  d.set_plan_blocks([&](const Call&, const Launch& l) {
    asked.emplace_back(l.instances, 0);
    return 16;
  });
  EXPECT_EQ(d.decide(big).instances, 24);
  EXPECT_EQ(asked.size(), 1u);
  // The one-shot kernel: its blocks are its instances, at most 16 (32 under the default policy).
  const Call small{Collective::AllReduce, 512 * KiB, false};
  ASSERT_EQ(Decider(default_table(), one_node(2), DecideEnv{}).decide(small).instances, 32);
  CommShape two = one_node(2);
  two.cta_policy = kCtaEfficiency;
  const Decision k = Decider(default_table(), two, DecideEnv{}).decide(small);
  EXPECT_EQ(k.executor, Executor::OneShot);
  EXPECT_EQ(k.instances, 16);
  // The default policy never asks for a count; set_cta_policy changes the policy in place.
  Decider plain(default_table(), one_node(4), DecideEnv{});
  int counts = 0;
  plain.set_plan_blocks([&](const Call&, const Launch&) { return ++counts, 1000; });
  EXPECT_EQ(plain.decide(big).instances, 24);
  EXPECT_EQ(counts, 0);
  plain.set_cta_policy(kCtaEfficiency);
  EXPECT_EQ(plain.decide(big).instances, 1);
  EXPECT_GT(counts, 0);
}

TEST(Decide, CtaPolicyIsReadFromTheEnvironment) {
  setenv("WEFT_CTA_POLICY", "EFFICIENCY|ZERO", 1);
  EXPECT_EQ(CommShape::from_environment(4).cta_policy, kCtaZero);
  setenv("WEFT_CTA_POLICY", "fast", 1);
  EXPECT_THROW(CommShape::from_environment(4), Error);
  unsetenv("WEFT_CTA_POLICY");
  EXPECT_EQ(CommShape::from_environment(4).cta_policy, kCtaDefault);
}

TEST(Decide, DecisionIsPlainIntegersAndDecidingAllocatesNothing) {
  static_assert(std::is_trivially_copyable_v<Decision>);
  static_assert(std::is_trivially_copyable_v<PlanKey>);
  const Decider d(default_table(), one_node(2), DecideEnv{});
  Decision warm = d.decide(Call{Collective::AllReduce, 4096, false});
  ASSERT_EQ(warm.executor, Executor::OneShot);
  Decider pd(default_table(), one_node(4), DecideEnv{});
  pd.set_plan_blocks([](const Call&, const Launch& l) { return 2 * l.instances; });
  size_t sum = 0;
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 1000; ++i) {
    const Decision x = d.decide(Call{Collective::AllReduce, 8ull << (i % 20), (i & 1) != 0});
    sum += static_cast<size_t>(x.instances) + static_cast<size_t>(PlanKeyHash{}(plan_key(Call{}, x, 0)) & 1);
  }
  // Windows and the policies: the window kind and the policy are integers too.
  const WindowKind kinds[] = {WindowKind::None, WindowKind::Default, WindowKind::Symmetric};
  for (int policy : {kCtaDefault, kCtaEfficiency, kCtaZero}) {
    pd.set_cta_policy(policy);
    for (int i = 0; i < 300; ++i) {
      const Collective c = kCollectives[i % 6];
      const Decision x = pd.decide(Call{c, 8ull << (i % 24), false, kinds[i % 3], 1});
      sum += static_cast<size_t>(x.executor) + static_cast<size_t>(x.fallback.instances);
    }
  }
  g_counting = false;
  EXPECT_EQ(g_allocations, 0u);
  EXPECT_GT(sum, 0u);
}

TEST(Decide, PlanKeysTellEveryFieldApart) {
  const PlanKey base{algo::kRing, Collective::AllReduce, Protocol::LL, Executor::Interpreter, false, 4, 0};
  std::vector<PlanKey> keys = {base};
  auto vary = [&](auto f) {
    PlanKey k = base;
    f(k);
    keys.push_back(k);
  };
  vary([](PlanKey& k) { k.algorithm = algo::kAllPairs; });
  vary([](PlanKey& k) { k.collective = Collective::AllGather; });
  vary([](PlanKey& k) { k.protocol = Protocol::Simple; });
  vary([](PlanKey& k) { k.executor = Executor::Generated; });
  vary([](PlanKey& k) { k.in_place = true; });
  vary([](PlanKey& k) { k.instances = 5; });
  vary([](PlanKey& k) { k.root = 1; });
  std::set<size_t> hashes;
  for (size_t i = 0; i < keys.size(); ++i) {
    hashes.insert(PlanKeyHash{}(keys[i]));
    for (size_t j = 0; j < keys.size(); ++j) EXPECT_EQ(keys[i] == keys[j], i == j) << i << " " << j;
  }
  EXPECT_EQ(hashes.size(), keys.size());
  // The root counts for Broadcast and Reduce only.
  Launch l;
  l.algorithm = algo::kAllPairs;
  EXPECT_EQ(plan_key(Call{Collective::AllReduce, 8, false}, l, 3).root, 0);
  EXPECT_EQ(plan_key(Call{Collective::Reduce, 8, false}, l, 3).root, 3);
}

TEST(AlgorithmRegistry, NamedPrimitivesAgreeWithTheirBuildersAndKernels) {
  const algo::Registry& reg = algo::registry();
  EXPECT_EQ(reg.named("oneshot"), algo::kOneShot);
  EXPECT_EQ(reg.named(ce::kAlgorithm), algo::kCopyEngine);
  EXPECT_EQ(reg.named("ring"), algo::kRing);
  EXPECT_EQ(reg.named("allpairs"), algo::kAllPairs);
  EXPECT_EQ(reg.named("chain"), algo::kChain);
  EXPECT_EQ(reg.named("ring_allreduce"), algo::kNone);
  for (Collective c : kCollectives) {
    // The hand-built plans' collectives are plan/hand_built.cpp's.
    const std::vector<std::string> built = hand_built_algorithms(c);
    for (algo::Id id : {algo::kRing, algo::kAllPairs, algo::kChain}) {
      EXPECT_EQ(reg.at(id).implements(c), std::find(built.begin(), built.end(), reg.at(id).name()) != built.end())
          << reg.at(id).name() << " " << to_string(c);
      EXPECT_EQ(reg.at(id).plan_origin(), algo::PlanOrigin::HandBuilt);
    }
    // The copy engines' are plan/ce_plan.hpp's, up to ce::kMaxRanks ranks.
    EXPECT_EQ(reg.at(algo::kCopyEngine).implements(c), ce::supports(c)) << to_string(c);
  }
  EXPECT_EQ(reg.at(algo::kCopyEngine).max_ranks(), ce::kMaxRanks);
  // The one-shot kernel's are its regions' (exec/oneshot.hpp).
  const algo::Algorithm& os = reg.at(algo::kOneShot);
  EXPECT_EQ(os.max_ranks(), exec::kOneShotMaxRanks);
  EXPECT_EQ(os.max_peer_bytes(), exec::kOneShotMaxBytes);
  EXPECT_EQ(os.protocols(), algo::protocol_bit(Protocol::LL));
  EXPECT_FALSE(os.across_nodes());
  EXPECT_EQ(os.executor(), Executor::OneShot);
  // A compiled source keeps one id per scheduler and allocator.
  algo::Registry& r = algo::registry();
  const algo::Id a = r.compiled("ring_allreduce", "algo", "state");
  EXPECT_EQ(r.compiled("ring_allreduce", "algo", "state"), a);
  EXPECT_NE(r.compiled("ring_allreduce", "hpds", "state"), a);
  EXPECT_GE(a, algo::kFirstCompiled);
  EXPECT_EQ(r.at(a).name(), "ring_allreduce");
  EXPECT_EQ(r.at(a).scheduler(), "algo");
  EXPECT_EQ(r.at(a).plan_origin(), algo::PlanOrigin::Compiled);
  EXPECT_THROW(r.compiled("ring", "hpds", "state"), Error);
}

// The simulator's call model (sim/call_model.hpp) and the runtime's decision ask the same
// oneshot: on one node, with WEFT_ALGO=oneshot, the runtime runs the kernel exactly where
// the simulator says it carries the call, and with the default table only there. A bare
// "oneshot" names the kernel for AllReduce, AllGather and ReduceScatter; Broadcast, Reduce and
// AllToAll take it where WEFT_ALGO names it for them.
TEST(DecideAndSimulator, OneShotIsTheSameChoice) {
  DecideEnv forced;
  forced.algo = "oneshot,Broadcast:oneshot,Reduce:oneshot,AllToAll:oneshot";
  for (int R = 1; R <= 16; ++R) {
    const Decider plain(default_table(), one_node(R), DecideEnv{});
    const Decider named(default_table(), one_node(R), forced);
    for (Collective c : kCollectives)
      for (uint64_t b : sizes()) {
        const bool carries = sim::oneshot_carries(c, b, R);
        EXPECT_EQ(carries, algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, b, R, false}));
        EXPECT_EQ(named.decide(Call{c, b, false}).executor == Executor::OneShot, carries) << where(c, b, R, false, false);
        if (plain.decide(Call{c, b, false}).executor == Executor::OneShot) {
          EXPECT_TRUE(carries) << where(c, b, R, false, false);
        }
      }
  }
}

// `weft bench --predict` names, per size, what decide() decides for the same call.
TEST(DecideAndSimulator, BenchPredictNamesTheRuntimesDecision) {
  for (int R : {2, 4})
    for (const char* coll : {"AllReduce", "AllGather", "Broadcast"}) {
    const test::CliRun r = test::run_command("CUDA_VISIBLE_DEVICES= " + std::string(WEFT_CLI) + " bench --predict " + coll +
                                                 " --sizes 8:4M --json --ranks " + std::to_string(R),
                                             "decide_cli");
    ASSERT_EQ(r.status, 0) << r.err;
    // The runtime's own table: default.json with the shipped tables per rank count.
    const Decider d(std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &default_selection_table()),
                    CommShape::from_environment(R), DecideEnv::from_environment());
    int rows = 0;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] != '{') continue;
      const nlohmann::json j = nlohmann::json::parse(line);
      const Collective c = *collective_from_string(j["collective"].get<std::string>());
      const uint64_t b = j["bytes"].get<uint64_t>();
      EXPECT_EQ(j["weft_plan"].get<std::string>(), describe(d.decide(Call{c, b, false}))) << where(c, b, R, false, false);
      ++rows;
    }
    EXPECT_EQ(rows, 20) << r.out;
  }
}

}  // namespace
}  // namespace weft
