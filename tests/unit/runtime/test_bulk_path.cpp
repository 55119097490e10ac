// The Simple bulk path's switches (docs/runtime.md, "Large messages against NCCL"): the
// invocation order in windows of micro-batches (WEFT_MB_WINDOW) shared by the kernels and the
// emulator, the micro-batch cut that gives every chunk a window, and the plan fusions of
// WEFT_FUSE_COPY, each checked on the CPU emulator against the host reference as the runtime
// checks every plan before its first launch.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "exec/exec_plan.hpp"
#include "exec/plan_fuse.hpp"
#include "exec/plan_lowering.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using Walk = std::vector<std::pair<int32_t, uint32_t>>;  // (slot, micro-batch) in order

Walk walk(int32_t nslots, uint32_t nmb, uint32_t win) {
  Walk w;
  exec::InvocationOrder o = exec::order_begin(nmb, win);
  do w.emplace_back(o.slot, o.k);
  while (exec::order_next(o, nslots, nmb, win) && w.size() < 10000);
  return w;
}

TEST(BulkPath, InvocationOrderRunsEachSlotOverAWindow) {
  // Window 1: each micro-batch over every slot (the algorithm level before windows).
  EXPECT_EQ(walk(2, 3, 1), (Walk{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2}}));
  // Window 2 of 3 micro-batches: every slot over [0, 2), then over [2, 3).
  EXPECT_EQ(walk(2, 3, 2), (Walk{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {1, 2}}));
  // A window of all micro-batches is the task level.
  EXPECT_EQ(walk(2, 3, exec::order_window(true, 3, 2)), (Walk{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}));
  EXPECT_EQ(exec::order_window(false, 5, 0), 1u);
  EXPECT_EQ(exec::order_window(false, 5, 4), 4u);
  // Every invocation exactly once, and each slot's micro-batches in increasing order (the
  // counters a dependency waits on only grow).
  for (int32_t nslots : {1, 2, 7})
    for (uint32_t nmb : {1u, 2u, 5u, 22u})
      for (uint32_t win : {1u, 2u, 3u, 8u, 64u}) {
        const Walk w = walk(nslots, nmb, win);
        EXPECT_EQ(w.size(), static_cast<size_t>(nslots) * nmb);
        const std::set<std::pair<int32_t, uint32_t>> distinct(w.begin(), w.end());
        EXPECT_EQ(distinct.size(), w.size());
        std::vector<int64_t> last(static_cast<size_t>(nslots), -1);
        for (const auto& [s, k] : w) {
          EXPECT_GT(static_cast<int64_t>(k), last[static_cast<size_t>(s)]);
          last[static_cast<size_t>(s)] = k;
        }
      }
}

LoweredPlan runtime_plan(Collective c, int R, const std::string& algo, int instances, bool in_place, int root = 0,
                         const std::string& scheduler = "algo") {
  return lower_plan(make_plan(c, R, algo, "Simple", instances, in_place, root, 4, scheduler), R, 64);
}

TEST(BulkPath, WindowsCutChunksIntoEnoughMicroBatches) {
  const LoweredPlan lp = runtime_plan(Collective::AllReduce, 4, "ring_allreduce", 4, false);
  // 4 Mi floats: 1 Mi per chunk; 512 KiB slots give micro-batches of 4 x 128 Ki: 2 per chunk.
  EXPECT_EQ(make_geometry(lp, 4u << 20, 4, 512 << 10).nmb, 2u);
  EXPECT_EQ(make_geometry(lp, 4u << 20, 4, 512 << 10, 0, exec::kSimple, 2).nmb, 2u);
  EXPECT_EQ(make_geometry(lp, 4u << 20, 4, 512 << 10, 0, exec::kSimple, 8).nmb, 8u);
  // Cut into 8, each of the 4 blocks' pieces is 128 KiB: kept at a floor of 128 KiB, not of 256.
  EXPECT_EQ(make_geometry(lp, 4u << 20, 4, 512 << 10, 0, exec::kSimple, 8, 128 << 10).nmb, 8u);
  EXPECT_EQ(make_geometry(lp, 4u << 20, 4, 512 << 10, 0, exec::kSimple, 8, 256 << 10).nmb, 2u);
  // 16 MiB of floats as NCCL's 16 MiB row: one micro-batch per chunk, two with a window of 2.
  const exec::Geometry g = make_geometry(lp, 1000, 4, 512 << 10, 0, exec::kSimple, 2);
  EXPECT_EQ(g.nmb, 2u);
  EXPECT_EQ(g.mb % 4, 0u);  // 16-byte aligned parts
  // A chunk of one 16-byte unit cannot be cut.
  EXPECT_EQ(make_geometry(lp, 16, 4, 512 << 10, 0, exec::kSimple, 2).nmb, 1u);
}

TEST(BulkPath, RingsAndChainsPassTheEmulatorInWindows) {
  struct Algo {
    Collective c;
    const char* name;
    const char* scheduler;
  };
  const Algo algos[] = {{Collective::AllReduce, "ring_allreduce", "algo"},
                        {Collective::AllGather, "ring_allgather", "algo"},
                        {Collective::ReduceScatter, "ring_reducescatter", "algo"},
                        {Collective::Broadcast, "pipe_broadcast", "algo"},
                        {Collective::Reduce, "pipe_reduce", "hpds"},
                        {Collective::Reduce, "chain_reduce", "algo"}};
  for (const Algo& a : algos)
    for (int R : {2, 3, 4, 8})
      for (bool in_place : {false, true})
        for (int instances : {1, 3}) {
          const int root = R - 1;
          const LoweredPlan lp = runtime_plan(a.c, R, a.name, instances, in_place, root, a.scheduler);
          for (uint32_t win : {1u, 2u, 3u})
            EXPECT_NO_THROW(check_plan_on_emulator(lp, 4, exec::kSimple, win))
                << a.name << " R=" << R << (in_place ? " in place" : " out of place") << " x" << instances
                << " window " << win;
        }
  // A ring step receives a window's messages and sends as many: with a window as deep as the
  // FIFO every rank waits for credit its successor can only give after its own send. The
  // emulator finds it, and the runtime then runs the plan in windows of 1 (bulk_options).
  const LoweredPlan ring = runtime_plan(Collective::AllReduce, 4, "ring_allreduce", 2, false);
  EXPECT_THROW(check_plan_on_emulator(ring, 4, exec::kSimple, 4), Error);
  EXPECT_NO_THROW(check_plan_on_emulator(ring, 8, exec::kSimple, 4));
}

int count_prim(const LoweredRank& lr, int prim, uint8_t flag = 0) {
  int n = 0;
  for (const exec::DevSlot& s : lr.slots) n += s.prim == prim && (flag == 0 || (s.flags & flag) != 0);
  return n;
}

TEST(BulkPath, BroadcastRootSendsAndCopiesInOnePass) {
  LoweredPlan lp = runtime_plan(Collective::Broadcast, 4, "pipe_broadcast", 3, false, 1);
  const size_t root_slots = lp.ranks[1].slots.size();
  ASSERT_EQ(count_prim(lp.ranks[1], exec::kCopy), 3);
  const FuseReport f = fuse_copies(lp);
  EXPECT_EQ(f.copy_sends, 3);
  EXPECT_EQ(f.folded_blocks, 0);
  EXPECT_EQ(count_prim(lp.ranks[1], exec::kSend, exec::kFusedCopy), 3);
  EXPECT_EQ(count_prim(lp.ranks[1], exec::kCopy), 0);
  EXPECT_EQ(count_prim(lp.ranks[1], exec::kNop), 3);  // the copy slots stay, as no-ops
  EXPECT_EQ(lp.ranks[1].slots.size(), root_slots);
  for (uint32_t win : {1u, 2u}) EXPECT_NO_THROW(check_plan_on_emulator(lp, 4, exec::kSimple, win));
  // In place the root has nothing to copy.
  LoweredPlan in = runtime_plan(Collective::Broadcast, 4, "pipe_broadcast", 3, true, 1);
  EXPECT_EQ(fuse_copies(in).total(), 0);
}

TEST(BulkPath, CopyOnlyBlocksFoldIntoTheSends) {
  // hpds puts the Broadcast root's copy in a block of its own; the AllGather ring (algo) too.
  LoweredPlan bc = runtime_plan(Collective::Broadcast, 4, "pipe_broadcast", 2, false, 0, "hpds");
  const size_t bc_tbs = bc.ranks[0].tbs.size();
  EXPECT_EQ(fuse_copies(bc).folded_blocks, 2);
  EXPECT_EQ(bc.ranks[0].tbs.size(), bc_tbs - 2);
  EXPECT_NO_THROW(check_plan_on_emulator(bc, 4, exec::kSimple));
  for (int R : {2, 3, 4, 8}) {
    LoweredPlan ag = runtime_plan(Collective::AllGather, R, "ring_allgather", 3, false);
    std::vector<size_t> before;
    for (const LoweredRank& lr : ag.ranks) before.push_back(lr.tbs.size());
    const FuseReport f = fuse_copies(ag);
    // On 2 ranks the copy follows the send in its block (copy-send); from 3 it has blocks of its own.
    EXPECT_EQ(R == 2 ? f.copy_sends : f.folded_blocks, 3 * R) << "R=" << R;
    for (int r = 0; r < R; ++r) {
      const LoweredRank& lr = ag.ranks[static_cast<size_t>(r)];
      EXPECT_EQ(lr.tbs.size(), before[static_cast<size_t>(r)] - (R == 2 ? 0 : 3)) << "R=" << R;
      EXPECT_EQ(ag.plan.ranks[static_cast<size_t>(r)].tbs.size(), lr.tbs.size());  // the plan keeps the numbering
      EXPECT_EQ(count_prim(lr, exec::kCopy), 0);
      EXPECT_EQ(count_prim(lr, exec::kSend, exec::kFusedCopy), 3);
      size_t slots = 0;
      for (const exec::DevTB& tb : lr.tbs) {
        EXPECT_EQ(static_cast<size_t>(tb.slot_begin), slots);
        slots += static_cast<size_t>(tb.nslots);
      }
      EXPECT_EQ(slots, lr.slots.size());
    }
    for (uint32_t win : {1u, 2u}) EXPECT_NO_THROW(check_plan_on_emulator(ag, 4, exec::kSimple, win)) << "R=" << R;
  }
}

TEST(BulkPath, UnreadScratchIsNotWritten) {
  for (int R : {3, 4, 8}) {
    LoweredPlan rs = runtime_plan(Collective::ReduceScatter, R, "ring_reducescatter", 2, false);
    int rrcs = 0;
    for (const LoweredRank& lr : rs.ranks) rrcs += count_prim(lr, exec::kRecvReduceCopySend);
    ASSERT_GT(rrcs, 0) << "R=" << R;
    EXPECT_EQ(fuse_copies(rs).dead_scratch, rrcs) << "R=" << R;
    for (const LoweredRank& lr : rs.ranks) EXPECT_EQ(count_prim(lr, exec::kRecvReduceCopySend), 0);
    for (uint32_t win : {1u, 2u}) EXPECT_NO_THROW(check_plan_on_emulator(rs, 4, exec::kSimple, win)) << "R=" << R;
  }
  // The AllReduce ring's rrcs writes the output, which the ring reads again: it stays.
  LoweredPlan ar = runtime_plan(Collective::AllReduce, 4, "ring_allreduce", 2, false);
  EXPECT_EQ(fuse_copies(ar).total(), 0);
}

TEST(BulkPath, FusedPlansOfEveryBulkAlgorithmPassTheEmulator) {
  const std::pair<Collective, const char*> algos[] = {
      {Collective::AllReduce, "ring_allreduce"}, {Collective::AllGather, "ring_allgather"},
      {Collective::ReduceScatter, "ring_reducescatter"}, {Collective::Broadcast, "pipe_broadcast"},
      {Collective::Broadcast, "chain_broadcast"}, {Collective::Reduce, "pipe_reduce"},
      {Collective::Reduce, "chain_reduce"}, {Collective::AllToAll, "alltoall_direct"}};
  for (const auto& [c, name] : algos)
    for (const char* sched : {"algo", "hpds"})
      for (int R : {2, 4, 5})
        for (bool in_place : {false, true}) {
          if (c == Collective::AllToAll && in_place) continue;
          LoweredPlan lp = runtime_plan(c, R, name, 2, in_place, R > 2 ? 2 : 0, sched);
          fuse_copies(lp);
          EXPECT_NO_THROW(check_plan_on_emulator(lp, 4, exec::kSimple)) << name << " " << sched << " R=" << R;
        }
}

}  // namespace
}  // namespace weft
