// TaskGraph and Pipeline: the compiler's middle IRs.
//
// TaskGraph: one task per transfer of a verified Algorithm, data edges (true and false
// dependencies on chunk slots) and, per task, the topology resources it occupies (its
// communication-conflict set). Pipeline: the scheduler's output, ordered sub-pipelines of
// task ids; task-level execution runs each task over every micro-batch in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"

namespace weft {

enum class DepKind : uint8_t {
  True,   ///< read after write: the consumer reads what the producer wrote
  Anti,   ///< write after read: the consumer overwrites what the producer read
  Output, ///< write after write
};

struct TaskEdge {
  int32_t from;  ///< task that must finish its invocation (per micro-batch) first
  int32_t to;
  DepKind kind;
};

struct Task {
  int32_t id = 0;         ///< index in TaskGraph::tasks == index of the transfer in the Algorithm
  Transfer transfer;
  /// The chunk this task moves, for HPDS's per-chunk priority: the canonical slot index of
  /// the data it carries at the start of its chain (see compile/graph.hpp).
  int32_t chunk = 0;
  std::vector<ResourceId> conflicts;  ///< resources shared with conflicting tasks (empty for local tasks)
  std::vector<int32_t> preds;         ///< tasks this one depends on (any DepKind)
  std::vector<int32_t> succs;
};

struct TaskGraph {
  std::vector<Task> tasks;
  std::vector<TaskEdge> edges;
  int32_t num_chunks = 0;  ///< distinct values of Task::chunk
};

/// The scheduler's output: sub-pipelines in execution order, each a list of task ids.
struct Pipeline {
  std::string scheduler;  ///< "hpds", "algo", "stage", "rr", "gc3"
  std::vector<std::vector<int32_t>> subpipelines;
};

}  // namespace weft
