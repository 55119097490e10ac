// Schedulers: every task once, in dependency order; HPDS's and RR's sub-pipelines are free of
// link conflicts; HPDS follows Algorithm 1 on a hand-checked example.
#include <gtest/gtest.h>

#include <set>

#include "builders.hpp"
#include "compile/graph.hpp"
#include "compile/schedule.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

TEST(Schedule, EverySchedulerPlacesEveryTaskAfterItsPredecessors) {
  for (const test::Case& c : test::all_cases()) {
    TaskGraph g = build_task_graph(c.algo, c.topo);
    for (std::string_view s : scheduler_names()) {
      Pipeline p = schedule(g, s);
      EXPECT_EQ(p.scheduler, s);
      EXPECT_NO_THROW(check_pipeline(g, p)) << c.algo.name << " " << s;
    }
  }
}

TEST(Schedule, HpdsAndRrSubPipelinesShareNoLink) {
  for (const test::Case& c : test::all_cases()) {
    TaskGraph g = build_task_graph(c.algo, c.topo);
    for (auto* fn : {&schedule_hpds, &schedule_rr}) {
      Pipeline p = fn(g);
      for (const auto& sp : p.subpipelines) {
        std::set<int32_t> used;
        for (int32_t t : sp)
          for (int32_t i = 0; i < g.tasks[t].num_conflicts; ++i)
            EXPECT_TRUE(used.insert(g.tasks[t].conflicts[i]).second) << c.algo.name << " " << p.scheduler;
      }
    }
  }
}

TEST(Schedule, HpdsReachesTheBusiestLinkBoundOnHmAllReduce) {
  // No schedule can have fewer sub-pipelines than the most tasks one resource carries;
  // Algorithm 1 as printed reaches it (the earliest-start priority, which schedule_hpds uses
  // at this size, trades sub-pipelines, which are no barriers at run time, for order).
  for (auto [n, gpus] : {std::pair{2, 4}, std::pair{4, 4}, std::pair{2, 8}}) {
    TaskGraph g = build_task_graph(test::hm_allreduce(n, gpus), test::a100(n, gpus));
    std::vector<int32_t> load(g.resources.size(), 0);
    int32_t bound = 0;
    for (const Task& t : g.tasks)
      for (int32_t i = 0; i < t.num_conflicts; ++i) bound = std::max(bound, ++load[t.conflicts[i]]);
    EXPECT_EQ(static_cast<int32_t>(schedule_hpds_least_scheduled(g).subpipelines.size()), bound) << n << "x" << gpus;
    EXPECT_GE(static_cast<int32_t>(schedule_hpds(g).subpipelines.size()), bound) << n << "x" << gpus;
  }
}

TEST(Schedule, HpdsServesTheLeastScheduledChunkFirst) {
  // Chunk 0: a (link 0->1) then b (1->2). Chunk 1: c (0->1). Chunk 2: d (1->2).
  Algorithm a = test::resccl("prio", Collective::AllReduce, 3);
  test::transfer(a, 0, 1, 0, 0, false);  // a
  test::transfer(a, 1, 2, 1, 0, false);  // b
  test::transfer(a, 0, 1, 0, 1, false);  // c
  test::transfer(a, 1, 2, 0, 2, false);  // d
  TaskGraph g = build_task_graph(a, test::a100(1, 3));
  Pipeline p = schedule_hpds_least_scheduled(g);
  // Task ids follow step order: a=0, c=1, d=2, b=3.
  // sp0: chunk 0 first (ties go to the lower id): a. Its successor b waits for chunk 0's next
  // turn, after chunks 1 and 2 (scheduled 0 times): c is blocked by a, d takes link 1->2, so b
  // is blocked too. sp1: chunk 1 (0 times) before chunk 0 (once): c, then b.
  ASSERT_EQ(p.subpipelines.size(), 2u);
  EXPECT_EQ(p.subpipelines[0], (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(p.subpipelines[1], (std::vector<int32_t>{1, 3}));
}

TEST(Schedule, HpdsTakesTheEarliestStartFirst) {
  // Chunk 0: a (0->1, step 0) then b (1->2, step 1), b of depth 1. Chunk 1: c (1->2, step 1),
  // depth 0. On link 1->2 the task that can start first (c) goes first, though b's step and
  // chunk id are lower.
  Algorithm a = test::resccl("early", Collective::AllReduce, 3);
  test::transfer(a, 0, 1, 0, 0, false);  // a
  test::transfer(a, 1, 2, 1, 0, false);  // b
  test::transfer(a, 1, 2, 1, 1, false);  // c
  TaskGraph g = build_task_graph(a, test::a100(1, 3));
  Pipeline p = schedule_hpds_earliest_start(g);
  EXPECT_NO_THROW(check_pipeline(g, p));
  std::vector<int32_t> order = pipeline_order(g, p);
  EXPECT_LT(order[2], order[1]);  // task ids follow step order: a=0, b=1, c=2
  // Both sub-pipelines keep their links to one task each.
  EXPECT_EQ(p.subpipelines.size(), 2u);
}

TEST(Schedule, LevelSchedulers) {
  TaskGraph g = build_task_graph(test::hm_allreduce(2, 2), test::a100(2, 2));
  EXPECT_EQ(schedule_algo(g).subpipelines.size(), static_cast<size_t>(test::hm_allreduce(2, 2).num_steps()));
  EXPECT_EQ(schedule_stage(g).subpipelines.size(), 3u);
  // gc3: one sub-pipeline per dependency depth, longest remaining path first inside it.
  Pipeline p = schedule_gc3(g);
  EXPECT_NO_THROW(check_pipeline(g, p));
  EXPECT_GT(p.subpipelines.size(), 1u);
}

TEST(Schedule, UnknownSchedulerIsAnError) {
  TaskGraph g = build_task_graph(test::ring_allreduce(2), test::a100(1, 2));
  try {
    schedule(g, "fifo");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("unknown scheduler 'fifo'"), std::string::npos);
  }
}

}  // namespace
}  // namespace weft
