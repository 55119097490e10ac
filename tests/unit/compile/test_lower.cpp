// Lowering: fusion (rcs, rrcs, rrs), aggregation, instances, dependencies, out-of-place buffers.
#include <gtest/gtest.h>

#include <map>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "compile/lower.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

std::map<Primitive, int> count_primitives(const Plan& p) {
  std::map<Primitive, int> n;
  for (const RankPlan& r : p.ranks)
    for (const ThreadBlock& tb : r.tbs)
      for (const Slot& s : tb.slots) ++n[s.primitive];
  return n;
}

CompileOptions opts(const char* scheduler, int instances = 1) {
  CompileOptions o;
  o.scheduler = scheduler;
  o.instances = instances;
  return o;
}

TEST(Lower, ForwardedChunksFuse) {
  // Ring AllGather: every rank but the chunk's first and last forwards it: rcs.
  auto ag = count_primitives(compile(test::ring_allgather(4), test::a100(1, 4), opts("algo")).plan);
  EXPECT_EQ(ag[Primitive::RecvCopySend], 4 * 2);
  EXPECT_EQ(ag[Primitive::Send], 4);
  EXPECT_EQ(ag[Primitive::Recv], 4);
  // Ring ReduceScatter: the partial sums stay in the input buffer: rrcs, never rrs.
  auto rs = count_primitives(compile(test::ring_reducescatter(4), test::a100(1, 4), opts("algo")).plan);
  EXPECT_EQ(rs[Primitive::RecvReduceCopySend], 4 * 2);
  EXPECT_EQ(rs[Primitive::RecvReduceSend], 0);
  // Ring AllReduce: partial sums die (the AllGather overwrites them): rrs; the AllGather
  // forwards: rcs. The final sum is not fused with its first AllGather hop: a chunk's
  // ReduceScatter chain has visited every rank by then, and a unit holds one slot per rank.
  CompileResult ar = compile(test::ring_allreduce(4), test::a100(1, 4), opts("algo"));
  auto n = count_primitives(ar.plan);
  EXPECT_EQ(n[Primitive::RecvReduceSend], 4 * 2);
  EXPECT_EQ(n[Primitive::RecvReduceCopySend], 0);
  EXPECT_EQ(n[Primitive::RecvCopySend], 4 * 2);
  EXPECT_EQ(ar.fused_primitives, 4 * 4);
  CompileOptions o = opts("algo");
  o.fuse = false;
  EXPECT_EQ(compile(test::ring_allreduce(4), test::a100(1, 4), o).fused_primitives, 0);
}

TEST(Lower, WithAChannelPerChunkAReductionThatFansOutDoesNotFuseWithASend) {
  // AllReduce on 4 ranks: rank c reduces chunk c from c+1, c+2 and c+3 in turn, then sends
  // the sum to its 3 peers (ndv5-ar-4m's shape within a node). With a channel per chunk, in
  // step order as the tuner takes it, c's last reduction stays a receive-reduce (rrc) and
  // the 3 sends wait for it alone (docs/compile.md, "Fusion"); fused, it would be an rrcs
  // (4 of them, and 20 sends instead of 24).
  Algorithm a = test::resccl("reduce_then_fan_out", Collective::AllReduce, 4);
  for (int c = 0; c < 4; ++c) {
    for (int h = 1; h < 4; ++h) test::transfer(a, (c + h) % 4, c, h - 1, c, true);
    for (int d = 1; d < 4; ++d) test::transfer(a, c, (c + d) % 4, 3, c, false);
  }
  CompileOptions o = opts("hpds");
  o.channels = "chunk";
  o.aggregate = false;
  o.step_order = true;
  const CompileResult r = compile(a, test::a100(1, 4), o);
  auto n = count_primitives(r.plan);
  EXPECT_EQ(n[Primitive::RecvReduceCopySend], 0);
  EXPECT_EQ(n[Primitive::RecvReduceCopy], 12);
  EXPECT_EQ(n[Primitive::Send], 4 * 6);
  for (int32_t lane = 0; lane < plan_lanes(r.plan); ++lane) {
    VerifyResult v = verify(replay_plan(r.plan, lane));
    EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
  }
}

TEST(Lower, StepOrderRunsARingAsOneChainPerChunkStartingWithEachRanksOwnSend) {
  // In step order a chunk's chain may come back to a rank: the final sum fuses with the
  // first AllGather hop (rrcs), as in NCCL's ring, and every rank's one thread block per
  // instance starts with its own send, then receives in step order.
  CompileOptions o = opts("algo", 2);
  o.step_order = true;
  o.in_place = false;
  CompileResult ar = compile(test::ring_allreduce(4), test::a100(1, 4), o);
  auto n = count_primitives(ar.plan);
  EXPECT_EQ(n[Primitive::RecvReduceSend], 2 * 4 * 2);
  EXPECT_EQ(n[Primitive::RecvReduceCopySend], 2 * 4);
  EXPECT_EQ(n[Primitive::RecvCopySend], 2 * 4 * 2);
  EXPECT_EQ(n[Primitive::Send], 2 * 4);
  EXPECT_EQ(n[Primitive::Recv], 2 * 4);
  for (const RankPlan& rp : ar.plan.ranks) {
    ASSERT_EQ(rp.tbs.size(), 2u);  // one per instance
    for (const ThreadBlock& tb : rp.tbs) {
      ASSERT_EQ(tb.slots.size(), 7u);  // send, rrs, rrs, rrcs, rcs, rcs, recv
      EXPECT_EQ(tb.slots.front().primitive, Primitive::Send);
      EXPECT_EQ(tb.slots[3].primitive, Primitive::RecvReduceCopySend);
      EXPECT_EQ(tb.slots.back().primitive, Primitive::Recv);
    }
  }
  // It needs FIFOs of two messages, as the hand-built ring does: at depth 1 the compiler
  // keeps unit order, which is free at any depth.
  o.fifo_depth = 1;
  CompileResult unit = compile(test::ring_allreduce(4), test::a100(1, 4), o);
  EXPECT_EQ(count_primitives(unit.plan)[Primitive::RecvReduceCopySend], 0);
  // Off (the default), unit order whatever the depth.
  o.fifo_depth = 4;
  o.step_order = false;
  EXPECT_EQ(count_primitives(compile(test::ring_allreduce(4), test::a100(1, 4), o).plan)[Primitive::RecvReduceCopySend], 0);
}

TEST(Lower, HpdsFusesOnlyInsideOneSubPipeline) {
  // A ring uses every link once per step, so HPDS puts consecutive hops in different
  // sub-pipelines, and fusing them would pull a link into a sub-pipeline that has it busy.
  CompileResult r = compile(test::ring_allreduce(4), test::a100(1, 4), opts("hpds"));
  EXPECT_EQ(r.fused_primitives, 0);
  for (const RankPlan& rp : r.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) EXPECT_LT(s.subpipeline, r.plan.num_subpipelines);
}

TEST(Lower, ContiguousChunksOnOneLinkAndStepAggregate) {
  CompileResult r = compile(test::chain_broadcast(4), test::a100(1, 4), opts("hpds"));
  EXPECT_EQ(r.aggregated_tasks, 3 * 3);  // 4 chunks per hop become one primitive
  for (const RankPlan& rp : r.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        EXPECT_EQ(s.count, 4);
        EXPECT_EQ(s.tasks.size(), s.primitive == Primitive::RecvCopySend ? 8u : 4u);
      }
  CompileOptions o = opts("hpds");
  o.aggregate = false;
  EXPECT_EQ(compile(test::chain_broadcast(4), test::a100(1, 4), o).aggregated_tasks, 0);
}

TEST(Lower, InstancesComeFromTheTopologyUnlessGiven) {
  // a100-2x4 (test figures: 20 GB/s per block over NVLink, 10 through a NIC). Concurrency
  // alone would give 5 and 3: a GPU drives 3 NVLink peers at once in HM AllReduce's busiest
  // sub-pipeline (300 GB/s / 3 / 20 = 5), a NIC carries one transfer (25 / 10 = 3). Across
  // nodes the call is bound by its busiest NIC: 4 chunks (two GPUs, a ReduceScatter and an
  // AllGather chunk each) over 25 GB/s; in that time an NVLink connection moves 4 chunks
  // (25 GB/s: 2 blocks) and a NIC connection 2 (12.5 GB/s, the GPUs sharing the NIC split
  // it: 2 blocks).
  CompileResult r = compile(test::hm_allreduce(2, 4), test::a100(2, 4), opts("hpds", 0));
  EXPECT_EQ(r.instances_intra, 2);
  EXPECT_EQ(r.instances_inter, 2);
  std::map<std::tuple<int, int, int>, int> per_connection;  // (src, dst, channel) -> slots
  for (const RankPlan& rp : r.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        if (s.send_peer < 0) continue;
        bool intra = s.send_peer / 4 == rp.rank / 4;
        EXPECT_EQ(s.instances, 2) << (intra ? "intra" : "inter");
        EXPECT_EQ(s.channel % s.instances, s.instance);
        ++per_connection[{rp.rank, s.send_peer, s.channel}];
      }
  EXPECT_FALSE(per_connection.empty());
  CompileResult two = compile(test::hm_allreduce(2, 4), test::a100(2, 4), opts("hpds", 2));
  EXPECT_EQ(two.instances_intra, 2);
  EXPECT_EQ(two.instances_inter, 2);
}

TEST(Lower, FewerInstancesShrinkEveryStep) {
  // Scaled by max / needed, rounded down, at least 1.
  Instances k = fewer_instances({24, 12, 8}, 336, 72);
  EXPECT_EQ(k.intra, 5);
  EXPECT_EQ(k.inter, 2);
  EXPECT_EQ(k.local, 1);
  // Scaling that changes nothing still takes one from the largest count.
  k = fewer_instances({3, 1, 1}, 43, 42);
  EXPECT_EQ(k.intra, 2);
  EXPECT_EQ(k.inter, 1);
  // All ones: nothing left to take.
  k = fewer_instances({1, 1, 1}, 14, 13);
  EXPECT_EQ(k.intra + k.inter + k.local, 3);
}

TEST(Lower, MaxThreadBlocksLowersAgainWithFewerInstances) {
  // HM AllReduce on one node of 8: each rank drives 7 peers at once, 14 blocks per instance.
  Algorithm hm = test::hm_allreduce(1, 8);
  Topology topo = topology_preset("h200-1x8");
  CompileOptions o = opts("hpds", 24);
  EXPECT_EQ(compile(hm, topo, o).plan.max_tbs_per_rank(), 336);
  o.max_tbs = 72;
  CompileResult r = compile(hm, topo, o);
  EXPECT_LE(r.plan.max_tbs_per_rank(), 72);
  EXPECT_GT(r.plan.max_tbs_per_rank(), 36);  // as few rounds down as it takes, not down to 1
  EXPECT_EQ(r.instances_intra, 5);
  for (const RankPlan& rp : r.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) EXPECT_LE(s.instances, 5);
  // The plan lowered again is still the algorithm: every lane replays to a correct AllReduce.
  for (int32_t lane = 0; lane < plan_lanes(r.plan); ++lane) {
    VerifyResult v = verify(replay_plan(r.plan, lane));
    EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
  }
  // Derived instances under a limit: the same rule.
  o.instances = 0;
  o.max_tbs = 20;
  EXPECT_LE(compile(hm, topo, o).plan.max_tbs_per_rank(), 20);
  // One instance per link is the floor: a limit below that is an error that says so.
  o.max_tbs = 13;
  try {
    compile(hm, topo, o);
    FAIL() << "a limit below one instance per link compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("needs 14 thread blocks on one rank even with one instance per link"),
              std::string::npos)
        << e.what();
  }
  o.max_tbs = -1;
  EXPECT_THROW(compile(hm, topo, o), Error);
}

TEST(Lower, RuntimeRuleKeepsTheTableCountWhereItFitsAndDerivesWhereNot) {
  // Two ranks: ring AllReduce at the table's 24 per link fits the runtime's budget as is.
  CompileOptions o = opts("hpds", 24);
  CompileResult ring = compile_for_runtime(test::ring_allreduce(2), topology_preset("h200-1x2"), o);
  EXPECT_EQ(ring.instances_intra, 24);
  // Eight ranks: HM AllReduce would need 336; derived instances (370 GB/s over 7 peers at
  // 20 GB/s per block: 3) give 42, within the budget.
  CompileResult hm = compile_for_runtime(test::hm_allreduce(1, 8), topology_preset("h200-1x8"), o);
  EXPECT_EQ(hm.instances_intra, 3);
  EXPECT_LE(hm.plan.max_tbs_per_rank(), kRuntimePlanMaxTbs);
}

TEST(Lower, LocalCopiesGetInstancesToKeepPaceWithTheLinks) {
  // Ring AllGather out of place on 2 GPUs: each rank copies its own chunk from input to output
  // while the link moves the other. One NVLink peer per port: 300 GB/s; the copy must move as
  // much, 600 GB/s of HBM traffic, at 4 x 20 = 80 GB/s per block: 8 blocks (the cap).
  CompileOptions o = opts("hpds", 0);
  o.in_place = false;
  CompileResult r = compile(test::ring_allgather(2), test::a100(1, 2), o);
  EXPECT_EQ(r.instances_local, 8);
  int copies = 0;
  for (const RankPlan& rp : r.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots)
        if (s.primitive == Primitive::Copy) {
          EXPECT_EQ(s.instances, 8);
          ++copies;
        }
  EXPECT_EQ(copies, 2 * 8);
  // A faster block rate needs fewer blocks; HBM shared by several local operations at once
  // bounds the rate they need.
  Topology fast = test::a100(1, 2);
  fast.tb_local_GBps = 250;
  EXPECT_EQ(compile(test::ring_allgather(2), fast, o).instances_local, 3);
  Topology slow_hbm = test::a100(1, 2);
  slow_hbm.hbm_bandwidth_GBps = 150;
  EXPECT_EQ(compile(test::ring_allgather(2), slow_hbm, o).instances_local, 2);
  // --instances sets them too; in place there is nothing local to copy.
  o.instances = 3;
  EXPECT_EQ(compile(test::ring_allgather(2), test::a100(1, 2), o).instances_local, 3);
}

TEST(Lower, DependenciesPointToOtherThreadBlocksOfTheSameRank) {
  for (const test::Case& c : test::all_cases()) {
    CompileResult r = compile(c.algo, c.topo, opts("hpds", 2));
    for (const RankPlan& rp : r.plan.ranks)
      for (size_t t = 0; t < rp.tbs.size(); ++t)
        for (const Slot& s : rp.tbs[t].slots)
          for (const SlotDep& d : s.deps) {
            ASSERT_NE(d.tb, static_cast<int32_t>(t));
            ASSERT_LT(d.tb, static_cast<int32_t>(rp.tbs.size()));
            const Slot& on = rp.tbs[d.tb].slots.at(d.slot);
            // Instances wait only on instances whose share of a micro-batch overlaps theirs.
            EXPECT_TRUE(int64_t(on.instance) * s.instances < int64_t(s.instance + 1) * on.instances &&
                        int64_t(s.instance) * on.instances < int64_t(on.instance + 1) * s.instances);
          }
  }
}

TEST(Lower, OutOfPlaceNeverWritesTheInput) {
  auto writes = [](Primitive p) { return p != Primitive::Send && p != Primitive::RecvReduceSend && p != Primitive::Nop; };
  for (const test::Case& c : test::all_cases()) {
    CompileOptions o = opts("hpds");
    o.in_place = false;
    CompileResult r = compile(c.algo, c.topo, o);
    EXPECT_FALSE(r.plan.in_place);
    for (const RankPlan& rp : r.plan.ranks)
      for (const ThreadBlock& tb : rp.tbs)
        for (const Slot& s : tb.slots)
          if (writes(s.primitive)) {
            EXPECT_NE(s.dst.buffer, Buffer::Input) << c.algo.name;
          }
  }
  // ReduceScatter's partial sums of other ranks' chunks go to scratch slots: in a ring of 4,
  // rank r reduces into chunks r-2 and r-3 (and its own, r, which is its output).
  CompileOptions o = opts("hpds");
  o.in_place = false;
  EXPECT_EQ(compile(test::ring_reducescatter(4), test::a100(1, 4), o).plan.scratch_chunks, 2);
  // AllGather's own chunk is copied from the input: one local copy per rank.
  auto n = count_primitives(compile(test::ring_allgather(4), test::a100(1, 4), o).plan);
  EXPECT_EQ(n[Primitive::Copy], 4);
}

}  // namespace
}  // namespace weft
