// The plan-structure core (ir/plan_core.hpp): one primitive table, one validator, one pairing
// and one deadlock verdict, shared by the deadlock check, replay, the runtime's lowering and
// emulator, and the simulator. Each rule is asked of every engine here, so an engine that
// answers on its own again fails.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "exec/exec_plan.hpp"
#include "ir/plan_core.hpp"
#include "ir/plan_json.hpp"
#include "plan_runs.hpp"
#include "exec/plan_lowering.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// rank 0 tb 0: copy, then send to rank 1 (waiting on `dep`); rank 1 tb 0: receive.
Plan two_rank_plan(SlotDep dep) {
  Plan p;
  p.algorithm = "core";
  p.num_ranks = 2;
  p.input_chunks = p.output_chunks = 2;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) p.ranks[r].rank = r;
  Slot copy;
  copy.primitive = Primitive::Copy;
  copy.src = {Buffer::Input, 0};
  copy.dst = {Buffer::Output, 0};
  Slot send;
  send.primitive = Primitive::Send;
  send.send_peer = 1;
  send.src = {Buffer::Output, 0};
  send.deps.push_back(dep);
  Slot recv;
  recv.primitive = Primitive::Recv;
  recv.recv_peer = 0;
  recv.dst = {Buffer::Output, 1};
  p.ranks[0].tbs.push_back({{copy, send}});
  p.ranks[1].tbs.push_back({{recv}});
  return p;
}

/// Every engine's answer on `p`: "" when it accepts, else its error.
std::vector<std::pair<std::string, std::string>> engines(const Plan& p) {
  auto run = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  return {
      {"validate_plan", run([&] { validate_plan(p); })},
      {"plan_from_json", run([&] { plan_from_json(plan_to_json(p), "core.json"); })},
      {"check_deadlock", run([&] { check_deadlock_or_throw(p, 1); })},
      {"replay_plan", run([&] { replay_plan(p); })},
      {"lower_plan", run([&] { lower_plan(p, p.num_ranks, 8); })},
      {"emulator", run([&] {
         if (test::emulate_plan(p, 1, 64).deadlock) fail(ErrorCode::Verify, "emulator: deadlock");
       })},
      {"simulator", run([&] { test::simulate_plan(p, 1, 4); })},
  };
}

TEST(PlanCore, ADependencyOnAnEarlierSlotOfItsOwnBlockIsAcceptedByEveryEngine) {
  // MSCCL allows it; program order implies it.
  for (const auto& [engine, error] : engines(two_rank_plan({0, 0}))) EXPECT_EQ(error, "") << engine;
}

TEST(PlanCore, ADependencyOnItselfOrALaterSlotOfItsOwnBlockIsRefusedByEveryEngine) {
  // Itself: the send waits on the send.
  for (const auto& [engine, error] : engines(two_rank_plan({0, 1})))
    EXPECT_NE(error.find("rank 0, thread block 0, slot 1 (send): depends on slot 1 of its own thread block, which "
                         "does not run before it"),
              std::string::npos)
        << engine << ": " << error;
  // A later slot: the copy waits on the send after it.
  Plan later = two_rank_plan({0, 0});
  later.ranks[0].tbs[0].slots[1].deps.clear();
  later.ranks[0].tbs[0].slots[0].deps.push_back({0, 1});
  for (const auto& [engine, error] : engines(later))
    EXPECT_NE(error.find("slot 0 (copy): depends on slot 1 of its own thread block"), std::string::npos)
        << engine << ": " << error;
}

TEST(PlanCore, ConnectionFaultsAreTheSameSentenceEverywhere) {
  Plan p = two_rank_plan({0, 0});
  p.ranks[1].tbs[0].slots[0].count = 2;  // received as 2 chunks, sent as 1
  p.ranks[1].tbs[0].slots[0].dst.index = 0;
  const std::string fault = "connection 0->1 channel 0: transfer 0 is sent as 1 chunks (instance 0 of 1) by rank 0 tb 0 "
                            "slot 1 (send to 1) but received as 2 chunks (instance 0 of 1) by rank 1 tb 0 slot 0 (recv from 0)";
  const DeadlockVerdict v = check_deadlock(p, 1);
  EXPECT_EQ(v.message, fault);
  EXPECT_TRUE(v.unpaired);
  for (const auto& [engine, error] : engines(p))
    if (engine != "validate_plan" && engine != "plan_from_json") {
      EXPECT_NE(error.find(fault), std::string::npos) << engine << ": " << error;
    }
  const PlanIndex ix(p);
  EXPECT_EQ(pair_connections(p, ix).fault, fault);
}

TEST(PlanCore, IndexAndPairing) {
  Plan p = two_rank_plan({0, 0});
  const PlanIndex ix(p);
  ASSERT_EQ(ix.size(), 3);
  EXPECT_EQ(ix.id(1, 0, 0), 2);
  EXPECT_EQ(ix.rank(2), 1);
  EXPECT_EQ(ix.index(1), 1);
  EXPECT_TRUE(ix.first_in_tb(0));
  EXPECT_TRUE(ix.last_in_tb(1));
  PlanPairing pr = pair_connections(p, ix);
  EXPECT_EQ(pr.fault, "");
  ASSERT_EQ(pr.conns.size(), 1u);
  EXPECT_EQ(pr.send_of, (std::vector<int32_t>{-1, -1, 1}));
  EXPECT_EQ(describe(slot_ref(ix, 1)), "rank 0 tb 0 slot 1 (send to 1)");
}

TEST(PlanCore, ThePrimitiveTableIsTheExecutorsToo) {
  for (int i = 0; i <= static_cast<int>(Primitive::Nop); ++i) {
    const PrimitiveInfo& in = primitive_info(static_cast<Primitive>(i));
    SCOPED_TRACE(std::string(to_string(static_cast<Primitive>(i))));
    EXPECT_EQ(in.sends, exec::prim_sends(i));
    EXPECT_EQ(in.receives, exec::prim_receives(i));
    EXPECT_EQ(in.reads_src, exec::prim_reads_src(i));
    EXPECT_EQ(in.writes_dst, exec::prim_writes_dst(i));
  }
  EXPECT_TRUE(primitive_info(Primitive::RecvReduceSend).reduces);
  EXPECT_FALSE(primitive_info(Primitive::RecvCopySend).reduces);
  EXPECT_TRUE(primitive_info(Primitive::Reduce).reads_dst);
}

TEST(PlanCore, DeadlockIsAVerdictInEveryEngine) {
  // Both ranks receive before they send, on one block each.
  Plan p = two_rank_plan({0, 0});
  for (int r = 0; r < 2; ++r) {
    Slot recv, send;
    recv.primitive = Primitive::Recv;
    recv.recv_peer = 1 - r;
    send.primitive = Primitive::Send;
    send.send_peer = 1 - r;
    p.ranks[r].tbs[0].slots = {recv, send};
  }
  const DeadlockVerdict check = check_deadlock(p, 1);
  EXPECT_FALSE(check.ok);
  EXPECT_FALSE(check.unpaired);
  EXPECT_THROW(check_deadlock_or_throw(p, 1), DeadlockError);
  ASSERT_FALSE(check.cycle.empty());
  EXPECT_EQ(check.cycle[0].slot, 0);
  EXPECT_TRUE(test::emulate_plan(p, 1, 64).deadlock);
  try {
    sim::Simulator(p, [] {
      Topology t = topology_preset("h200-1x8");
      t.gpus_per_node = 2;
      return t;
    }()).run([] {
      sim::SimOptions o;
      o.fifo_depth = 1;
      o.bytes = 4096;
      return o;
    }());
    ADD_FAILURE() << "the simulator finished a plan that deadlocks";
  } catch (const DeadlockError& e) {
    EXPECT_FALSE(e.verdict.ok);
    ASSERT_EQ(e.verdict.cycle.size(), 2u);
    for (const PlanSlotRef& s : e.verdict.cycle) {
      EXPECT_EQ(s.slot, 0);
      EXPECT_EQ(s.primitive, Primitive::Recv);
      EXPECT_EQ(s.peer, 1 - s.rank);
    }
  }
}

}  // namespace
}  // namespace weft
