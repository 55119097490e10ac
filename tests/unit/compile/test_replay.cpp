// Replay: a plan turned back into an algorithm; broken plans replay into wrong algorithms.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "compile/replay.hpp"
#include "symbolic.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

TEST(Replay, LanesAreTheLeastCommonMultipleOfInstances) {
  CompileOptions o;
  o.instances = 0;
  // Per-block rates that make the derived counts differ: the NIC-bound call needs 25 GB/s
  // per NVLink connection (5 blocks of 5) and 12.5 per NIC connection (3 blocks of 4.17).
  Topology topo = test::a100(2, 4);
  topo.tb_copy_GBps = 5;
  topo.tb_net_GBps = 12.5 / 3;
  CompileResult r = compile(test::hm_allreduce(2, 4), topo, o);  // 5 and 3 instances
  EXPECT_EQ(plan_lanes(r.plan), 15);
  for (int lane = 0; lane < 15; ++lane) EXPECT_EQ(test::symbolic_check(replay_plan(r.plan, lane)), "") << lane;
  EXPECT_THROW(replay_plan(r.plan, 15), Error);
}

TEST(Replay, MissingDependenciesShowAsRaces) {
  CompileResult r = compile(test::hm_allreduce(2, 4), test::a100(2, 4));
  for (auto& rp : r.plan.ranks)
    for (auto& tb : rp.tbs)
      for (auto& s : tb.slots) s.deps.clear();
  EXPECT_NE(test::symbolic_check(replay_plan(r.plan)), "");
}

TEST(Replay, AWrongDestinationBreaksThePostcondition) {
  CompileResult r = compile(test::ring_allgather(4), test::a100(1, 4));
  for (auto& tb : r.plan.ranks[2].tbs)
    for (auto& s : tb.slots)
      if (s.primitive == Primitive::Recv) s.dst.index = (s.dst.index + 1) % 4;
  EXPECT_NE(test::symbolic_check(replay_plan(r.plan)), "");
}

TEST(Replay, OutOfPlacePlansReadTheInputAndFillTheOutput) {
  for (const test::Case& c : test::all_cases()) {
    CompileOptions o;
    o.in_place = false;
    CompileResult r = compile(c.algo, c.topo, o);
    Algorithm a = replay_plan(r.plan);
    EXPECT_FALSE(a.in_place);
    EXPECT_EQ(test::symbolic_check(a), "") << c.algo.name;
  }
}

}  // namespace
}  // namespace weft
