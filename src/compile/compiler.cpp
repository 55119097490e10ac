#include "compile/compiler.hpp"

#include <algorithm>
#include <chrono>

#include "compile/allocate.hpp"
#include "compile/buffer_contract.hpp"
#include "compile/chain_order.hpp"
#include "compile/deadlock.hpp"
#include "compile/graph.hpp"
#include "compile/layout.hpp"
#include "compile/lower.hpp"
#include "compile/schedule.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "util/memory_budget.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_options(const CompileOptions& o) {
  bool known = false;
  for (std::string_view s : scheduler_names()) known = known || s == o.scheduler;
  if (!known) fail(ErrorCode::InvalidArgument, "unknown scheduler '" + o.scheduler + "' (known: hpds, algo, stage, rr, gc3)");
  check_allocator_name(o.allocator);
  if (o.instances < 0 || o.instances > 64)
    fail(ErrorCode::InvalidArgument, text::format("instances must be between 1 and 64 (or 0 to derive them), not %d", o.instances));
  for (double f : {o.scale_intra, o.scale_inter, o.scale_local})
    if (!(f > 0 && f <= 64)) fail(ErrorCode::InvalidArgument, text::format("instance scale factors must be in (0, 64], not %g", f));
  (void)execution_model_of(o);  // refuses an unknown execution model
  if (o.channels != "link" && o.channels != "chunk")
    fail(ErrorCode::InvalidArgument, "unknown channels '" + o.channels + "' (known: link, chunk)");
  if (o.max_tbs < 0) fail(ErrorCode::InvalidArgument, text::format("max_tbs must be 0 (no limit) or more, not %d", o.max_tbs));
  if (o.fifo_depth < 0 || o.fifo_depth > (1 << 20))
    fail(ErrorCode::InvalidArgument, text::format("FIFO depth must be between 0 and 1048576, not %d", o.fifo_depth));
  if (o.protocol != "Simple" && o.protocol != "LL" && o.protocol != "LL128")
    fail(ErrorCode::InvalidArgument, "unknown protocol '" + o.protocol + "' (known: Simple, LL, LL128)");
  for (size_t i = 0; i < o.op_blocks.size(); ++i)
    if (o.op_blocks[i].first < 0 || o.op_blocks[i].count < 0 || o.op_blocks[i].first > 64 || o.op_blocks[i].count > 64)
      fail(ErrorCode::InvalidArgument, text::format("op_blocks[%zu] is first %d, count %d; each must be between 0 and 64", i,
                                                    o.op_blocks[i].first, o.op_blocks[i].count));
}

void check_keys(const std::vector<double>& keys, const char* name, size_t transfers) {
  if (!keys.empty() && keys.size() != transfers)
    fail(ErrorCode::InvalidArgument,
         text::format("%s has %zu entries for %zu transfers; it must have one per transfer or none", name, keys.size(), transfers));
}

// Bytes the compiler takes per transfer (task graph, schedule, lowering) and per plan slot
// (lowered program, allocation, plan), measured on ring AllReduce at 512 ranks (523,264
// transfers), rounded up.
constexpr double kBytesPerTransfer = 400, kBytesPerPlanSlot = 110;

struct Footprint {
  double transfers = 0, chunk_slots = 0, chunk_moves = 0, chunk_reads = 0;
  double ranks = 0, in_out = 0;  ///< input plus output chunks of one rank
  bool as_written = true;        ///< place_buffers keeps the slots (no value placement)
};

Footprint footprint(const Algorithm& algo, bool in_place) {
  Footprint f;
  f.transfers = static_cast<double>(algo.transfers.size());
  f.ranks = algo.ranks;
  f.in_out = static_cast<double>(algo.input_chunks) + algo.output_chunks;
  f.chunk_slots = f.ranks * (f.in_out + algo.scratch_chunks);
  for (const Transfer& t : algo.transfers) {
    f.chunk_moves += t.count;
    f.chunk_reads += t.op == TransferOp::Reduce ? 2.0 * t.count : t.count;
  }
  f.as_written = places_as_written(algo, in_place);
  return f;
}

// The analysis's peak, from the data structures it allocates per chunk (compiler.hpp):
// whichever of the value placement and the task graph takes more, plus the transfers.
double analysis_bytes(const Footprint& f) {
  // Value placement (layout.cpp, Placement) where the slots are not kept as written: per
  // logical cell scratch_of_ and cur_ (int32 each), per value (one per cell and per chunk
  // moved) last_step_, last_reader_ (int32), loc_ (int64) and final_ (byte), per physical
  // cell (a rank's cells plus one scratch slot per input and output chunk) occupant_ and
  // last_access_ (int32).
  const double values = f.chunk_slots + f.chunk_moves;
  const double physical = f.chunk_slots + (f.as_written ? 0 : f.ranks * f.in_out);
  const double placement = f.as_written ? 0 : 8 * f.chunk_slots + 17 * values + 8 * physical;
  // Task graph (graph.cpp, build_task_graph): last_writer and reader_head per physical slot
  // (int32 each), and node_task and node_next per chunk read (int32 each, grown by doubling:
  // up to three times the size while one moves).
  const double graph = 8 * physical + 24 * f.chunk_reads;
  return kBytesPerTransfer * f.transfers + std::max(placement, graph);
}}  // namespace

CompileResult compile(const Algorithm& given, const Topology& topo, const CompileOptions& options) {
  check_options(options);
  check_keys(options.chain_keys, "chain_keys", given.transfers.size());
  check_keys(options.op_order, "op_order", given.transfers.size());
  // Reduce chains in the order of chain_keys (compile/chain_order.hpp): their steps dealt out
  // anew; a copy only where they are given.
  Algorithm reordered;
  if (!options.chain_keys.empty()) reordered = order_chains(given, options.chain_keys);
  const Algorithm& algo = options.chain_keys.empty() ? given : reordered;
  check_topology_fits(algo, topo);
  const Footprint fp = footprint(algo, options.in_place);
  check_memory_budget(analysis_bytes(fp), options.max_memory_bytes,
                      text::format("compiling %s (%.0f transfers, %.0f chunk slots)", algo.name.c_str(), fp.transfers,
                                   fp.chunk_slots));
  CompileResult res;
  auto t0 = std::chrono::steady_clock::now();

  bool placed_in_place = false;
  {
    PlacedAlgorithm placed = place_buffers(algo, options.in_place, options.aggregate);
    res.graph = build_task_graph(placed, topo);
    placed_in_place = placed.algo.in_place;
  }  // the placed copy of the transfers is not needed any more
  res.seconds.analyse = seconds_since(t0);
  for (int32_t t = 0; t < res.graph.size(); ++t) {
    int32_t n = static_cast<int32_t>(res.graph.origins_of(t).size());
    if (n > 1) res.aggregated_tasks += n - 1;
  }

  auto t1 = std::chrono::steady_clock::now();
  res.pipeline = schedule(res.graph, options.scheduler);
  check_pipeline(res.graph, res.pipeline);
  res.seconds.schedule = seconds_since(t1);

  auto t2 = std::chrono::steady_clock::now();
  res.tasks = res.graph.size();
  Plan& p = res.plan;
  p.input_chunks = res.graph.input_chunks;
  p.output_chunks = res.graph.output_chunks;
  p.scratch_chunks = res.graph.scratch_chunks;
  p.algorithm = algo.name;
  p.collective = algo.collective;
  p.num_ranks = algo.ranks;
  p.in_place = placed_in_place;
  p.root = algo.root;
  p.protocol = options.protocol;
  p.scheduler = options.scheduler;
  p.allocator = options.allocator;
  p.topology = topo.name;
  p.num_subpipelines = static_cast<int32_t>(res.pipeline.subpipelines.size());
  // With a thread-block limit the graph is lowered again, with fewer instances, while the
  // busiest rank needs more blocks than the limit allows.
  const bool may_relower = options.max_tbs > 0;
  Instances k = derive_instances(res.graph, res.pipeline, topo, options.instances);
  if (options.instances == 0)
    k = within_parts(scale_instances(k, options.scale_intra, options.scale_inter, options.scale_local, topo),
                     kMaxInstanceParts, topo);
  {
    // Every transfer becomes a send and a receive slot per instance of its link (at most).
    const int32_t most = std::max({k.intra, k.inter, k.local});
    // The analysis's per-chunk structures are gone by now; the task graph is not.
    check_memory_budget(kBytesPerTransfer * fp.transfers + kBytesPerPlanSlot * 2.0 * most * fp.transfers,
                        options.max_memory_bytes,
                        text::format("the plan of %s at %d instances per link (%.0f transfers)", algo.name.c_str(), most,
                                     fp.transfers));
  }
  // With options.step_order, algorithm level runs each rank's slots in step order (lower.hpp)
  // unless that plan can deadlock with FIFOs of options.fifo_depth messages; it is then
  // lowered in unit order.
  bool step_order = options.step_order;
  for (;;) {
    LoweredProgram program = lower(res.graph, res.pipeline, topo, options, k, step_order);
    if (!options.keep_graph && !may_relower && !program.step_order) res.graph = TaskGraph{};
    Allocation allocation = allocate(program, options.allocator, options.spare_blocks);
    p.execution = program.execution;
    assemble_plan(program, allocation, p);  // replaces p.ranks
    if (program.step_order && !check_deadlock(p, options.fifo_depth).ok) {
      WEFT_LOG(Info, "PLAN", algo.name << ": in step order the plan can deadlock with FIFOs of " << options.fifo_depth
                                       << " messages; lowering in unit order");
      step_order = false;
      continue;
    }
    res.instances_intra = program.instances_intra;
    res.instances_inter = program.instances_inter;
    res.instances_local = program.instances_local;
    const int32_t tbs = p.max_tbs_per_rank();
    if (!may_relower || tbs <= options.max_tbs) break;
    Instances fewer = fewer_instances(k, tbs, options.max_tbs);
    if (options.instances == 0) fewer = within_parts(fewer, kMaxInstanceParts, topo);
    if (fewer == k)
      fail(ErrorCode::InvalidArgument,
           text::format("%s on %s needs %d thread blocks on one rank even with one instance per link, more than "
                        "the limit of %d per rank",
                        algo.name.c_str(), topo.name.c_str(), tbs, options.max_tbs));
    WEFT_LOG(Info, "PLAN", algo.name << ": " << tbs << " thread blocks per rank with instances " << k.intra << "/"
                                     << k.inter << "/" << k.local << " exceed " << options.max_tbs
                                     << "; lowering again with " << fewer.intra << "/" << fewer.inter << "/"
                                     << fewer.local);
    k = fewer;
  }
  if (!options.keep_graph) res.graph = TaskGraph{};
  p.links = choose_links(p, topo);  // the channel per ordered pair, from the topology's link class
  for (const RankPlan& rp : res.plan.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        ++res.slots;
        if (s.primitive == Primitive::RecvCopySend || s.primitive == Primitive::RecvReduceCopySend ||
            s.primitive == Primitive::RecvReduceSend)
          ++res.fused_primitives;
      }
  check_deadlock_or_throw(res.plan, options.fifo_depth);
  if (std::string broken = buffer_contract_violation(res.plan); !broken.empty()) fail(ErrorCode::Internal, broken);
  res.seconds.lower = seconds_since(t2);
  res.seconds.total = res.seconds.analyse + res.seconds.schedule + res.seconds.lower;
  WEFT_LOG(Info, "PLAN", "compiled " << algo.name << " for " << topo.name << ": " << res.tasks << " tasks, "
                                     << res.pipeline.subpipelines.size() << " sub-pipelines, "
                                     << res.plan.max_tbs_per_rank() << " thread blocks per rank (max)");
  return res;
}

CompileResult compile_for_runtime(const Algorithm& algo, const Topology& topo, CompileOptions options) {
  CompileResult res = compile(algo, topo, options);
  const int32_t tbs = res.plan.max_tbs_per_rank();
  if (tbs <= kRuntimePlanMaxTbs) return res;
  WEFT_LOG(Info, "PLAN", algo.name << ": " << tbs << " thread blocks per rank at " << options.instances
                                   << " instances per link; compiling with derived instances, at most "
                                   << kRuntimePlanMaxTbs);
  options.instances = 0;
  options.max_tbs = kRuntimePlanMaxTbs;
  return compile(algo, topo, options);
}

}  // namespace weft
