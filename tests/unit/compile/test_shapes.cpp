// The plan shapes automatic instances choose among (docs/compile.md, "Instances",
// "Execution", "Channels", "Thread-block allocation", "Merging blocks on the simulated
// timeline"): instances per connection, hpds at algorithm level, a channel per chunk, the
// peer allocator, and merging thread blocks whose slots never run at once. Each compiled
// plan is replayed lane by lane through the verifier.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "compile/lower.hpp"
#include "compile/merge_blocks.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

CompileOptions opts(const std::string& scheduler) {
  CompileOptions o;
  o.scheduler = scheduler;
  return o;
}

void expect_replays(const Plan& p) {
  for (int32_t lane = 0; lane < plan_lanes(p); ++lane) {
    VerifyResult v = verify(replay_plan(p, lane));
    EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
  }
}

/// Instances of each connection's sending slots: (src, dst) -> instances.
std::map<std::pair<int, int>, int> send_instances(const Plan& p) {
  std::map<std::pair<int, int>, int> k;
  for (const RankPlan& rp : p.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots)
        if (s.send_peer >= 0) k[{rp.rank, s.send_peer}] = s.instances;
  return k;
}

TEST(Shapes, OneNodeInstancesFillTheLinkAConnectionHasToItself) {
  // A ring on one H200 node: each GPU drives one peer at a time, so a connection has the
  // whole port, 370 GB/s at 20 per block: 19 blocks (the cap of 8 that held before is gone).
  CompileResult r = compile(test::ring_allreduce(8), topology_preset("h200-1x8"), opts("hpds"));
  EXPECT_EQ(r.instances_intra, 19);
  EXPECT_EQ(link_fill_blocks(topology_preset("h200-1x8"), LinkClass::Intra), 19);
}

TEST(Shapes, OneNodeInstancesFollowEachConnectionsShareOfItsPhase) {
  // Two transfers leave GPU 0 in one step: 3 chunks to GPU 1 and 1 chunk to GPU 2. The port
  // moves 4 chunks in the phase's time; the heavier connection gets three times the blocks.
  Algorithm a = test::resccl("uneven", Collective::Custom, 3);
  a.input_chunks = a.output_chunks = 4;
  a.transfers.push_back({0, Buffer::Input, 0, 1, Buffer::Output, 0, 3, TransferOp::Copy, 0});
  a.transfers.push_back({0, Buffer::Input, 3, 2, Buffer::Output, 3, 1, TransferOp::Copy, 0});
  a.in_place = false;
  CompileOptions o = opts("hpds");
  o.in_place = false;
  Topology t = topology_preset("h200-1x8");
  t.gpus_per_node = 3;
  t.name = "h200-1x3";
  const Plan p = compile(a, t, o).plan;
  const auto k = send_instances(p);
  // 370 GB/s x 3/4 over 20 per block: 14; x 1/4: 5, raised to 7, a divisor of 14, so that
  // every chunk is cut into 14 parts at most (an MSCCL export takes 64; within_parts).
  EXPECT_EQ(k.at({0, 1}), 14);
  EXPECT_EQ(k.at({0, 2}), 7);
  // Unconstrained, the counts are 14 and 5.
  Instances raw;
  raw.intra = 14;
  raw.per_link = {{1, 14}, {2, 5}};
  EXPECT_EQ(parts_needed(raw), 70);
  const Instances fit = within_parts(raw, kMaxInstanceParts, t);
  EXPECT_EQ(fit.per_link.at(2), 7);
  EXPECT_LE(parts_needed(fit), kMaxInstanceParts);
}

TEST(Shapes, HpdsAtAlgorithmLevelRunsARingAsOneChainPerBlock) {
  // HPDS's sub-pipelines of a ring are its steps, so at algorithm level in step order the
  // plan is the written schedule's (algo, step order): one block per instance doing
  // receive-reduce-send chains, as NCCL's ring (test_lower checks that plan slot by slot).
  CompileOptions o = opts("hpds");
  o.execution = "algorithm";
  o.step_order = true;
  o.instances = 2;
  const Plan p = compile(test::ring_allreduce(4), test::a100(1, 4), o).plan;
  EXPECT_EQ(p.execution, ExecutionModel::Algorithm);
  EXPECT_EQ(p.scheduler, "hpds");
  CompileOptions written = o;
  written.scheduler = "algo";
  written.execution.clear();
  const Plan algo = compile(test::ring_allreduce(4), test::a100(1, 4), written).plan;
  ASSERT_EQ(p.ranks.size(), algo.ranks.size());
  for (size_t r = 0; r < p.ranks.size(); ++r) EXPECT_EQ(p.ranks[r], algo.ranks[r]) << "rank " << r;
  EXPECT_EQ(p.max_tbs_per_rank(), 2);
  EXPECT_TRUE(check_deadlock(p, 4).ok);
  // Without step order it runs in unit order, which replays.
  o.step_order = false;
  expect_replays(compile(test::ring_allreduce(4), test::a100(1, 4), o).plan);
  o.execution = "sideways";
  EXPECT_THROW(compile(test::ring_allreduce(4), test::a100(1, 4), o), Error);
}

TEST(Shapes, ChunkChannelsGiveEachChunkOfALinkItsOwnBlocks) {
  CompileOptions o = opts("hpds");
  o.channels = "chunk";
  o.aggregate = false;
  o.allocator = "conn";
  o.instances = 1;
  const Plan p = compile(test::allpairs_allreduce(4), test::a100(1, 4), o).plan;
  // Every connection end of a chunk is its own block: more blocks than with one channel per link.
  o.channels = "link";
  const Plan one = compile(test::allpairs_allreduce(4), test::a100(1, 4), o).plan;
  EXPECT_GT(p.max_tbs_per_rank(), one.max_tbs_per_rank());
  expect_replays(p);
  EXPECT_TRUE(check_deadlock(p).ok);
  o.channels = "diagonal";
  EXPECT_THROW(compile(test::allpairs_allreduce(4), test::a100(1, 4), o), Error);
}

TEST(Shapes, ChunkChannelsInStepOrderFuseChainsThatWaitForLaterWork) {
  // With a channel per chunk each slot keeps its own place in the pipeline's order (a fused
  // slot at its later op), so a receive-reduce may forward to a rank whose own work on the
  // chunk comes later, as MSCCL's rrs steps do; the plan stays deadlock-free.
  CompileOptions o = opts("hpds");
  o.channels = "chunk";
  o.aggregate = false;
  o.allocator = "conn";
  o.instances = 1;
  const Algorithm a = test::hm_allreduce(1, 8);
  const Topology t = topology_preset("h200-1x8");
  const CompileResult unit = compile(a, t, o);
  o.step_order = true;
  const CompileResult step = compile(a, t, o);
  EXPECT_GE(step.fused_primitives, unit.fused_primitives);
  EXPECT_LE(step.plan.max_tbs_per_rank(), unit.plan.max_tbs_per_rank());
  EXPECT_EQ(step.plan.execution, ExecutionModel::Task);
  EXPECT_TRUE(check_deadlock(step.plan, 4).ok);
}

TEST(Shapes, PeerAllocationPutsBothDirectionsOfAPeerOnOneBlock) {
  for (const char* exec : {"task", "algorithm"}) {
    SCOPED_TRACE(exec);
    CompileOptions o = opts("hpds");
    o.allocator = "peer";
    o.execution = exec;
    o.instances = 1;
    const Plan p = compile(test::allpairs_allreduce(4), test::a100(1, 4), o).plan;
    // Each peer's both directions on one block of the rank (fused primitives may join two
    // peers' blocks into one).
    for (const RankPlan& rp : p.ranks) {
      std::map<int, std::set<size_t>> blocks_of_peer;
      for (size_t tb = 0; tb < rp.tbs.size(); ++tb)
        for (const Slot& s : rp.tbs[tb].slots) {
          if (s.send_peer >= 0) blocks_of_peer[s.send_peer].insert(tb);
          if (s.recv_peer >= 0) blocks_of_peer[s.recv_peer].insert(tb);
        }
      for (const auto& [peer, blocks] : blocks_of_peer) EXPECT_EQ(blocks.size(), 1u) << "rank " << rp.rank << " peer " << peer;
    }
    // One block per peer; local copies and reductions ride on them (MSCCL's all-pairs files
    // do so).
    EXPECT_LE(p.max_tbs_per_rank(), 3);
    // Spare blocks take a share of the local work, dealt round robin with the others
    // (AllToAll in place copies what it staged in scratch home); none is left empty.
    o.spare_blocks = 2;
    const Plan spare = compile(test::alltoall(4), test::a100(1, 4), o).plan;
    CompileOptions n = o;
    n.spare_blocks = 0;
    const Plan none = compile(test::alltoall(4), test::a100(1, 4), n).plan;
    EXPECT_LE(spare.max_tbs_per_rank(), none.max_tbs_per_rank() + 2);
    for (const RankPlan& rp : spare.ranks) {
      for (size_t tb = static_cast<size_t>(none.ranks[rp.rank].tbs.size()); tb < rp.tbs.size(); ++tb)
        for (const Slot& s : rp.tbs[tb].slots) EXPECT_TRUE(s.send_peer < 0 && s.recv_peer < 0);
      for (const ThreadBlock& tb : rp.tbs) EXPECT_FALSE(tb.slots.empty());
    }
    expect_replays(spare);
    EXPECT_TRUE(check_deadlock(p).ok);
    expect_replays(p);
  }
}

TEST(Shapes, MergeByActivityColoursIntervalsOptimally) {
  // Rank 0: block 0 works at [0,10] and [30,40]; block 1 at [12,25]; block 2 at [5,15].
  std::vector<std::vector<std::vector<SlotActivity>>> act(1);
  act[0] = {{{0, 10}, {30, 40}}, {{12, 25}}, {{5, 15}}};
  const BlockMerge m = merge_by_activity(act, 0.0);
  ASSERT_EQ(m[0].size(), 2u);  // 0 and 2 overlap, 1 fits between 0's two slots
  // Block 1's slot runs between block 0's two slots.
  const auto& merged = m[0][0].size() == 3 ? m[0][0] : m[0][1];
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0], (std::pair<int32_t, int32_t>{0, 0}));
  EXPECT_EQ(merged[1], (std::pair<int32_t, int32_t>{1, 0}));
  EXPECT_EQ(merged[2], (std::pair<int32_t, int32_t>{0, 1}));
  // Allowing overlap merges everything.
  EXPECT_EQ(merge_by_activity(act, -100.0)[0].size(), 1u);
}

Slot copy_slot(int chunk, std::vector<SlotDep> deps) {
  Slot s;
  s.primitive = Primitive::Copy;
  s.src = {Buffer::Input, chunk};
  s.dst = {Buffer::Output, chunk};
  for (const SlotDep& d : deps) s.deps.push_back(d);
  return s;
}

TEST(Shapes, MergingThreadBlocksRenumbersDependenciesAndRefusesBackwardWaits) {
  // One rank, three blocks: A; B waits on A; C waits on B.
  Plan p;
  p.num_ranks = 1;
  p.execution = ExecutionModel::Task;
  p.ranks.resize(1);
  p.ranks[0].tbs.resize(3);
  p.ranks[0].tbs[0].slots = {copy_slot(0, {})};
  p.ranks[0].tbs[1].slots = {copy_slot(1, {{0, 0}})};
  p.ranks[0].tbs[2].slots = {copy_slot(2, {{1, 0}})};
  // A and C on one block, B on another: the waits follow the slots to their new places.
  Plan m = p;
  ASSERT_TRUE(merge_thread_blocks(m, {{{{0, 0}, {2, 0}}, {{1, 0}}}}));
  ASSERT_EQ(m.ranks[0].tbs.size(), 2u);
  EXPECT_EQ(m.ranks[0].tbs[0].slots[1].deps.size(), 1u);
  EXPECT_EQ(m.ranks[0].tbs[0].slots[1].deps[0], (SlotDep{1, 0}));
  EXPECT_EQ(m.ranks[0].tbs[1].slots[0].deps[0], (SlotDep{0, 0}));
  // All three in order: program order covers every wait.
  m = p;
  ASSERT_TRUE(merge_thread_blocks(m, {{{{0, 0}, {1, 0}, {2, 0}}}}));
  for (const Slot& s : m.ranks[0].tbs[0].slots) EXPECT_TRUE(s.deps.empty());
  // B before A: B would wait on a later slot of its own block. Refused, the plan unchanged.
  m = p;
  EXPECT_FALSE(merge_thread_blocks(m, {{{{1, 0}, {0, 0}, {2, 0}}}}));
  EXPECT_EQ(m, p);
}

}  // namespace
}  // namespace weft
