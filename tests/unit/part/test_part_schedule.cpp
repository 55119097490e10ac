// Partitioned collective schedules: built per rank, checked together (messages paired,
// chunks agree, no deadlock) and run on contribution sets against each collective's
// postcondition; broken schedules are rejected with a message.
#include <gtest/gtest.h>

#include <string>

#include "part/schedule.hpp"
#include "util/error.hpp"

using namespace weft;
using namespace weft::part;

namespace {

std::vector<Schedule> all_ranks(int P, const std::function<Schedule(int)>& make) {
  std::vector<Schedule> v;
  for (int r = 0; r < P; ++r) v.push_back(make(r));
  return v;
}

void expect_verify_error(const std::vector<Schedule>& s, const std::string& part) {
  try {
    check_schedules(s);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Verify);
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(PartSchedule, RingAllReduceShape) {
  // Paper 002 Algorithm 1 for P = 4, rank 1: R = (rank - i) mod P, reduce for the first P-1 receives.
  Schedule s = ring_allreduce(1, 4);
  ASSERT_EQ(s.steps.size(), 7u);
  EXPECT_EQ(s.chunks, 4u);
  EXPECT_TRUE(s.steps[0].in.empty());
  EXPECT_EQ(s.steps[0].send_chunk, 1);
  EXPECT_EQ(s.steps[1].recv_chunk, 0);
  EXPECT_EQ(s.steps[1].op, StepOp::Reduce);
  EXPECT_EQ(s.steps[3].op, StepOp::Reduce);
  EXPECT_EQ(s.steps[4].op, StepOp::Copy);
  EXPECT_TRUE(s.steps[6].out.empty());
  EXPECT_EQ(s.slots_from(0), 6u);
  EXPECT_EQ(s.slots_to(2), 6u);
  EXPECT_EQ(s.in_peers(), std::vector<int>{0});
  EXPECT_EQ(s.out_peers(), std::vector<int>{2});
}

TEST(PartSchedule, RingAllReduceComputesAllReduce) {
  for (int P = 1; P <= 9; ++P) {
    auto all = all_ranks(P, [&](int r) { return ring_allreduce(r, P); });
    Contributions init(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) init[static_cast<size_t>(r)].assign(static_cast<size_t>(P), std::set<int>{r});
    Contributions out = simulate(all, init);
    std::set<int> every;
    for (int r = 0; r < P; ++r) every.insert(r);
    for (int r = 0; r < P; ++r)
      for (int c = 0; c < P; ++c) EXPECT_EQ(out[static_cast<size_t>(r)][static_cast<size_t>(c)], every) << P << " " << r << " " << c;
  }
}

TEST(PartSchedule, ChainBroadcastComputesBroadcast) {
  for (int P = 1; P <= 6; ++P)
    for (int root = 0; root < P; ++root) {
      auto all = all_ranks(P, [&](int r) { return chain_broadcast(r, P, root); });
      Contributions init(static_cast<size_t>(P), std::vector<std::set<int>>(1));
      init[static_cast<size_t>(root)][0] = {root};
      Contributions out = simulate(all, init);
      for (int r = 0; r < P; ++r) EXPECT_EQ(out[static_cast<size_t>(r)][0], std::set<int>{root});
    }
}

TEST(PartSchedule, RejectsBrokenSchedules) {
  auto ring = [](int P) { return all_ranks(P, [&](int r) { return ring_allreduce(r, P); }); };
  auto s = ring(3);
  s[1].steps.back().in.clear();  // a message nobody receives
  expect_verify_error(s, "never received");
  s = ring(3);
  s[2].steps[2].recv_chunk = (s[2].steps[2].recv_chunk + 1) % 3;
  expect_verify_error(s, "lands in chunk");
  s = ring(3);
  s[0].steps[1].in[0].slot = 5;
  expect_verify_error(s, "slot 5");
  s = ring(3);
  s[0].steps[0].send_chunk = 3;
  expect_verify_error(s, "out of range");
  // Two ranks that each wait for the other first.
  std::vector<Schedule> dl(2);
  for (int r = 0; r < 2; ++r) {
    dl[static_cast<size_t>(r)].rank = r;
    dl[static_cast<size_t>(r)].nranks = 2;
    Step a;
    a.in.push_back({1 - r, 0});
    a.recv_chunk = 0;
    a.op = StepOp::Copy;
    Step b;
    b.out.push_back({1 - r, 0});
    b.send_chunk = 0;
    dl[static_cast<size_t>(r)].steps = {a, b};
  }
  expect_verify_error(dl, "deadlock");
}

TEST(PartSchedule, DoubleReduceIsCaught) {
  // A ring whose all-gather reduces instead of copying counts contributions twice.
  auto s = all_ranks(3, [&](int r) { return ring_allreduce(r, 3); });
  for (auto& sch : s) sch.steps[3].op = StepOp::Reduce;
  Contributions init(3);
  for (int r = 0; r < 3; ++r) init[static_cast<size_t>(r)].assign(3, std::set<int>{r});
  try {
    simulate(s, init);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
}

TEST(PartSchedule, ChunkBounds) {
  EXPECT_EQ(chunk_begin(10, 3, 0), 0u);
  EXPECT_EQ(chunk_begin(10, 3, 1), 3u);
  EXPECT_EQ(chunk_begin(10, 3, 3), 10u);
}
