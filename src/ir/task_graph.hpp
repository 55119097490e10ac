// TaskGraph and Pipeline: the compiler's middle IRs.
//
// TaskGraph: one task per transfer of a verified Algorithm (after buffer placement, see
// compile/layout.hpp), data edges (true and false dependencies on chunk slots) and, per
// task, the topology resources it occupies (its communication-conflict set). Pipeline: the
// scheduler's output, ordered sub-pipelines of task ids.
//
// Everything is stored in flat arrays (compressed rows for predecessors and successors,
// dense resource ids) so that a graph of millions of tasks (HM AllReduce on 1,024 GPUs has
// about 2.1 million) fits in a few hundred megabytes and is walked without pointer chasing.
#pragma once

#include <cstdint>
#include <span>
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

/// A data edge between two tasks. `rank` is the rank of the chunk slot they share, which
/// is where the consumer's per-micro-batch wait lives. A pair of tasks sharing slots on two
/// ranks has two edges; a pair with several kinds on one rank keeps the strongest (True,
/// then Output, then Anti).
struct TaskEdge {
  int32_t from = 0;  ///< task that must finish its invocation (per micro-batch) first
  int32_t to = 0;
  DepKind kind = DepKind::True;
  int32_t rank = 0;
  bool operator==(const TaskEdge&) const = default;
};

/// Which kind of link a task crosses.
enum class LinkClass : uint8_t {
  Local,  ///< src rank == dst rank: a copy or reduction inside one GPU
  Intra,  ///< two GPUs of one node (NVLink through the switch)
  Inter,  ///< two nodes (NICs)
};

struct Task {
  /// The transfer, with its slots already placed (canonical in place, physical out of place).
  Transfer transfer;
  /// Where a Reduce reads its accumulator (normally the destination itself; out of place, a
  /// slot not yet written is read from the input buffer while the result goes to the output).
  Buffer acc_buffer = Buffer::Output;
  int32_t acc_index = 0;
  /// The chunk DAG the task belongs to: a weakly connected component of the data edges
  /// (tasks of different chunks touch disjoint slots). Numbered by the smallest chunk index
  /// the component touches, so ResCCLang's chunk ids come out unchanged.
  int32_t chunk = 0;
  LinkClass link = LinkClass::Local;
  /// MSCCL-style stage: a maximal run of steps crossing the same set of link classes.
  int32_t stage = 0;
  /// Dense ids (TaskGraph::resources) of the links whose sharing makes tasks conflict:
  /// one for a pair of GPUs in a node, two (NIC tx, NIC rx) across nodes, none for local.
  int32_t conflicts[2] = {-1, -1};
  int32_t num_conflicts = 0;
  /// Number of destination chunk slots that a later Copy overwrites before anything else
  /// reads them; equal to the count when the value this task writes dies (rrs fusion).
  int32_t dst_overwritten = 0;
};

struct TaskGraph {
  std::vector<Task> tasks;
  /// All data edges, grouped by `to` in increasing order (edge_offsets[t] .. edge_offsets[t+1]).
  std::vector<TaskEdge> edges;
  std::vector<int32_t> edge_offsets;
  /// Distinct predecessors and successors of each task, compressed rows.
  std::vector<int32_t> pred_offsets, preds;
  std::vector<int32_t> succ_offsets, succs;
  /// Dense resource id -> the topology resource.
  std::vector<ResourceId> resources;
  int32_t num_chunks = 0;  ///< distinct values of Task::chunk
  int32_t num_stages = 0;  ///< distinct values of Task::stage
  /// Per task, the user's Algorithm transfers it implements (several when aggregated, none
  /// for a copy the compiler added), compressed rows.
  std::vector<int32_t> origin_offsets{0};
  std::vector<int32_t> origin_ids;
  /// Per-rank chunk slots of the placed buffers (the Plan's chunk counts).
  int32_t input_chunks = 0, output_chunks = 0, scratch_chunks = 0;

  int32_t size() const { return static_cast<int32_t>(tasks.size()); }
  std::span<const int32_t> preds_of(int32_t t) const {
    return {preds.data() + pred_offsets[t], preds.data() + pred_offsets[t + 1]};
  }
  std::span<const int32_t> succs_of(int32_t t) const {
    return {succs.data() + succ_offsets[t], succs.data() + succ_offsets[t + 1]};
  }
  std::span<const int32_t> origins_of(int32_t t) const {
    return {origin_ids.data() + origin_offsets[t], origin_ids.data() + origin_offsets[t + 1]};
  }
  /// Edges into task t.
  std::span<const TaskEdge> edges_to(int32_t t) const {
    return {edges.data() + edge_offsets[t], edges.data() + edge_offsets[t + 1]};
  }
};

/// The scheduler's output: sub-pipelines in execution order, each a list of task ids in an
/// order that respects the data edges (a task follows every predecessor in the same or an
/// earlier sub-pipeline).
struct Pipeline {
  std::string scheduler;  ///< "hpds", "algo", "stage", "rr", "gc3"
  std::vector<std::vector<int32_t>> subpipelines;
};

}  // namespace weft
