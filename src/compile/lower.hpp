// Lowering: Pipeline -> primitives per rank, before thread blocks are chosen (docs/design.md).
//
// 1. Aggregation happened before scheduling (compile/layout.hpp); each task is one op here.
// 2. Fusion: where a received chunk is forwarded as it is (the forwarding task reads exactly
//    what the receiving one wrote), the receiving end and the forwarding end become one
//    primitive on the middle rank: rcs after a copy, rrcs after a reduce, rrs after a reduce
//    whose result nobody else reads and a later copy overwrites (paper 004 §4.3). Fused ops
//    form a unit: a chain of ops that runs as one pipeline across its ranks.
// 3. Primitives: each op becomes a send on its source and a recv or rrc on its destination
//    (a copy or reduce when local), unless fusion took that end.
// 4. Per-micro-batch dependencies between primitives of one rank, from the data edges.
//
// The order everything runs in is the unit key: the position, in the pipeline's order, of the
// unit's first task. A task joins a unit only when each of its predecessors outside the unit
// comes before the unit's key, so sorting units by key is a topological order
// of the contracted graph: thread blocks that run their primitives in key order cannot
// deadlock (compile/deadlock.hpp checks it anyway), and both ends of a connection see its
// transfers in one order.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "compile/compiler.hpp"
#include "ir/plan.hpp"
#include "ir/task_graph.hpp"
#include "ir/topology.hpp"

namespace weft {

/// A directed connection between two ranks on a logical channel (before instances: instance
/// i of k uses physical channel channel * k + i).
struct Connection {
  int32_t src = 0, dst = 0, channel = 0;
  int32_t instances = 1;
};

/// One primitive on one rank, before it is replicated into instances and placed on thread
/// blocks.
struct LoweredSlot {
  int32_t rank = 0;
  Primitive primitive = Primitive::Nop;
  int32_t send_peer = -1, recv_peer = -1;
  int32_t channel = 0;  ///< logical channel
  BufferRange src, dst;
  int32_t count = 1;
  int32_t instances = 1;
  /// The first of its connection's blocks its instances run on (CompileOptions::op_blocks;
  /// 0 otherwise): instance i uses physical channel channel * m + first_block + i.
  int32_t first_block = 0;
  int32_t sp_first = 0, sp_last = 0;  ///< sub-pipelines in which it runs
  int32_t unit = 0;
  int64_t key = 0;                     ///< program order (the unit's key)
  int32_t send_conn = -1, recv_conn = -1;  ///< LoweredProgram::connections ids, or -1
  int32_t tasks_begin = 0, tasks_end = 0;  ///< LoweredProgram::slot_tasks (Algorithm transfer ids)
  int32_t deps_begin = 0, deps_end = 0;    ///< LoweredProgram::slot_deps (LoweredSlot ids, same rank)
};

struct LoweredProgram {
  std::vector<LoweredSlot> slots;
  std::vector<int32_t> slot_tasks;
  std::vector<int32_t> slot_deps;
  std::vector<Connection> connections;
  ExecutionModel execution = ExecutionModel::Task;
  int32_t num_subpipelines = 0;
  int32_t num_ranks = 0;
  int32_t instances_intra = 1, instances_inter = 1, instances_local = 1;
  int32_t ops = 0;         ///< operations (tasks)
  int32_t fused = 0;       ///< fused primitives (before instances)
  /// Algorithm level: each rank runs its slots in step order, a fused chain may revisit a
  /// rank (lower's step_order); false: in the order of their units' keys.
  bool step_order = false;
};

/// Upper bound on derived instances of a local copy or reduction (CompileOptions::instances
/// may ask for more). Connections are bounded by the blocks that fill their link instead
/// (link_fill_blocks).
inline constexpr int32_t kMaxDerivedInstances = 8;
/// Longest chain of ops fused into one unit.
inline constexpr int32_t kMaxFusedChain = 64;

/// Thread blocks per connection and per rank's local operations (compile/instances.cpp,
/// docs/compile.md "Instances"). `intra`, `inter` and `local` are each class's count, the
/// largest when derived; `per_link` holds the derived count of each connection
/// (src * ranks + dst) and of each rank's local operations (r * ranks + r); a connection it
/// does not list takes its class's count, and given instances (--instances) leave it empty.
struct Instances {
  int32_t intra = 1, inter = 1, local = 1;
  std::unordered_map<int64_t, int32_t> per_link;
  int32_t of(int32_t src, int32_t dst, LinkClass link, int32_t ranks) const;
  bool operator==(const Instances&) const = default;
};

/// The blocks that fill one link: its bandwidth over the per-block rate, rounded up (an
/// NVLink port for connections inside a node, a NIC across nodes).
int32_t link_fill_blocks(const Topology& topo, LinkClass link);

/// Derived thread blocks per connection, from the topology and the schedule
/// (`override_instances` > 0 gives every connection and local operation that many):
/// - in one node, phase by phase (a sub-pipeline, or a step for the algorithm-level
///   schedulers): the phase cannot end before its busiest GPU port has moved its chunks
///   (or its busiest GPU's HBM its local traffic); each connection gets the blocks that move
///   its chunks of the phase in that time, each rank's local operations likewise at the
///   per-block local rate (Topology::tb_local_GBps, 4 x tb_copy_GBps when 0); a connection
///   takes its busiest phase's count, at most link_fill_blocks, a local operation at most
///   kMaxDerivedInstances;
/// - across nodes, over the whole call (paced_instances in instances.cpp): the busiest NIC
///   side or GPU port bounds the call; a connection carrying b chunks gets the blocks that
///   move them in that time, never more than the concurrency rule gives its class (the link's
///   bandwidth shared by the most transfers it carries in one phase, over the per-block rate),
///   local operations the blocks that keep pace with the fastest connection.
Instances derive_instances(const TaskGraph& graph, const Pipeline& pipeline, const Topology& topo,
                           int32_t override_instances);

/// Per task, whether its data come through the network: a task in a node that reads (through
/// true data edges, transitively) what a task across nodes delivered. Such a task cannot run
/// faster than the NIC feeds it (CompileOptions::pace, docs/compile.md "Paced instances").
std::vector<char> nic_fed_tasks(const TaskGraph& graph, const Pipeline& pipeline);

/// Across nodes, per NVLink connection (src * ranks + dst) that carries NIC-fed tasks: the
/// fewest of its `k` instances (a divisor of its count m) on which those tasks still fit in
/// the call's bound T (the busiest NIC side or GPU port, as paced_instances in
/// instances.cpp): its first n blocks carry U / m of its other chunks and F / n of the
/// NIC-fed ones, at most load x T x tb_copy_GBps each. Empty in one node.
std::unordered_map<int64_t, int32_t> nic_fed_instances(const TaskGraph& graph, const Topology& topo,
                                                       const std::vector<char>& fed, const Instances& k, double load = 1);

/// The class of link whose busiest side bounds the call (the call bound of paced_instances,
/// instances.cpp): Inter when a NIC side (its chunks over the NIC's bandwidth), Intra when a
/// GPU's NVLink port, Local when no transfer crosses a link.
LinkClass bounding_link(const TaskGraph& graph, const Topology& topo);

/// Whether a scheduler's plans use the algorithm-level execution model (algo, stage).
ExecutionModel execution_model_of(std::string_view scheduler);
/// The execution model of a compilation: CompileOptions::execution where set, else the
/// scheduler's. Throws InvalidArgument for an unknown name.
ExecutionModel execution_model_of(const CompileOptions& options);
/// Whether tasks get MSCCL-style per-stage logical channels: the stage scheduler and the
/// conn allocator use them (that is how MSCCL opens its extra channels); otherwise all
/// tasks share logical channel 0.
bool uses_stage_channels(const CompileOptions& options);

/// Lowers a scheduled graph with the given instances (each at least 1; compile() takes them
/// from derive_instances, then fewer_instances under a thread-block limit). Throws Internal
/// if an invariant breaks.
///
/// `step_order` (algorithm-level schedulers only): a slot's program order is its own step
/// (the op it receives, else the one it sends; a slot that only sends before the slots that
/// receive in its step), not its unit's key, and a fused chain may come back to a rank, so a
/// ring AllReduce's chunk runs as one chain of rrs, rrcs and rcs on one thread block per
/// rank, each rank starting with its own send (what NCCL's ring and MSCCL's algorithm-level
/// thread blocks do). Taken only where both ends of every connection see its transfers in
/// one order and every dependency points backwards; the result's step_order says whether it
/// was. Unlike unit keys it may need FIFOs of more than one message: compile() lowers again
/// without it when the deadlock check at its FIFO depth refuses the plan.
LoweredProgram lower(const TaskGraph& graph, const Pipeline& pipeline, const Topology& topo,
                     const CompileOptions& options, Instances instances, bool step_order = false);

/// The parts every chunk is cut into so that each count divides it (their least common
/// multiple); an MSCCL XML export needs at most kMaxInstanceParts (lang/msccl_export.cpp).
int64_t parts_needed(const Instances& k);
inline constexpr int64_t kMaxInstanceParts = 64;
/// `k` where its parts stay within `max_parts`; else each connection's count raised to the
/// next divisor of its class's count, and the largest class count lowered by one until the
/// three class counts' multiple fits. compile() applies it to derived instances, so that
/// every plan it derives can be exported.
Instances within_parts(Instances k, int64_t max_parts, const Topology& topo);

/// Every derived count multiplied by its class's factor (CompileOptions::scale_intra, ...),
/// rounded, between 1 and 64.
Instances scale_instances(const Instances& k, double intra, double inter, double local, const Topology& topo);

/// Fewer instances for a plan that needs `tbs` thread blocks on its busiest rank where at
/// most `max_tbs` may run: each count (per class and per link) scaled by max_tbs / tbs
/// (rounded down, at least 1), and, when scaling changes nothing, one fewer on every count
/// equal to the largest. Equal to `k` only when every count is 1.
Instances fewer_instances(const Instances& k, int32_t tbs, int32_t max_tbs);

}  // namespace weft
