// Scheduling: TaskGraph -> Pipeline (docs/design.md).
//
// hpds   paper 001 Algorithm 1's sub-pipelines: a task whose predecessors are all scheduled
//        (in this or an earlier sub-pipeline) and whose conflict resources are free in this
//        sub-pipeline joins it; sub-pipelines repeat until every task is placed. The order
//        candidates are offered in is the priority:
//        - up to kEarliestStartLimit tasks, schedule_hpds_earliest_start: by dependency depth
//          (how early pipelined execution can start the task), longest remaining chain first,
//          then the chunk scheduled least often (Algorithm 1's rule), chunk id, task id;
//        - beyond, schedule_hpds_least_scheduled, Algorithm 1 as printed: chunk by chunk
//          (chunk DAGs, TaskGraph::chunk), the one scheduled least often so far first (ties:
//          lower chunk id); a chunk that yields nothing is out until the next sub-pipeline.
//          It is linear in tasks per sub-pipeline, where the first sorts its candidates.
// rr     paper 001 §5.3's round robin: the same construction, but chunks are visited in
//        ascending id order in one circular queue that persists across sub-pipelines.
// algo   algorithm-level execution: one sub-pipeline per step, in step order.
// stage  MSCCL-style stage-level execution: one sub-pipeline per stage (TaskGraph's stages:
//        runs of steps crossing the same link classes), each in step order.
// gc3    paper 004 §5.2: tasks sorted by dependency depth (ascending), then reverse depth
//        (descending); one sub-pipeline per depth.
//
// Every scheduler is linear or n log n in the number of tasks, except hpds and rr, which
// rescan the candidates blocked on a busy link once per sub-pipeline.
#pragma once

#include <string_view>
#include <vector>

#include "ir/task_graph.hpp"

namespace weft {

Pipeline schedule_hpds(const TaskGraph& graph);
Pipeline schedule_hpds_earliest_start(const TaskGraph& graph);
Pipeline schedule_hpds_least_scheduled(const TaskGraph& graph);
/// Largest task graph schedule_hpds gives the earliest-start priority (its sort per
/// sub-pipeline would cost minutes at 1,024 GPUs; HM AllReduce on 128 GPUs has 32,512 tasks).
inline constexpr int32_t kEarliestStartLimit = 100'000;
Pipeline schedule_rr(const TaskGraph& graph);
Pipeline schedule_algo(const TaskGraph& graph);
Pipeline schedule_stage(const TaskGraph& graph);
Pipeline schedule_gc3(const TaskGraph& graph);

/// The scheduler names schedule() accepts, in the order `weft compile --help` lists them.
const std::vector<std::string_view>& scheduler_names();
/// Runs the scheduler called `name`; throws InvalidArgument naming the known ones otherwise.
Pipeline schedule(const TaskGraph& graph, std::string_view name);

/// The global task order of a pipeline (sub-pipelines concatenated): order[task] = position.
std::vector<int32_t> pipeline_order(const TaskGraph& graph, const Pipeline& pipeline);
/// Per task, the index of its sub-pipeline.
std::vector<int32_t> pipeline_subpipeline_of(const TaskGraph& graph, const Pipeline& pipeline);
/// Throws Internal unless every task appears exactly once and every data edge points forward
/// in the pipeline's order.
void check_pipeline(const TaskGraph& graph, const Pipeline& pipeline);

}  // namespace weft
