// The compiler: Algorithm -> TaskGraph -> Pipeline -> Plan (docs/design.md).
//
// compile() runs the stages in order, each its own function and file:
//   place_buffers (layout.hpp) and build_task_graph (graph.hpp)     "analyse"
//   schedule_hpds / _algo / _stage / _rr / _gc3 (schedule.hpp)      "schedule"
//   lower (lower.hpp: aggregation, fusion, instances, dependencies),
//   allocate_state / allocate_conn and assemble_plan (allocate.hpp),
//   check_deadlock (deadlock.hpp)                                   "lower"
// docs/compile.md describes each; docs/plan-format.md the Plan it produces.
#pragma once

#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "ir/task_graph.hpp"
#include "ir/topology.hpp"

namespace weft {

/// Where one operation runs among its connection's m thread blocks (CompileOptions::op_blocks):
/// blocks first .. first + count - 1; count 0 takes all m.
struct OpBlocks {
  int32_t first = 0, count = 0;
  bool operator==(const OpBlocks&) const = default;
};

struct CompileOptions {
  std::string scheduler = "hpds";  ///< hpds | algo | stage | rr | gc3
  std::string allocator = "state"; ///< state | conn | peer | peer-mixed | rank
  /// peer allocators only: blocks each rank adds for its local copies and reductions, dealt
  /// round robin over these (peer) or over the communication blocks and these (peer-mixed);
  /// the tuner fills a budget with them.
  int32_t spare_blocks = 0;
  int32_t instances = 0;           ///< thread blocks per link and per local operation, 1..64; 0 derives them from the topology
  /// Most thread blocks one rank may run (0: no limit). A plan whose busiest rank needs more
  /// is lowered again with fewer instances (lower.hpp, fewer_instances), down to one per
  /// link; this applies to derived and to given instances alike.
  int32_t max_tbs = 0;
  /// Execution model: "" takes the scheduler's (task level for hpds, rr and gc3, algorithm
  /// level for algo and stage); "task" or "algorithm" sets it, so that an hpds schedule can
  /// run one micro-batch of every slot in turn, fused chains crossing sub-pipelines
  /// (docs/compile.md, "Execution").
  std::string execution;
  /// Logical channels: "link" (default), one per connection (per stage for the stage
  /// scheduler and the conn allocator), or "chunk", one per connection and chunk DAG, so
  /// that the chunks crossing one link have thread blocks of their own and stream side by
  /// side, as an MSCCL file's channels do (docs/compile.md, "Channels").
  std::string channels = "link";
  /// Derived instances are multiplied by these (per link class) before any limit applies;
  /// the tuner (sim/autotune.hpp) searches them. Given instances ignore them.
  double scale_intra = 1, scale_inter = 1, scale_local = 1;
  /// Task level across nodes: an NVLink op whose data come through the network (it reads
  /// what a NIC delivered) takes only the blocks that keep pace with the network, fewer than
  /// its connection's other ops; the connection's other blocks take no part in it and end
  /// early (docs/compile.md, "Paced instances"). 0 (default) off; else how much load one
  /// block may take, as a multiple of what it moves in the call's bound time (1: exactly
  /// that). The tuner tries it.
  double pace = 0;
  /// Task level, not with the rank allocator: per Algorithm transfer (its index in
  /// Algorithm::transfers; an aggregated task takes its first transfer's), which of its
  /// connection's blocks its op runs on (docs/compile.md, "Ops on fewer blocks"), so that
  /// ops of one connection can run side by side on different blocks instead of each op
  /// taking a part of every block. Clamped to the connection's count; ops it does not name
  /// (or names with count 0) take all the blocks (or the paced ones, with `pace`). A fused
  /// chain's ops must agree or are not fused. Empty (default): every op on all its
  /// connection's blocks. The tuner fills it from the simulated timeline
  /// (sim/op_blocks.hpp).
  std::vector<OpBlocks> op_blocks;
  /// Per Algorithm transfer, a key by which each reduce chain (Reduce transfers into one slot,
  /// one after the other, compile/chain_order.hpp) runs: lower first, ties as written. The
  /// chain's steps are dealt out in that order before anything else; reductions commute, so
  /// the values are the same. Empty (default): as written. One entry per transfer or none
  /// (InvalidArgument). The tuner fills it with op_blocks (sim/op_blocks.hpp,
  /// OpPlacer::order_chains).
  std::vector<double> chain_keys;
  /// Task level: per Algorithm transfer, a key that orders the program (the order each
  /// thread block runs its slots in, and the one global order that keeps plans free of
  /// deadlock) instead of the schedule's sub-pipelines: tasks in a topological order of the
  /// task graph, the lowest key first among those whose predecessors have come, ties in
  /// the schedule's order (an aggregated task takes its first transfer's key; a task with
  /// none its latest predecessor's). Sub-pipelines keep every other use (fusion, instances,
  /// allocation). Empty (default): the schedule's order. One entry per transfer or none.
  std::vector<double> op_order;
  bool in_place = true;            ///< lower for in-place or out-of-place buffers
  bool fuse = true;                ///< fuse rcs / rrcs / rrs
  /// Algorithm-level schedulers (algo, stage): run each rank's slots in step order, a fused
  /// chain revisiting ranks (lower.hpp), where the plan is then deadlock-free with FIFOs of
  /// fifo_depth messages; else, and when off, in unit order, free at any depth. The GPU
  /// runtime turns it on (a ring then runs as the hand-built ring, needing FIFOs of 2).
  bool step_order = false;
  bool aggregate = true;           ///< merge contiguous chunks on one link and step
  std::string protocol = "Simple"; ///< Simple | LL | LL128, recorded in the plan
  /// Messages a connection holds in the deadlock check (check_deadlock): 4, the runtime's
  /// WEFT_FIFO_DEPTH default; 0 checks as if every send waited for its receive.
  int32_t fifo_depth = 4;
  /// Keep the task graph in CompileResult::graph. Callers that only want the plan turn it off:
  /// the graph is then freed once lowered, which lowers peak memory (about 700 MB for HM
  /// AllReduce on 1,024 GPUs).
  bool keep_graph = true;
  /// Memory the compilation may take, in bytes (0: default_memory_budget(), three quarters
  /// of the machine's memory). compile() estimates its need before the analysis from the
  /// arrays the value placement and the task graph allocate per chunk slot, per chunk moved
  /// and per transfer, and from the plan's slots once the instances are known, and refuses
  /// with InvalidArgument naming both figures (util/memory_budget.hpp).
  uint64_t max_memory_bytes = 0;
};

struct PhaseSeconds {
  double parse = 0, analyse = 0, schedule = 0, lower = 0, total = 0;
  double verify = 0;  ///< the symbolic verifier, filled by callers that ran it
};

struct CompileResult {
  TaskGraph graph;  ///< empty when CompileOptions::keep_graph is off
  Pipeline pipeline;
  Plan plan;
  PhaseSeconds seconds;  ///< parse (and verify) are filled by callers that parsed
  int32_t fused_primitives = 0;  ///< plan slots that are rcs, rrcs or rrs
  int32_t aggregated_tasks = 0;  ///< tasks merged into another task's primitive
  int32_t instances_intra = 1;   ///< thread blocks per NVLink connection
  int32_t instances_inter = 1;   ///< thread blocks per network connection
  int32_t instances_local = 1;   ///< thread blocks per local copy or reduction
  int64_t slots = 0;             ///< slots in the plan, all ranks
  int32_t tasks = 0;             ///< tasks of the graph (kept when the graph is not)
};

/// Compiles a verified algorithm for a topology whose GPU count equals the algorithm's
/// ranks. Throws InvalidArgument for an unknown scheduler, allocator or protocol, an
/// instance count out of range, or a topology that does not fit; Verify when the resulting
/// plan fails its deadlock check (a bug: the schedulers' plans are deadlock-free by
/// construction); InvalidArgument when it would need more memory than max_memory_bytes.
CompileResult compile(const Algorithm& algo, const Topology& topo, const CompileOptions& options = {});

/// Most thread blocks per rank a compiled plan takes in the GPU runtime: as many as the
/// runtime's own largest hand-built plan (all-pairs AllGather, 3 x 24).
inline constexpr int32_t kRuntimePlanMaxTbs = 72;

/// The GPU runtime's rule for a compiled plan (and the simulated `weft bench`, which mirrors
/// it): compile with `options` (whose instances are the selection table's, tuned for the
/// hand-built plans); if the busiest rank then needs more than kRuntimePlanMaxTbs thread
/// blocks (many peers at once: HM AllReduce on 8 GPUs needs 336 at 24 per link), compile
/// again with instances derived from the topology and max_tbs = kRuntimePlanMaxTbs.
CompileResult compile_for_runtime(const Algorithm& algo, const Topology& topo, CompileOptions options);

}  // namespace weft
