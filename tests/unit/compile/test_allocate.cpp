// Thread-block allocation: state never needs more thread blocks than conn; on HM AllReduce it
// needs fewer (paper 001 Table 3: 8 against 14 on 2x4 nodes, 16 against 30 on 4x8).
#include <gtest/gtest.h>

#include <cstdio>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "lang/load.hpp"

namespace weft {
namespace {

Algorithm figure16(int nodes, int gpus) {
  return load_algorithm(std::string(WEFT_TEST_DATA_DIR) + "/tests/data/figure16_hm_allreduce.rccl",
                        {{"nRanks", std::to_string(nodes * gpus)}, {"GPUPerNode", std::to_string(gpus)}});
}

CompileResult run(const Algorithm& a, const Topology& t, const char* sched, const char* alloc, int instances, bool fuse) {
  CompileOptions o;
  o.scheduler = sched;
  o.allocator = alloc;
  o.instances = instances;
  o.fuse = fuse;
  return compile(a, t, o);
}

TEST(Allocate, StateNeverNeedsMoreThanConn) {
  for (const test::Case& c : test::all_cases())
    for (std::string_view s : {"hpds", "algo", "stage", "rr", "gc3"})
      for (int inst : {1, 0}) {
        CompileResult st = run(c.algo, c.topo, s.data(), "state", inst, true);
        CompileResult cn = run(c.algo, c.topo, s.data(), "conn", inst, true);
        for (int32_t r = 0; r < c.algo.ranks; ++r)
          EXPECT_LE(st.plan.ranks[r].tbs.size(), cn.plan.ranks[r].tbs.size()) << c.algo.name << " " << s << " rank " << r;
      }
}

TEST(Allocate, StateNeedsFewerThanConnOnHmAllReduce) {
  std::printf("HM AllReduce (Figure 16), instances 1: thread blocks per rank, max\n");
  std::printf("%-9s %-6s %6s %6s\n", "topology", "fused", "state", "conn");
  for (auto [n, g] : {std::pair{2, 4}, std::pair{2, 8}, std::pair{4, 4}, std::pair{4, 8}}) {
    Algorithm a = figure16(n, g);
    Topology t = test::a100(n, g);
    for (bool fuse : {false, true}) {
      int32_t state = run(a, t, "hpds", "state", 1, fuse).plan.max_tbs_per_rank();
      int32_t conn = run(a, t, "hpds", "conn", 1, fuse).plan.max_tbs_per_rank();
      std::printf("%-9s %-6s %6d %6d\n", t.name.c_str(), fuse ? "yes" : "no", state, conn);
      EXPECT_LT(state, conn) << t.name;
      if (!fuse) {
        // Without fusion the counts are those of paper 001 Table 3 (ResCCL, MSCCL).
        EXPECT_EQ(state, 2 * g) << t.name;
        EXPECT_EQ(conn, 4 * (g - 1) + 2) << t.name;
      }
    }
  }
}

TEST(Allocate, StateNeedsFewerWithDerivedInstancesToo) {
  for (auto [n, g] : {std::pair{2, 4}, std::pair{4, 8}}) {
    Algorithm a = figure16(n, g);
    Topology t = test::a100(n, g);
    EXPECT_LT(run(a, t, "hpds", "state", 0, true).plan.max_tbs_per_rank(),
              run(a, t, "hpds", "conn", 0, true).plan.max_tbs_per_rank());
  }
}

}  // namespace
}  // namespace weft
