// Every built-in algorithm compiles under every scheduler and allocator, in place and out of
// place, at several sizes on the real topology presets; every plan is deadlock-free and, replayed
// lane by lane, passes the symbolic verifier. State never needs more thread blocks than conn.
#include <gtest/gtest.h>

#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"

namespace weft {
namespace {

struct Shape {
  int nodes, gpus;
};

/// Parameters for `name` at nodes x gpus ranks (docs/algorithms.md says which need overriding).
ParamMap params_for(const std::string& name, Shape s) {
  int R = s.nodes * s.gpus;
  ParamMap p{{"nRanks", std::to_string(R)}};
  if (name.rfind("hm_", 0) == 0 || name == "alltoall_twostep" || name == "alltonext") p["GPUPerNode"] = std::to_string(s.gpus);
  if (name == "allpairs_allreduce" || name == "allpairs_reducescatter" || name == "alltoall_twostep") p["nScratch"] = std::to_string(R);
  if (name == "alltonext") p["nChunks"] = std::to_string(s.gpus);
  if (name == "chain_broadcast" || name == "chain_reduce") p["Root"] = std::to_string(R / 2);
  return p;
}

void check_plan(const Algorithm& algo, const Plan& plan, const std::string& what) {
  DeadlockReport d = check_deadlock(plan);
  ASSERT_TRUE(d.ok) << what << ": " << d.message;
  int32_t lanes = plan_lanes(plan);
  for (int32_t lane = 0; lane < lanes; ++lane) {
    Algorithm replay = replay_plan(plan, lane);
    replay.custom_postcondition = algo.custom_postcondition;
    VerifyResult v = verify(replay);
    ASSERT_TRUE(v.ok) << what << " lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
  }
}

TEST(Builtins, CompileUnderEverySchedulerAllocatorAndPlacement) {
  const std::vector<Shape> shapes = {{1, 4}, {2, 2}, {2, 4}};
  int compiled = 0;
  for (const std::string& name : builtin_algorithm_names())
    for (Shape s : shapes) {
      Algorithm algo = load_algorithm(name, params_for(name, s));
      ASSERT_TRUE(verify(algo).ok) << name;
      Topology topo = topology_preset("a100-" + std::to_string(s.nodes) + "x" + std::to_string(s.gpus));
      for (const char* sched : {"hpds", "algo", "stage", "rr", "gc3"})
        for (bool in_place : {true, false}) {
          int32_t tbs[2] = {0, 0};
          for (const char* alloc : {"state", "conn"}) {
            CompileOptions o;
            o.scheduler = sched;
            o.allocator = alloc;
            o.in_place = in_place;
            std::string what = name + " on " + topo.name + ", " + sched + "/" + alloc + (in_place ? ", in place" : ", out of place");
            CompileResult r = compile(algo, topo, o);
            check_plan(algo, r.plan, what);
            tbs[alloc[0] == 'c'] = r.plan.max_tbs_per_rank();
            ++compiled;
          }
          EXPECT_LE(tbs[0], tbs[1]) << name << " " << sched;
        }
    }
  EXPECT_EQ(compiled, static_cast<int>(builtin_algorithm_names().size()) * 3 * 5 * 2 * 2);
}

TEST(Builtins, StateNeedsFewerThreadBlocksOnHmAllReduce) {
  for (Shape s : {Shape{2, 4}, Shape{4, 8}}) {
    Algorithm algo = load_algorithm("hm_allreduce", params_for("hm_allreduce", s));
    Topology topo = topology_preset("a100-" + std::to_string(s.nodes) + "x" + std::to_string(s.gpus));
    for (int instances : {1, 0}) {
      CompileOptions o;
      o.instances = instances;
      int32_t state = compile(algo, topo, o).plan.max_tbs_per_rank();
      o.allocator = "conn";
      int32_t conn = compile(algo, topo, o).plan.max_tbs_per_rank();
      EXPECT_LT(state, conn) << topo.name << " instances " << instances;
      std::printf("built-in hm_allreduce on %s, instances %s: state %d, conn %d thread blocks per rank\n",
                  topo.name.c_str(), instances ? "1" : "derived", state, conn);
    }
  }
}

}  // namespace
}  // namespace weft
