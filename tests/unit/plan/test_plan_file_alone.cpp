// The plan-file path without the front-ends: this test links util, ir, compile and
// plan/plan_file only (tests/unit/plan/CMakeLists.txt), builds a plan by hand, writes it,
// reads it back and checks it as the runtime does for WEFT_ALGO=plan.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "ir/plan_json.hpp"
#include "plan/plan_file.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

// Two ranks exchange chunk 0 of their input into the peer's output: one send and one
// receive per rank, each in its own thread block.
Plan exchange_plan() {
  Plan p;
  p.algorithm = "exchange";
  p.collective = Collective::Custom;
  p.num_ranks = 2;
  p.input_chunks = p.output_chunks = 1;
  p.execution = ExecutionModel::Task;
  p.scheduler = "hand";
  p.allocator = "state";
  p.topology = "two";
  p.num_subpipelines = 1;
  for (int32_t r = 0; r < 2; ++r) {
    RankPlan rp;
    rp.rank = r;
    ThreadBlock send, recv;
    Slot s;
    s.primitive = Primitive::Send;
    s.send_peer = 1 - r;
    s.src = {Buffer::Input, 0};
    send.slots.push_back(s);
    Slot v;
    v.primitive = Primitive::Recv;
    v.recv_peer = 1 - r;
    v.dst = {Buffer::Output, 0};
    recv.slots.push_back(v);
    rp.tbs = {send, recv};
    p.ranks.push_back(rp);
  }
  return p;
}

TEST(PlanFileAlone, LoadsAndChecksWithoutTheFrontEnds) {
  const std::string path = testing::TempDir() + "weft_plan_alone.json";
  const Plan p = exchange_plan();
  save_plan(p, path);
  ASSERT_TRUE(is_plan_file_path(path));
  const Plan back = load_plan(path);
  EXPECT_TRUE(back == p);
  EXPECT_NO_THROW(check_plan_file(back, path, 2, "the communicator", 0));
  try {
    check_plan_file(back, path, 4, "the communicator", 4);
    ADD_FAILURE() << "a 2-rank plan accepted for 4 ranks";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": the plan is for 2 ranks, the communicator has 4");
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace weft
