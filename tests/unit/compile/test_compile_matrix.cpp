// Every test algorithm compiles under every scheduler and allocator, in place and out of
// place; each plan passes the deadlock check and, replayed lane by lane, meets the
// collective's postcondition.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "symbolic.hpp"

namespace weft {
namespace {

TEST(CompileMatrix, EveryAlgorithmSchedulerAllocatorAndPlacement) {
  for (const test::Case& c : test::all_cases()) {
    ASSERT_EQ(test::symbolic_check(c.algo), "") << c.algo.name << " is wrong as written";
    for (const char* sched : {"hpds", "algo", "stage", "rr", "gc3"})
      for (const char* alloc : {"state", "conn"})
        for (bool in_place : {true, false}) {
          SCOPED_TRACE(c.algo.name + " on " + c.topo.name + " " + sched + "/" + alloc + (in_place ? " in place" : " out of place"));
          CompileOptions o;
          o.scheduler = sched;
          o.allocator = alloc;
          o.in_place = in_place;
          CompileResult r = compile(c.algo, c.topo, o);
          EXPECT_TRUE(check_deadlock(r.plan).ok);
          EXPECT_EQ(r.plan.num_ranks, c.algo.ranks);
          int32_t lanes = plan_lanes(r.plan);
          for (int32_t lane = 0; lane < lanes; ++lane) {
            Algorithm replay = replay_plan(r.plan, lane);
            EXPECT_EQ(test::symbolic_check(replay), "") << "lane " << lane;
          }
        }
  }
}

}  // namespace
}  // namespace weft
