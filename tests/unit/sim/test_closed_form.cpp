// Hand-computed cases: the simulator's times match closed forms within 1%.
#include <gtest/gtest.h>

#include "sim/simulator.hpp"
#include "sim_test_util.hpp"

namespace weft::sim {
namespace {

using testing::PlanBuilder;
using testing::test_topology;

constexpr double kMiB = 1024.0 * 1024.0;

// us to move `bytes` at `GBps`.
double us(double bytes, double GBps) { return bytes / (GBps * 1e3); }

SimOptions opts(uint64_t bytes, uint64_t mb = 1 << 20) {
  SimOptions o;
  o.bytes = bytes;
  o.microbatch_bytes = mb;
  o.check = true;
  return o;
}

TEST(ClosedForm, OneTransferInsideANode) {
  Topology t = test_topology(1, 2);
  PlanBuilder b(2);
  b.transfer(0, 0, 1, 0);
  SimReport r = simulate(b.plan(), t, opts(1 << 20));
  // alpha (send) + bytes / per-TB rate + latency + alpha (receive); the receiver's copy out
  // of staging (2 bytes of HBM traffic per byte at 80 GB/s) keeps pace with the 20 GB/s flow.
  const double expect = 1.0 + us(kMiB, 20) + 2.0 + 1.0;
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
  EXPECT_EQ(r.microbatches, 1);
  EXPECT_EQ(r.invocations, 2);
}

TEST(ClosedForm, OneTransferAcrossNodesIsCappedByTheThreadBlock) {
  Topology t = test_topology(2, 1, 1);
  PlanBuilder b(2);
  b.transfer(0, 0, 1, 0);
  SimReport r = simulate(b.plan(), t, opts(4 << 20, 4 << 20));
  const double expect = 1.0 + us(4 * kMiB, 10) + 5.0 + 1.0;
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
}

TEST(ClosedForm, OneTransferIsCappedByTheLink) {
  Topology t = test_topology(2, 1, 1);
  t.tb_net_GBps = 40;  // one block could drive more than the 25 GB/s NIC
  PlanBuilder b(2);
  b.transfer(0, 0, 1, 0);
  SimReport r = simulate(b.plan(), t, opts(4 << 20, 4 << 20));
  // Demand 40 on a 25 GB/s NIC: z = 1.6, the NIC delivers 25 / (1 + 0.3 * 0.6).
  const double rate = 25.0 / (1.0 + 0.3 * 0.6);
  const double expect = 1.0 + us(4 * kMiB, rate) + 5.0 + 1.0;
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
  EXPECT_LE(r.max_link_load, 1.0 + 1e-9);
}

// Stage A then stage B, B waiting per micro-batch on A's receive: one hop over NVLink
// (20 GB/s per block), the other through a NIC (10 GB/s per block).
TEST(ClosedForm, TwoTaskPipelineIsFillPlusNTimesTheSlowerStage) {
  for (int n : {1, 4, 16}) {
    // Slower stage last: nodes {0, 1} and {2} (a 2-GPU node whose second half is unused
    // would change nothing; use 2 nodes of 2 GPUs and leave GPU 3 idle).
    Topology t = test_topology(2, 2, 2);
    PlanBuilder b(4);
    b.transfer(0, 0, 1, 0);                                        // A: NVLink
    b.add(1, 1, Primitive::Send, 2, -1, 0, {SlotDep{0, 0}});        // B: network
    b.add(2, 0, Primitive::Recv, -1, 1, 0);
    SimReport r = simulate(b.plan(), t, opts(static_cast<uint64_t>(n) << 20));
    ASSERT_EQ(r.microbatches, n);
    const double a = 1.0 + us(kMiB, 20), stage_b = 1.0 + us(kMiB, 10);
    // Fill: A's first invocation, its latency and receive, then n x B, then B's latency and receive.
    const double expect = a + 2.0 + 1.0 + n * stage_b + 5.0 + 1.0;
    EXPECT_NEAR(r.time_us, expect, expect * 0.01) << "n = " << n;
  }
  for (int n : {1, 4, 16}) {
    // Slower stage first: rank 0 alone on node 0, ranks 1 and 2 on node 1... with 2 GPUs
    // per node, use ranks 1 (node 0) -> 2 (node 1) -> 3 (node 1).
    Topology t = test_topology(2, 2, 2);
    PlanBuilder b(4);
    b.transfer(1, 0, 2, 0);                                        // A: network
    b.add(2, 1, Primitive::Send, 3, -1, 0, {SlotDep{0, 0}});        // B: NVLink
    b.add(3, 0, Primitive::Recv, -1, 2, 0);
    SimReport r = simulate(b.plan(), t, opts(static_cast<uint64_t>(n) << 20));
    const double stage_a = 1.0 + us(kMiB, 10), bb = 1.0 + us(kMiB, 20);
    const double expect = n * stage_a + 5.0 + 1.0 + bb + 2.0 + 1.0;
    EXPECT_NEAR(r.time_us, expect, expect * 0.01) << "n = " << n;
  }
}

TEST(ClosedForm, TwoThreadBlocksContendForOneLink) {
  Topology t = test_topology(1, 2);
  t.nvlink_bandwidth_GBps = 30;  // two 20 GB/s blocks ask for 40
  PlanBuilder b(2);
  for (int i = 0; i < 2; ++i) {
    b.add(0, i, Primitive::Send, 1, -1, i, {}, i, 2);
    b.add(1, i, Primitive::Recv, -1, 0, i, {}, i, 2);
  }
  SimReport r = simulate(b.plan(), t, opts(2 << 20, 2 << 20));
  // Each block moves half of 2 MiB; z = 40 / 30, the link delivers 30 / (1 + 0.3 / 3),
  // shared equally.
  const double each = 30.0 / (1.0 + 0.3 / 3.0) / 2.0;
  const double expect = 1.0 + us(kMiB, each) + 2.0 + 1.0;
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
  EXPECT_LE(r.max_link_load, 1.0 + 1e-9);
  EXPECT_GT(r.max_link_load, 0.85);
}

TEST(ClosedForm, TwoGpusShareOneNic) {
  // Two nodes of two GPUs, one NIC per node: GPU 0 -> 2 and GPU 1 -> 3 share node 0's NIC
  // out and node 1's NIC in.
  Topology t = test_topology(2, 2, 2);
  t.tb_net_GBps = 20;
  PlanBuilder b(4);
  b.transfer(0, 0, 2, 0);
  b.transfer(1, 0, 3, 0);
  SimReport r = simulate(b.plan(), t, opts(4 << 20, 4 << 20));
  // Demand 40 on 25 GB/s: each flow gets 25 / (1 + 0.3 * 0.6) / 2.
  const double each = 25.0 / (1.0 + 0.3 * 0.6) / 2.0;
  const double expect = 1.0 + us(4 * kMiB, each) + 5.0 + 1.0;
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
  EXPECT_LE(r.max_link_load, 1.0 + 1e-9);
  // Alone, one GPU gets its block's full 20 GB/s.
  PlanBuilder solo(4);
  solo.transfer(0, 0, 2, 0);
  SimReport s = simulate(solo.plan(), t, opts(4 << 20, 4 << 20));
  const double alone = 1.0 + us(4 * kMiB, 20) + 5.0 + 1.0;
  EXPECT_NEAR(s.time_us, alone, alone * 0.01);
}

TEST(ClosedForm, LocalReductionIsLimitedByTheBlocksHbmRate) {
  Topology t = test_topology(1, 2);
  PlanBuilder b(2);
  b.add(0, 0, Primitive::Reduce, -1, -1);
  SimReport r = simulate(b.plan(), t, opts(8 << 20, 8 << 20));
  // Reduce reads two operands and writes one: 3 bytes of HBM traffic per byte at 80 GB/s.
  const double expect = 1.0 + us(3 * 8 * kMiB, 80);
  EXPECT_NEAR(r.time_us, expect, expect * 0.01);
}

}  // namespace
}  // namespace weft::sim
