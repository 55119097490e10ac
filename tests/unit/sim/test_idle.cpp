// Thread-block idle on paper 001's topologies (docs/scheduling.md, "Idle"), checked on
// simulated figures only (regression tests of the simulator, not of GPU speed):
//   - paced instances (CompileOptions::pace): NVLink work fed by the network runs on fewer
//     blocks, the connection's other blocks end early; the plans move the right data on the
//     CPU emulator, and nothing changes in one node;
//   - the tuner's idle bound (TuneOptions::max_idle): the figures of HM AllReduce and
//     AllGather on a100-2x4 and a100-4x8 at 256 MiB against the 15% of the target,
//     within the scheduler's own plan's blocks and within twice as many.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "exec/plan_check.hpp"
#include "exec/plan_lowering.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "sim/autotune.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {
namespace {

constexpr uint64_t k256M = uint64_t{256} << 20;

SimReport run(const Plan& p, const Topology& t, uint64_t bytes) {
  SimOptions o;
  o.bytes = bytes;
  return simulate(p, t, o);
}

Plan compiled(const char* algo, const Topology& t, double pace, const char* allocator = "state") {
  const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
  CompileOptions c;
  c.pace = pace;
  c.allocator = allocator;
  return compile(a, t, c).plan;
}

/// Slots of `p` whose instance count is below the largest one on their connection (rank,
/// peer, direction and channel / instances of the widest): the NIC-fed ones when paced.
int32_t narrower_slots(const Plan& p) {
  std::map<std::tuple<int32_t, int32_t, bool>, int32_t> widest;  // (rank, peer, sends) -> instances
  for (size_t r = 0; r < p.ranks.size(); ++r)
    for (const ThreadBlock& tb : p.ranks[r].tbs)
      for (const Slot& s : tb.slots) {
        if (s.send_peer >= 0) widest[{static_cast<int32_t>(r), s.send_peer, true}] = std::max(widest[{static_cast<int32_t>(r), s.send_peer, true}], s.instances);
        if (s.recv_peer >= 0) widest[{static_cast<int32_t>(r), s.recv_peer, false}] = std::max(widest[{static_cast<int32_t>(r), s.recv_peer, false}], s.instances);
      }
  int32_t n = 0;
  for (size_t r = 0; r < p.ranks.size(); ++r)
    for (const ThreadBlock& tb : p.ranks[r].tbs)
      for (const Slot& s : tb.slots)
        if (s.send_peer >= 0 && s.instances < widest[{static_cast<int32_t>(r), s.send_peer, true}]) ++n;
  return n;
}

/// The plan verifies lane by lane (replay through the symbolic verifier: every dependency
/// between instances of different counts is there) and runs right on the CPU emulator.
void expect_correct(const Plan& p) {
  try {
    for (int32_t lane = 0; lane < plan_lanes(p); ++lane) {
      const VerifyResult v = verify(replay_plan(p, lane));
      EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
    }
    check_plan_on_emulator(lower_plan(p, p.num_ranks, 32), 4);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(Pace, NicFedNvlinkWorkTakesFewerBlocksAndTheOthersEndEarly) {
  // HM AllGather over 4 servers of 8: an NVLink connection carries the GPU's own chunk and
  // three that came through the NIC; derived, it has 2 blocks, which wait for the NIC 45% of
  // the time. Paced, the NIC-fed chunks take one block, the second block moves half of the
  // GPU's own chunk and ends (docs/scheduling.md, "Idle").
  const Topology t = topology_preset("a100-4x8");
  const Plan plain = compiled("hm_allgather", t, 0), paced = compiled("hm_allgather", t, 1);
  EXPECT_EQ(narrower_slots(plain), 0);
  EXPECT_EQ(narrower_slots(paced), 32 * 7 * 3);  // every rank, 7 local peers, 3 NIC-fed chunks
  EXPECT_EQ(paced.max_tbs_per_rank(), plain.max_tbs_per_rank());
  const SimReport a = run(plain, t, k256M), b = run(paced, t, k256M);
  EXPECT_GT(a.tb_idle_mean, 0.35);
  EXPECT_LT(b.tb_idle_mean, 0.05);
  EXPECT_LE(b.time_us, a.time_us * 1.02);  // the last micro-batch forwarded by one block, not two
  int32_t short_lived = 0;
  for (const TbStat& s : b.tbs)
    if (s.rank == 0 && s.lifetime_us < 0.2 * b.time_us) short_lived += s.weight;
  EXPECT_EQ(short_lived, 14);  // rank 0's second block of each NVLink connection end
}

TEST(Pace, PacedPlansVerifyAndMoveTheRightDataOnTheEmulator) {
  const Topology t = topology_preset("a100-4x4");
  for (const char* algo : {"hm_allgather", "hm_allreduce"})
    for (const char* alloc : {"state", "conn", "peer", "peer-mixed"})
      for (double pace : {0.5, 1.0, 1.5}) {
        SCOPED_TRACE(std::string(algo) + " " + alloc + " pace " + std::to_string(pace));
        expect_correct(compiled(algo, t, pace, alloc));
      }
  // At least one of them is paced (the emulator saw instances of two counts on a connection).
  EXPECT_GT(narrower_slots(compiled("hm_allgather", t, 1)), 0);
}

TEST(Pace, ChangesNothingInOneNode) {
  const Topology t = topology_preset("h200-1x8");
  for (const char* algo : {"hm_allreduce", "ring_allgather", "allpairs_allreduce"})
    EXPECT_EQ(plan_to_json(compiled(algo, t, 1)), plan_to_json(compiled(algo, t, 0))) << algo;
}

/// The tuner's choice at 256 MiB with an idle bound of 15%, against its fastest variant.
struct Bounded {
  Plan plan;
  SimReport chosen;
  double fastest_us = 0;
  std::string reason;
};

Bounded tuned_within_idle(const char* algo, const char* topo, double max_idle, int32_t max_tbs = 0) {
  const Topology t = topology_preset(topo);
  const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
  TuneOptions o;
  o.bytes = k256M;
  o.max_idle = max_idle;
  o.max_tbs = max_tbs;
  const TuneResult r = autotune(a, t, CompileOptions{}, o);
  Bounded b{r.result.plan, run(r.result.plan, t, k256M), 1e300, r.reason};
  for (const TuneTrial& tr : r.trials)
    if (tr.error.empty()) b.fastest_us = std::min(b.fastest_us, tr.time_us);
  return b;
}

TEST(Autotune, IdleWithinFifteenPercentOnThePapersTopologies) {
  // Issue 30's target: mean thread-block idle at most 15% (paper 001 Table 3: 1.7-15%). The
  // tuner's default is the fastest variant; with max_idle 0.15 it takes the fastest whose
  // blocks idle at most that. Measured when this was written (simulated, 256 MiB): idle and
  // the cost in time against the fastest variant. HM AllReduce on a100-4x8 has no variant
  // within 15% (the least is 15.9%, 3% slower: docs/scheduling.md), so there every variant
  // competes and the fastest is taken.
  struct Case {
    const char* algo;
    const char* topo;
    double idle;  ///< mean idle at most
    double cost;  ///< time over the fastest variant's, at most
  };
  for (const Case& c : {Case{"hm_allgather", "a100-2x4", 0.125, 0.0}, Case{"hm_allgather", "a100-4x8", 0.03, 0.017},
                        Case{"hm_allreduce", "a100-2x4", 0.062, 0.181}, Case{"hm_allreduce", "a100-4x8", 0.428, 0.0}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Bounded b = tuned_within_idle(c.algo, c.topo, 0.15);
    EXPECT_LE(b.chosen.tb_idle_mean, c.idle + 5e-3) << b.reason;
    EXPECT_LE(b.chosen.time_us, b.fastest_us * (1 + c.cost + 1e-3)) << b.reason;
    if (c.idle <= 0.15) EXPECT_LE(b.chosen.tb_idle_mean, 0.15) << b.reason;
    else EXPECT_NE(b.reason.find("so all competed"), std::string::npos) << b.reason;
  }
}

TEST(Autotune, IdleWithinFifteenPercentAtNoCostWithTwiceTheBlocks) {
  // With twice the scheduler's own plan's blocks per rank as the budget, the fastest variants
  // are plans whose extra blocks mostly wait; paced, those blocks end early, and the idle
  // bound takes a paced plan as fast as the default choice (HM AllReduce on a100-2x4, 28
  // blocks, 12 of them ending early: 6.4% idle) or faster (on a100-4x8, 60 blocks: 4,567 us
  // against 4,961 us, 12.6% idle, 22% less block time than the default's 32 blocks). HM
  // AllGather on a100-4x8 stays at the cost of its last micro-batch (1.7%).
  struct Case {
    const char* algo;
    const char* topo;
    int32_t budget;
    double cost;  ///< time over the default choice's (own plan's budget, no idle bound), at most
  };
  for (const Case& c : {Case{"hm_allreduce", "a100-2x4", 32, 0.0}, Case{"hm_allreduce", "a100-4x8", 64, -0.07},
                        Case{"hm_allgather", "a100-2x4", 32, 0.0}, Case{"hm_allgather", "a100-4x8", 64, 0.017}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Bounded def = tuned_within_idle(c.algo, c.topo, 1.0);
    const Bounded b = tuned_within_idle(c.algo, c.topo, 0.15, c.budget);
    EXPECT_LE(b.chosen.tb_idle_mean, 0.15) << b.reason;
    EXPECT_LE(b.chosen.tbs_per_rank_max, c.budget);
    EXPECT_LE(b.chosen.time_us, def.chosen.time_us * (1 + c.cost + 1e-6)) << b.reason;
    if (b.plan.num_ranks <= 8) expect_correct(b.plan);  // the paced plan taken moves the right data
  }
}

}  // namespace
}  // namespace weft::sim
