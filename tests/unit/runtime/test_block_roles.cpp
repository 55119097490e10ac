// Several plan thread blocks per CUDA block (plan_lowering.hpp, group_thread_blocks): which
// thread blocks share a CUDA block, that every thread block runs exactly once (so every slot
// does), that no two thread blocks that wait on each other share one, and that a rank's
// CUDA blocks come within the 24 targeted.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "exec/plan_lowering.hpp"
#include "plan/hand_built.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection.hpp"

namespace weft {
namespace {

/// Whether thread blocks t and u depend on each other (a slot of one waits on one of the other).
bool depends(const LoweredRank& lr, int t, int u) {
  auto tb_of = [&](int32_t slot) {
    for (size_t i = 0; i < lr.tbs.size(); ++i)
      if (slot >= lr.tbs[i].slot_begin && slot < lr.tbs[i].slot_begin + lr.tbs[i].nslots) return static_cast<int>(i);
    return -1;
  };
  for (int x : {t, u}) {
    const int y = x == t ? u : t;
    const exec::DevTB& tb = lr.tbs[static_cast<size_t>(x)];
    for (int32_t i = 0; i < tb.nslots; ++i) {
      const exec::DevSlot& s = lr.slots[static_cast<size_t>(tb.slot_begin + i)];
      for (int32_t d = 0; d < s.ndeps; ++d)
        if (tb_of(lr.deps[static_cast<size_t>(s.dep_begin + d)]) == y) return true;
    }
  }
  return false;
}

/// The invariants of any grouping; returns "" or what is wrong.
std::string check(const LoweredRank& lr, const RoleGroups& g, int max_roles) {
  const int n = static_cast<int>(lr.tbs.size());
  if (g.roles == 1) return g.blocks == n && g.tb_of.empty() ? "" : "roles 1 but blocks != thread blocks";
  if (g.roles < 1 || g.roles > std::min(max_roles, exec::kMaxBlockRoles)) return "roles out of range";
  if (static_cast<int>(g.tb_of.size()) != g.blocks * g.roles) return "tb_of size != blocks * roles";
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (int b = 0; b < g.blocks; ++b) {
    std::vector<int> members;
    for (int r = 0; r < g.roles; ++r) {
      const int t = g.tb_of[static_cast<size_t>(b * g.roles + r)];
      if (t < -1 || t >= n) return "thread block index out of range";
      if (t >= 0) members.push_back(t), ++seen[static_cast<size_t>(t)];
    }
    if (members.empty()) return "CUDA block " + std::to_string(b) + " runs nothing";
    if (g.tb_of[static_cast<size_t>(b * g.roles)] < 0) return "a block's first role is idle";
    for (size_t i = 0; i < members.size(); ++i)
      for (size_t j = i + 1; j < members.size(); ++j)
        if (depends(lr, members[i], members[j]))
          return "thread blocks " + std::to_string(members[i]) + " and " + std::to_string(members[j]) +
                 " depend on each other but share CUDA block " + std::to_string(b);
  }
  for (int t = 0; t < n; ++t)
    if (seen[static_cast<size_t>(t)] != 1)
      return "thread block " + std::to_string(t) + " runs " + std::to_string(seen[static_cast<size_t>(t)]) + " times";
  return "";
}

LoweredRank lowered(Collective c, const std::string& algo, int R, int instances, bool in_place, int rank = 0) {
  HandBuiltSpec spec;
  spec.algorithm = algo;
  spec.instances = instances;
  spec.in_place = in_place;
  return lower_plan(hand_built_plan(c, R, spec), R, 256).ranks[static_cast<size_t>(rank)];
}

TEST(BlockRoles, SmallPlansKeepOneThreadBlockPerCudaBlock) {
  const LoweredRank lr = lowered(Collective::AllReduce, "ring", 4, 4, false);
  ASSERT_LE(lr.tbs.size(), 24u);
  const RoleGroups g = group_thread_blocks(lr, 4);
  EXPECT_EQ(g.roles, 1);
  EXPECT_EQ(g.blocks, static_cast<int>(lr.tbs.size()));
  EXPECT_TRUE(g.tb_of.empty());
}

TEST(BlockRoles, OneRoleDisablesGrouping) {
  const LoweredRank lr = lowered(Collective::AllToAll, "allpairs", 2, 24, false);
  ASSERT_GT(lr.tbs.size(), 24u);
  const RoleGroups g = group_thread_blocks(lr, 1);
  EXPECT_EQ(g.roles, 1);
  EXPECT_EQ(g.blocks, static_cast<int>(lr.tbs.size()));
}

TEST(BlockRoles, BuiltinPlansKeepEveryThreadBlockOnceAndMeetTheTarget) {
  struct P {
    Collective c;
    const char* algo;
  };
  const P plans[] = {{Collective::AllReduce, "ring"},      {Collective::AllReduce, "allpairs"},
                     {Collective::AllGather, "ring"},      {Collective::AllGather, "allpairs"},
                     {Collective::ReduceScatter, "ring"},  {Collective::ReduceScatter, "allpairs"},
                     {Collective::AllToAll, "allpairs"},   {Collective::Broadcast, "allpairs"},
                     {Collective::Reduce, "chain"}};
  int grouped = 0;
  for (const P& p : plans)
    for (int R : {2, 3, 4, 8})
      for (int inst : {1, 8, 16, 24})
        for (bool in_place : {false, true})
          for (int max_roles : {2, 3, 4}) {
            const LoweredRank lr = lowered(p.c, p.algo, R, inst, in_place);
            const RoleGroups g = group_thread_blocks(lr, max_roles);
            const std::string what = std::string(to_string(p.c)) + "/" + p.algo + " R=" + std::to_string(R) +
                                     " x" + std::to_string(inst) + (in_place ? " in place" : "") +
                                     " max_roles=" + std::to_string(max_roles) + " (" +
                                     std::to_string(lr.tbs.size()) + " thread blocks)";
            ASSERT_EQ(check(lr, g, max_roles), "") << what;
            const int n = static_cast<int>(lr.tbs.size());
            if (n <= kRoleTargetBlocks) {
              EXPECT_EQ(g.roles, 1) << what;
              continue;
            }
            ++grouped;
            EXPECT_EQ(g.roles, std::min(max_roles, (n + kRoleTargetBlocks - 1) / kRoleTargetBlocks)) << what;
            EXPECT_LT(g.blocks, n) << what;
            // Where the roles reach the target, so does the block count, unless dependencies
            // kept thread blocks apart (none of the hand-built plans' blocks depend on each other
            // here, except the in-place AllToAll's single block, which is never grouped).
            if (g.roles * kRoleTargetBlocks >= n) {
              EXPECT_LE(g.blocks, kRoleTargetBlocks) << what;
            }
          }
  EXPECT_GT(grouped, 0);
}

TEST(BlockRoles, SenderAndReceiverOfAConnectionShareABlock) {
  // AllToAll over 2 ranks with 16 instances: per instance a sending and a receiving thread
  // block on the same connection (peer 1, pool index = instance), plus the local copies.
  const LoweredRank lr = lowered(Collective::AllToAll, "allpairs", 2, 16, false);
  const RoleGroups g = group_thread_blocks(lr, 2);
  ASSERT_EQ(check(lr, g, 2), "");
  ASSERT_EQ(g.roles, 2);
  int pairs = 0;
  for (int b = 0; b < g.blocks; ++b) {
    const int t = g.tb_of[static_cast<size_t>(b * 2)], u = g.tb_of[static_cast<size_t>(b * 2 + 1)];
    if (t < 0 || u < 0) continue;
    const exec::DevSlot& st = lr.slots[static_cast<size_t>(lr.tbs[static_cast<size_t>(t)].slot_begin)];
    const exec::DevSlot& su = lr.slots[static_cast<size_t>(lr.tbs[static_cast<size_t>(u)].slot_begin)];
    if (st.send_conn >= 0 && su.recv_conn >= 0 &&
        lr.conns[static_cast<size_t>(st.send_conn)].pool_index == lr.conns[static_cast<size_t>(su.recv_conn)].pool_index)
      ++pairs;
  }
  EXPECT_GE(pairs, 8) << "senders and receivers of the same connection should share CUDA blocks";
}

TEST(BlockRoles, DependentThreadBlocksNeverShareABlock) {
  // 40 one-slot thread blocks; the slot of block 2k + 1 waits on the slot of block 2k, so the
  // order the rule walks (all without connections: by index) would pair exactly the
  // dependent ones if it did not skip them.
  LoweredRank lr;
  for (int t = 0; t < 40; ++t) {
    lr.tbs.push_back({t, 1});
    exec::DevSlot s{};
    s.prim = exec::kCopy;
    s.send_conn = s.recv_conn = -1;
    s.count = 1;
    s.instances = 1;
    s.dep_begin = static_cast<int32_t>(lr.deps.size());
    if (t % 2 == 1) {
      lr.deps.push_back(t - 1);
      lr.dep_tbs.push_back(t - 1);
      s.ndeps = 1;
    }
    lr.slots.push_back(s);
  }
  for (int max_roles : {2, 4}) {
    const RoleGroups g = group_thread_blocks(lr, max_roles);
    ASSERT_EQ(check(lr, g, max_roles), "") << "max_roles " << max_roles;
    EXPECT_EQ(g.roles, 2);  // ceil(40 / 24)
    EXPECT_EQ(g.blocks, 20);
  }
  // A chain: every block but the first waits on the one before it.
  LoweredRank chain = lr;
  chain.deps.clear();
  chain.dep_tbs.clear();
  for (int t = 0; t < 40; ++t) {
    exec::DevSlot& s = chain.slots[static_cast<size_t>(t)];
    s.dep_begin = static_cast<int32_t>(chain.deps.size());
    s.ndeps = t > 0 ? 1 : 0;
    if (t > 0) chain.deps.push_back(t - 1), chain.dep_tbs.push_back(t - 1);
  }
  const RoleGroups gc = group_thread_blocks(chain, 4, 10);
  ASSERT_EQ(check(chain, gc, 4), "");
  EXPECT_EQ(gc.roles, 4);
}

TEST(BlockRoles, WhatTheGpuRolesTestsRunGroups) {
  // tests/gpu's *_roles* cases: WEFT_INSTANCES=32 with the selection table's choices on 2 and
  // 3 ranks; and the table's own instances (WEFT_INSTANCES=0). Every plan they run lowers and
  // groups within the rule, and some do group. Prints thread blocks and CUDA blocks per rank.
  int grouped = 0;
  for (const char* inst : {"0", "32"}) {
    setenv("WEFT_INSTANCES", inst, 1);
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::AllToAll, Collective::Broadcast, Collective::Reduce})
      for (int R : {2, 3})
        for (uint64_t bytes : {uint64_t(4) << 20, uint64_t(256) << 20}) {
          const Choice ch = select_algorithm(c, bytes, R, 32);
          if (ch.algorithm == "oneshot") continue;
          const LoweredPlan lp =
              lower_plan(make_plan(c, R, ch.algorithm, ch.protocol, ch.instances, false, 0), R, 32);
          for (int max_roles : {2, 3, 4})
            for (int r = 0; r < R; ++r) {
              const LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
              const RoleGroups g = group_thread_blocks(lr, max_roles);
              ASSERT_EQ(check(lr, g, max_roles), "") << to_string(c) << " " << ch.algorithm << " R=" << R;
              if (g.roles > 1) ++grouped;
              if (r == 0)
                std::printf("%s %s/%s x%d, %d ranks, %llu MiB, WEFT_BLOCK_ROLES=%d: %zu thread blocks -> %d CUDA "
                            "blocks\n",
                            std::string(to_string(c)).c_str(), ch.algorithm.c_str(), ch.protocol.c_str(),
                            ch.instances, R, static_cast<unsigned long long>(bytes >> 20), max_roles, lr.tbs.size(),
                            g.blocks);
            }
        }
  }
  unsetenv("WEFT_INSTANCES");
  EXPECT_GT(grouped, 0);
}

}  // namespace
}  // namespace weft
