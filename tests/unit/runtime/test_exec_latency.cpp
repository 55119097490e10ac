// What the interpreter's small-call latency work (docs/runtime.md, "Where a small plan call's
// time goes") relies on, checked on the CPU: each thread block's connections are one
// contiguous run of the rank's table (the kernel caches their states per thread block), the
// 32-bit fast path of the geometry's divisions gives the 64-bit results, and the block size
// small LL calls get.
#include <gtest/gtest.h>

#include <random>

#include "exec/plan_lowering.hpp"
#include "plan/hand_built.hpp"

namespace weft {
namespace {

const Collective kAll[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                           Collective::AllToAll, Collective::Broadcast, Collective::Reduce};

TEST(Lowering, EachThreadBlocksConnectionsAreOneRunOfTheTable) {
  int plans = 0;
  for (Collective c : kAll)
    for (const std::string& algo : hand_built_algorithms(c))
      for (int R : {2, 3, 5})
        for (int instances : {1, 3}) {
          HandBuiltSpec spec;
          spec.algorithm = algo;
          spec.instances = instances;
          spec.root = R - 1;
          const LoweredPlan lp = lower_plan(hand_built_plan(c, R, spec), R, 64);
          for (int r = 0; r < R; ++r) {
            const LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
            int32_t next = 0;  // thread blocks take the table's entries in order, none skipped
            for (size_t t = 0; t < lr.tbs.size(); ++t) {
              const exec::DevTB& tb = lr.tbs[t];
              const std::string where = std::string(to_string(c)) + "/" + algo + " R=" + std::to_string(R) + " x" +
                                        std::to_string(instances) + " rank " + std::to_string(r) + " tb " +
                                        std::to_string(t);
              EXPECT_EQ(tb.conn_begin, next) << where;
              EXPECT_GE(tb.nconns, 0) << where;
              next = tb.conn_begin + tb.nconns;
              std::vector<bool> used(static_cast<size_t>(std::max(tb.nconns, 0)), false);
              for (int32_t i = 0; i < tb.nslots; ++i) {
                const exec::DevSlot& s = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
                for (int32_t cn : {static_cast<int32_t>(s.send_conn), static_cast<int32_t>(s.recv_conn)}) {
                  if (cn < 0) continue;
                  ASSERT_GE(cn, tb.conn_begin) << where;
                  ASSERT_LT(cn, tb.conn_begin + tb.nconns) << where;
                  used[static_cast<size_t>(cn - tb.conn_begin)] = true;
                }
              }
              for (bool u : used) EXPECT_TRUE(u) << where << ": a connection of its run that no slot uses";
            }
            EXPECT_EQ(next, static_cast<int32_t>(lr.conns.size()));
          }
          ++plans;
        }
  EXPECT_GT(plans, 50);
}

TEST(Geometry, DivisionFastPathGivesThe64BitResults) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int shift = static_cast<int>(rng() % 64);
    const uint64_t a = rng() >> shift;
    uint64_t b = (rng() >> (rng() % 64)) | 1;
    if (i % 3 == 0) b = 1 + rng() % 64;
    ASSERT_EQ(exec::div_u64(a, b), a / b) << a << " / " << b;
  }
  exec::Geometry g;
  for (uint64_t n : {uint64_t(1000), uint64_t(5) << 32}) {
    g.n = n;
    g.stride = n / 3 + 16;
    g.k[0] = 3;
    g.k[1] = 7;
    for (int64_t j : {int64_t(0), int64_t(2), int64_t(3), int64_t(20), int64_t(1) << 31}) {
      for (int b : {0, 1}) {
        const uint64_t k = static_cast<uint64_t>(g.k[b]), uj = static_cast<uint64_t>(j);
        EXPECT_EQ(exec::chunk_offset(g, b, j), uj / k * g.n + uj % k * g.stride);
        const uint64_t start = uj % k * g.stride;
        EXPECT_EQ(exec::chunk_valid(g, b, j), start >= g.n ? 0 : std::min(g.n - start, g.stride));
      }
    }
  }
  g.elem_size = 4;
  for (uint64_t mb : {uint64_t(4), uint64_t(1000), uint64_t(3) << 33})
    for (int inst : {1, 3, 16}) {
      g.mb = mb;
      const uint64_t p = (mb + static_cast<uint64_t>(inst) - 1) / static_cast<uint64_t>(inst);
      EXPECT_EQ(exec::part_elems(g, inst), (p + 3) / 4 * 4);
    }
}

TEST(ExecThreads, SmallLLCallsTakeTheWarpsTheirPacketsNeed) {
  exec::Geometry g;
  g.elem_size = 4;
  g.mb = 4;  // 16 bytes: 2 packets
  EXPECT_EQ(exec_threads(g, exec::kLL, 1), 32);
  EXPECT_EQ(exec_threads(g, exec::kSimple, 1), exec::kExecBlockThreads);
  EXPECT_EQ(exec_threads(g, exec::kLL128, 1), exec::kExecBlockThreads);
  EXPECT_EQ(exec_threads(g, exec::kLL, 3), 96);  // one warp per role
  g.mb = 1024;  // 4 KiB: 512 packets, 128 threads at four each
  EXPECT_EQ(exec_threads(g, exec::kLL, 1), 128);
  g.mb = 1025;  // one packet more: one warp more
  EXPECT_EQ(exec_threads(g, exec::kLL, 1), 160);
  g.mb = 1 << 20;
  EXPECT_EQ(exec_threads(g, exec::kLL, 1), exec::kExecBlockThreads);
  EXPECT_EQ(exec_threads(g, exec::kLL, 3), 3 * (exec::kExecBlockThreads / 3 / 32 * 32));
  EXPECT_EQ(exec_threads(g, exec::kSimple, 2), exec::kExecBlockThreads);
  g.mb = 0;  // no data: still one warp
  EXPECT_EQ(exec_threads(g, exec::kLL, 1), 32);
}

}  // namespace
}  // namespace weft
