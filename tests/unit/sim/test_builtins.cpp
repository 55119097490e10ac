// Invariants on every built-in algorithm's compiled plans: no link above its capacity at any
// instant, every invocation executed once, dependencies, message order and FIFO depth
// respected; merging instance siblings changes no figure.
#include <gtest/gtest.h>

#include "compile/compiler.hpp"
#include "invariants.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "sim/simulator.hpp"
#include "sim/sweep.hpp"
#include "util/error.hpp"

namespace weft::sim {
namespace {

struct Case {
  std::string topology;
  std::string scheduler;
  std::string allocator;
};

TEST(Builtins, EveryPlanKeepsTheInvariants) {
  const std::vector<std::string> names = builtin_algorithm_names();
  ASSERT_FALSE(names.empty());
  const std::vector<Case> cases = {
      {"a100-2x4", "hpds", "state"}, {"a100-2x4", "rr", "state"},   {"a100-2x4", "algo", "state"},
      {"a100-2x4", "stage", "conn"}, {"a100-2x4", "gc3", "conn"},   {"h200-1x4", "hpds", "state"},
      {"h200-1x4", "stage", "conn"}, {"a100-4x2", "hpds", "state"}, {"a100-4x2", "algo", "conn"},
  };
  int simulated = 0;
  for (const std::string& name : names) {
    for (const Case& c : cases) {
      SCOPED_TRACE(name + " on " + c.topology + ", " + c.scheduler + "/" + c.allocator);
      Topology topo = load_topology(c.topology);
      Algorithm algo;
      try {
        algo = load_algorithm(name, params_for_topology(topo, {}));
      } catch (const Error& e) {
        // Rooted or shape-bound built-ins may not fit every topology; they must say why.
        EXPECT_NE(std::string(e.what()), "");
        continue;
      }
      CompileOptions co;
      co.scheduler = c.scheduler;
      co.allocator = c.allocator;
      CompileResult cr = compile(algo, topo, co);
      SimOptions o;
      o.check = true;
      o.microbatch_bytes = 1 << 16;
      o.bytes = static_cast<uint64_t>(std::max(cr.plan.input_chunks, cr.plan.output_chunks)) * (3u << 16);  // 3 micro-batches
      for (int depth : {1, 4}) {
        o.fifo_depth = depth;
        Simulator merged(cr.plan, topo, true), plain(cr.plan, topo, false);
        SimReport a = merged.run(o), b = plain.run(o);
        testing::expect_invariants(merged, a, depth);
        testing::expect_invariants(plain, b, depth);
        EXPECT_NEAR(a.time_us, b.time_us, 1e-9 * b.time_us);
        EXPECT_NEAR(a.tb_idle_mean, b.tb_idle_mean, 1e-9);
        EXPECT_EQ(a.invocations, b.invocations);
        EXPECT_GT(a.time_us, 0);
        ++simulated;
      }
    }
  }
  EXPECT_GT(simulated, static_cast<int>(names.size()) * 6);
}

}  // namespace
}  // namespace weft::sim
