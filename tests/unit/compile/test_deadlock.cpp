// The deadlock check: compiled plans pass; planted cycles and unpaired connections are named.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

Slot prim(Primitive p, int send_peer, int recv_peer, int index) {
  Slot s;
  s.primitive = p;
  s.send_peer = send_peer;
  s.recv_peer = recv_peer;
  s.src = s.dst = {Buffer::Output, index};
  return s;
}

Plan two_ranks() {
  Plan p;
  p.algorithm = "planted";
  p.collective = Collective::AllReduce;
  p.num_ranks = 2;
  p.input_chunks = p.output_chunks = 2;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[r].rank = r;
  return p;
}

TEST(Deadlock, CompiledPlansAreFree) {
  for (const test::Case& c : test::all_cases())
    for (const char* sched : {"hpds", "algo", "stage", "rr", "gc3"}) {
      CompileOptions o;
      o.scheduler = sched;
      Plan plan = compile(c.algo, c.topo, o).plan;
      for (int depth : {0, 1, 4}) {
        DeadlockReport r = check_deadlock(plan, depth);
        EXPECT_TRUE(r.ok) << c.algo.name << " " << sched << " depth " << depth << ": " << r.message;
      }
    }
}

TEST(Deadlock, BothRanksReceiveBeforeSending) {
  // Each rank's only thread block first waits for the other's send: a cycle of two.
  Plan p = two_ranks();
  p.ranks[0].tbs = {{{prim(Primitive::Recv, -1, 1, 0), prim(Primitive::Send, 1, -1, 1)}}};
  p.ranks[1].tbs = {{{prim(Primitive::Recv, -1, 0, 1), prim(Primitive::Send, 0, -1, 0)}}};
  DeadlockReport r = check_deadlock(p);
  ASSERT_FALSE(r.ok);
  ASSERT_EQ(r.cycle.size(), 4u);
  for (const CycleEntry& e : r.cycle) EXPECT_EQ(e.tb, 0);
  EXPECT_NE(r.message.find("rank 0 tb 0 slot 0 (recv from 1)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("rank 1 tb 0 slot 1 (send to 0)"), std::string::npos) << r.message;
  EXPECT_THROW(check_deadlock_or_throw(p), Error);
}

TEST(Deadlock, ForwardingChainThatClosesOnItself) {
  // Each rank's rcs receives from the other and forwards to it: the two ends of both messages
  // merge into one node, but within micro-batch 0 each rcs waits for the other's send, which
  // comes after its own receive. Found by the random-plan test (test_semantics_agree.cpp):
  // before, the check passed this plan while the emulator and the simulator deadlocked.
  Plan p = two_ranks();
  p.ranks[0].tbs = {{{prim(Primitive::RecvCopySend, 1, 1, 0)}}};
  p.ranks[1].tbs = {{{prim(Primitive::RecvCopySend, 0, 0, 0)}}};
  for (ExecutionModel m : {ExecutionModel::Task, ExecutionModel::Algorithm})
    for (int depth : {0, 1, 4}) {
      p.execution = m;
      DeadlockReport r = check_deadlock(p, depth);
      EXPECT_FALSE(r.ok) << to_string(m) << " depth " << depth;
    }
  p.execution = ExecutionModel::Task;
  DeadlockReport r = check_deadlock(p);
  EXPECT_NE(r.message.find("within one micro-batch"), std::string::npos) << r.message;
  ASSERT_EQ(r.cycle.size(), 2u);
  // A chain with a head runs: rank 0 sends, rank 1 forwards back, rank 0 receives on
  // another thread block (on the same one, task-level, the send would have to finish all
  // its micro-batches before the receive starts: a cycle through program order).
  p.ranks[0].tbs = {{{prim(Primitive::Send, 1, -1, 0)}}, {{prim(Primitive::Recv, -1, 1, 1)}}};
  p.ranks[1].tbs = {{{prim(Primitive::RecvCopySend, 0, 0, 0)}}};
  EXPECT_TRUE(check_deadlock(p).ok) << check_deadlock(p).message;
}

TEST(Deadlock, DependencyAlongAChainRunsAndAgainstItDoesNot) {
  // Rank 0 sends to rank 1, whose rcs forwards back to rank 0's second thread block. The
  // receiving block waits, per micro-batch, for the sending block: along the data's flow, so
  // the chain runs micro-batch by micro-batch (before, the check called this a cycle).
  Plan p = two_ranks();
  p.execution = ExecutionModel::Task;
  Slot recv = prim(Primitive::Recv, -1, 1, 1);
  recv.deps.push_back({0, 0});
  p.ranks[0].tbs = {{{prim(Primitive::Send, 1, -1, 0)}}, {{recv}}};
  p.ranks[1].tbs = {{{prim(Primitive::RecvCopySend, 0, 0, 0)}}};
  EXPECT_TRUE(check_deadlock(p).ok) << check_deadlock(p).message;
  // The other way round, the sender waits for the receive its own send feeds: a cycle.
  Slot send = prim(Primitive::Send, 1, -1, 0);
  send.deps.push_back({1, 0});
  p.ranks[0].tbs = {{{send}}, {{prim(Primitive::Recv, -1, 1, 1)}}};
  DeadlockReport r = check_deadlock(p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("within one micro-batch"), std::string::npos) << r.message;
}

TEST(Deadlock, MutualWaitsBetweenNodesThatInterleavePerMicroBatch) {
  // Two connections 0 -> 1, each a merged node of its own. Rank 0's second sender waits for
  // its first; rank 1's receiver of the first waits for its receiver of the second. As whole
  // slots that is a cycle between the two nodes, but per micro-batch it is not: send A(k),
  // send B(k), receive B(k), receive A(k). The check fires such groups together (before, it
  // refused this plan, which the emulator and the simulator run).
  Plan p = two_ranks();
  p.execution = ExecutionModel::Task;
  Slot send_a = prim(Primitive::Send, 1, -1, 0), send_b = prim(Primitive::Send, 1, -1, 1);
  send_b.channel = 1;
  send_b.deps.push_back({0, 0});
  Slot recv_a = prim(Primitive::Recv, -1, 0, 0), recv_b = prim(Primitive::Recv, -1, 0, 1);
  recv_b.channel = 1;
  recv_a.deps.push_back({0, 0});
  p.ranks[0].tbs = {{{send_a}}, {{send_b}}};
  p.ranks[1].tbs = {{{recv_b}}, {{recv_a}}};
  EXPECT_TRUE(check_deadlock(p).ok) << check_deadlock(p).message;
  // If rank 0's first sender also waits for its second, the two senders wait for each other
  // in every micro-batch: a deadlock.
  p.ranks[0].tbs[0].slots[0].deps.push_back({1, 0});
  EXPECT_FALSE(check_deadlock(p).ok);
}

TEST(Deadlock, BufferedConnectionsUnderAlgorithmLevelExecution) {
  // Each rank sends `sends` chunks to the other, then receives as many: MSCCL's rings and
  // all-pairs files do this, relying on the connection's FIFO. Per micro-batch it needs
  // FIFOs of `sends` messages; task-level execution deadlocks once micro-batches outnumber
  // the FIFO, whatever its depth.
  for (int sends : {1, 2, 3}) {
    Plan p = two_ranks();
    p.input_chunks = p.output_chunks = 2 * sends;
    for (int r = 0; r < 2; ++r) {
      std::vector<Slot> slots;
      for (int i = 0; i < sends; ++i) slots.push_back(prim(Primitive::Send, 1 - r, -1, r * sends + i));
      for (int i = 0; i < sends; ++i) slots.push_back(prim(Primitive::Recv, -1, 1 - r, (1 - r) * sends + i));
      p.ranks[r].tbs = {ThreadBlock{slots}};
    }
    p.execution = ExecutionModel::Algorithm;
    for (int depth : {0, 1, 2, 3, 4}) {
      SCOPED_TRACE("sends " + std::to_string(sends) + ", depth " + std::to_string(depth));
      DeadlockReport r = check_deadlock(p, depth);
      EXPECT_EQ(r.ok, depth >= sends) << r.message;
      if (!r.ok && depth > 0) {
        EXPECT_NE(r.message.find("FIFOs of " + std::to_string(depth) + " message"), std::string::npos) << r.message;
        EXPECT_FALSE(r.cycle.empty());
      }
    }
    p.execution = ExecutionModel::Task;
    EXPECT_FALSE(check_deadlock(p, 4).ok);
    EXPECT_FALSE(check_deadlock(p, 64).ok);
  }
  // Receiving before sending deadlocks at any depth, and the cycle names both receives.
  Plan p = two_ranks();
  p.execution = ExecutionModel::Algorithm;
  p.ranks[0].tbs = {{{prim(Primitive::Recv, -1, 1, 0), prim(Primitive::Send, 1, -1, 1)}}};
  p.ranks[1].tbs = {{{prim(Primitive::Recv, -1, 0, 1), prim(Primitive::Send, 0, -1, 0)}}};
  DeadlockReport r = check_deadlock(p, 4);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.message.find("rank 0 tb 0 slot 0 (recv from 1)"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("rank 1 tb 0 slot 0 (recv from 0)"), std::string::npos) << r.message;
  EXPECT_THROW(check_deadlock(p, -1), Error);
}

TEST(Deadlock, DependencyCycleInACompiledPlan) {
  CompileResult c = compile(test::hm_allreduce(2, 2), test::a100(2, 2));
  ASSERT_TRUE(check_deadlock(c.plan).ok);
  // Find a slot B of rank 0 that waits on a slot A of another thread block, and make A wait
  // on B as well.
  RankPlan& r0 = c.plan.ranks[0];
  int a_tb = -1, a_slot = -1, b_tb = -1, b_slot = -1;
  for (size_t t = 0; t < r0.tbs.size() && b_tb < 0; ++t)
    for (size_t i = 0; i < r0.tbs[t].slots.size() && b_tb < 0; ++i)
      if (!r0.tbs[t].slots[i].deps.empty()) {
        b_tb = static_cast<int>(t), b_slot = static_cast<int>(i);
        a_tb = r0.tbs[t].slots[i].deps[0].tb, a_slot = r0.tbs[t].slots[i].deps[0].slot;
      }
  ASSERT_GE(b_tb, 0);
  r0.tbs[a_tb].slots[a_slot].deps.push_back({b_tb, b_slot});
  DeadlockReport r = check_deadlock(c.plan);
  ASSERT_FALSE(r.ok);
  EXPECT_FALSE(r.cycle.empty());
  bool names_a = false, names_b = false;
  for (const CycleEntry& e : r.cycle) {
    names_a = names_a || (e.rank == 0 && e.tb == a_tb && e.slot == a_slot);
    names_b = names_b || (e.rank == 0 && e.tb == b_tb && e.slot == b_slot);
  }
  EXPECT_TRUE(names_a && names_b) << r.message;
}

TEST(Deadlock, UnpairedConnections) {
  Plan p = two_ranks();
  p.ranks[0].tbs = {{{prim(Primitive::Send, 1, -1, 0), prim(Primitive::Send, 1, -1, 1)}}};
  p.ranks[1].tbs = {{{prim(Primitive::Recv, -1, 0, 0)}}};
  DeadlockReport r = check_deadlock(p);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "connection 0->1 channel 0 has 2 sends but 1 receives");

  p.ranks[0].tbs = {{{prim(Primitive::Send, 1, -1, 0)}}, {{prim(Primitive::Send, 1, -1, 1)}}};
  p.ranks[1].tbs = {{{prim(Primitive::Recv, -1, 0, 0), prim(Primitive::Recv, -1, 0, 1)}}};
  r = check_deadlock(p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("driven by thread blocks 0 and 1 of rank 0"), std::string::npos) << r.message;
}

TEST(Deadlock, StructuralFaultsAreErrors) {
  Plan p = two_ranks();
  p.ranks[0].tbs = {{{prim(Primitive::Send, 7, -1, 0)}}};
  try {
    check_deadlock(p);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find("rank 0, thread block 0, slot 0 (send): send peer 7"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
