// The task graph: data edges of each kind, chunk DAGs, conflict resources, stages.
#include <gtest/gtest.h>

#include "builders.hpp"
#include "compile/graph.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

Algorithm three_hops() {
  Algorithm a = test::resccl("hops", Collective::AllReduce, 3);
  test::transfer(a, 0, 1, 0, 0, false);  // t0 writes rank 1 slot 0
  test::transfer(a, 1, 2, 1, 0, false);  // t1 reads rank 1 slot 0 (true on t0)
  test::transfer(a, 2, 1, 2, 0, false);  // t2 overwrites rank 1 slot 0 (anti on t1, output on t0)
  test::transfer(a, 0, 1, 3, 1, true);   // t3 reduces into rank 1 slot 1 (independent chunk)
  test::transfer(a, 2, 1, 4, 1, true);   // t4 reduces again: reads t3's result (true)
  return a;
}

TEST(TaskGraph, EdgesOfEachKindOnTheSharedSlotsRank) {
  TaskGraph g = build_task_graph(three_hops(), test::a100(1, 3));
  ASSERT_EQ(g.size(), 5);
  auto edges = [&](int t) { return std::vector<TaskEdge>(g.edges_to(t).begin(), g.edges_to(t).end()); };
  EXPECT_TRUE(edges(0).empty());
  EXPECT_EQ(edges(1), (std::vector<TaskEdge>{{0, 1, DepKind::True, 1}}));
  // t2 reads rank 2 slot 0 (written by t1) and overwrites rank 1 slot 0.
  EXPECT_EQ(edges(2), (std::vector<TaskEdge>{{0, 2, DepKind::Output, 1}, {1, 2, DepKind::Anti, 1}, {1, 2, DepKind::True, 2}}));
  EXPECT_TRUE(edges(3).empty());
  EXPECT_EQ(edges(4), (std::vector<TaskEdge>{{3, 4, DepKind::True, 1}}));
  EXPECT_EQ(std::vector<int32_t>(g.preds_of(2).begin(), g.preds_of(2).end()), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(std::vector<int32_t>(g.succs_of(0).begin(), g.succs_of(0).end()), (std::vector<int32_t>{1, 2}));
  // Two chunk DAGs, numbered by the chunk index they touch.
  EXPECT_EQ(g.num_chunks, 2);
  EXPECT_EQ(g.tasks[2].chunk, 0);
  EXPECT_EQ(g.tasks[4].chunk, 1);
  // t0's value is overwritten by t2's copy: rrs may drop it.
  EXPECT_EQ(g.tasks[0].dst_overwritten, 1);
  EXPECT_EQ(g.tasks[3].dst_overwritten, 0);
}

TEST(TaskGraph, ResCCLangChunksAreChunkDags) {
  TaskGraph g = build_task_graph(test::ring_allgather(4), test::a100(1, 4));
  EXPECT_EQ(g.num_chunks, 4);
  for (const Task& t : g.tasks) EXPECT_EQ(t.chunk, t.transfer.src_index);
}

TEST(TaskGraph, ConflictResourcesComeFromTheTopology) {
  Algorithm a = test::resccl("links", Collective::AllReduce, 8);
  test::transfer(a, 0, 1, 0, 0, false);  // intra: the pair connection
  test::transfer(a, 0, 4, 0, 1, false);  // inter: NIC 0 tx, NIC 2 rx
  test::transfer(a, 1, 6, 0, 2, false);  // GPU 1 shares NIC 0 with GPU 0
  TaskGraph g = build_task_graph(a, test::a100(2, 4));
  EXPECT_EQ(g.tasks[0].link, LinkClass::Intra);
  EXPECT_EQ(g.tasks[0].num_conflicts, 1);
  EXPECT_EQ(g.resources[g.tasks[0].conflicts[0]].kind, ResourceKind::NvlinkPair);
  EXPECT_EQ(g.tasks[1].link, LinkClass::Inter);
  ASSERT_EQ(g.tasks[1].num_conflicts, 2);
  EXPECT_EQ(g.tasks[1].conflicts[0], g.tasks[2].conflicts[0]);  // same NIC tx
  EXPECT_NE(g.tasks[1].conflicts[1], g.tasks[2].conflicts[1]);
}

TEST(TaskGraph, StagesAreRunsOfStepsOverTheSameLinks) {
  TaskGraph g = build_task_graph(test::hm_allreduce(2, 2), test::a100(2, 2));
  EXPECT_EQ(g.num_stages, 3);  // intra ReduceScatter, inter rings, intra AllGather
  for (const Task& t : g.tasks) EXPECT_EQ(t.stage == 1, t.link == LinkClass::Inter);
}

TEST(TaskGraph, TopologyThatDoesNotFitIsAnError) {
  try {
    build_task_graph(test::ring_allreduce(8), test::a100(1, 4));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("has 4 GPUs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("needs 8 ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
