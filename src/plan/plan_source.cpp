#include "plan/plan_source.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "ir/topology_detect.hpp"
#include "ir/topology_io.hpp"
#include "plan/algorithms.hpp"
#include "plan/builder.hpp"
#include "plan/plan_file.hpp"
#include "plan/hand_built.hpp"
#include "plan/placement.hpp"
#include "plan/root_wire.hpp"
#include "util/log.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

/// Ranks per node: the communicator's nodes where they are of equal size in contiguous runs
/// of ranks (`node_of_rank`, real hosts and emulated nodes alike: plan/placement.hpp);
/// without a layout, where WEFT_EMULATE_NODES=N (N > 1) splits the ranks into N nodes of
/// equal size (the node layout's contiguous runs); else the whole communicator.
int emulated_gpus_per_node(int nranks, const std::vector<int>& node_of_rank = {}) {
  if (static_cast<int>(node_of_rank.size()) == nranks) {
    const int g = regular_node_size(node_of_rank);
    return g > 0 ? g : nranks;
  }
  const int64_t n = config::get_int("WEFT_EMULATE_NODES");
  return n > 1 && n <= nranks && nranks % n == 0 ? nranks / static_cast<int>(n) : nranks;
}

/// GPUPerNode for a compiled algorithm: WEFT_GPUS_PER_NODE, else the nodes' size, else the
/// whole communicator (one node). Hierarchical algorithms need it to divide the rank count; algorithms without
/// the parameter ignore it.
int gpus_per_node(int nranks, const std::vector<int>& node_of_rank = {}) {
  int64_t g = config::get_int("WEFT_GPUS_PER_NODE");
  if (g <= 0) return emulated_gpus_per_node(nranks, node_of_rank);
  if (g > nranks || nranks % g != 0)
    fail(ErrorCode::InvalidArgument, "WEFT_GPUS_PER_NODE=" + std::to_string(g) + " does not divide the communicator's " +
                                         std::to_string(nranks) + " ranks");
  return static_cast<int>(g);
}

/// The source's parameters for a communicator of `nranks` (none for a plan file, whose shape
/// is its own). The communicator is one node unless WEFT_GPUS_PER_NODE says otherwise (HM's
/// default, 4, would not divide 2 or 3 ranks).
SourceOptions options_for(const std::string& algorithm, int nranks, int root, bool with_root, bool verify,
                          const std::vector<int>& node_of_rank = {}) {
  SourceOptions so;
  so.verify = verify;
  so.size_to_topology = false;
  if (is_plan_file_path(algorithm)) return so;
  so.params = {{"nRanks", std::to_string(nranks)}, {"GPUPerNode", std::to_string(gpus_per_node(nranks, node_of_rank))}};
  if (with_root) so.params["Root"] = std::to_string(root);
  return so;
}

/// The root's in-place plan of Broadcast or Reduce, made to exchange the messages of the
/// out-of-place plan its peers run: as built when it does; else built again with the
/// out-of-place plan's instances taken as given (the runtime's thread-block limit may have
/// derived other instances for one placement than for the other); refused, before any rank
/// launches, when even that differs.
template <typename Build>
Plan match_out_of_place(Plan in, Build& build, BuildOptions& bo, const std::string& what, int root) {
  const Plan out = build(false);
  std::string diff = root_wire_difference(in, out, root);
  if (diff.empty()) return in;
  const std::string first = diff;
  bo.runtime_rule = false;
  bo.compile.instances = max_message_instances(out);
  Plan again = build(true);
  diff = root_wire_difference(again, out, root);
  if (diff.empty()) {
    WEFT_LOG(Info, "PLAN", what << " in place at root " << root << ": " << first << "; built again with the "
                                << bo.compile.instances << " instances of the other ranks' out-of-place plan");
    return again;
  }
  fail(ErrorCode::InvalidUsage, what + " in place at root " + std::to_string(root) + " exchanges other messages than "
                                    "the out-of-place plan the other ranks run (" + diff + "); call it out of place "
                                    "or set WEFT_INSTANCES");
}

}  // namespace

/// The communicator's machine: WEFT_TOPOLOGY (a file, a preset or "detect"), by default the
/// h200-1x8 preset's figures, as one node of `nranks` GPUs unless the topology has exactly
/// `nranks` (ir/topology_detect.hpp). The compiler uses it to choose instances and to
/// schedule, not for correctness. Under WEFT_EMULATE_NODES=N (dividing the ranks) it is N
/// nodes of nranks / N GPUs, one NIC per GPU, so that the compiler sees which links cross
/// the (emulated) network; the NIC figures are assumptions (a 100 Gb/s NIC), as the emulated
/// network is UCX on one machine. With the communicator's layout (`node_of_rank`: ranks on
/// several hosts) the same reshaping applies where its nodes are regular
/// (plan/placement.hpp); an irregular layout is scheduled as one node, and the runtime
/// records the links it builds on the plan either way.
Topology node_topology(int nranks, const std::vector<int>& node_of_rank) {
  Topology t = detect::configured_topology(nranks);
  const int g = emulated_gpus_per_node(nranks, node_of_rank);
  if (g != nranks) {
    t.gpus_per_node = g;
    t.nodes = nranks / g;
    t.name = "h200-emulated-" + std::to_string(t.nodes) + "x" + std::to_string(g);
    t.nics_per_node = g;
    t.nic_of_gpu.clear();
    for (int i = 0; i < g; ++i) t.nic_of_gpu.push_back(i);
    t.nic_bandwidth_GBps = 12.5;
    t.nic_latency_us = 10.0;
    t.tb_net_GBps = 6.25;
  }
  return t;
}

bool is_hand_built_name(const std::string& algorithm) { return algo::is_hand_built(algorithm); }

Collective algorithm_collective(const std::string& algorithm, int nranks) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, Collective> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(algorithm, nranks);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const PlanSource src = load_source(algorithm, node_topology(nranks), options_for(algorithm, nranks, 0, false, false));
  Collective c = src.algorithm ? src.algorithm->collective : src.given->collective;
  cache[key] = c;
  return c;
}

Plan make_plan(Collective c, int nranks, const std::string& algorithm, const std::string& protocol, int instances,
               bool in_place, int root, int fifo_depth, const std::string& scheduler, const std::string& allocator,
               const std::vector<int>& node_of_rank) {
  if (is_hand_built_name(algorithm) || nranks == 1) {
    HandBuiltSpec spec;
    spec.algorithm = algorithm;
    spec.instances = instances;
    spec.in_place = in_place;
    spec.root = root;
    spec.protocol = protocol;
    return hand_built_plan(c, nranks, spec);
  }
  // The plan builder (plan/builder.hpp) loads the source and verifies its algorithm as
  // written (ResCCLang's one data buffer); the compiler lowers it for in-place or
  // out-of-place buffers. A plan file (what `weft compile -o` writes) is taken as it is:
  // loading it calls no front-end.
  const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
  const Topology topo = node_topology(nranks, node_of_rank);
  const PlanSource src = load_source(algorithm, topo, options_for(algorithm, nranks, root, rooted, true, node_of_rank));
  const std::string what = std::string(src.kind == SourceKind::PlanFile ? "plan file '" : "algorithm '") + algorithm + "'";
  const Collective ac = src.algorithm ? src.algorithm->collective : src.given->collective;
  const int32_t aranks = src.algorithm ? src.algorithm->ranks : src.given->num_ranks;
  const int32_t aroot = src.algorithm ? src.algorithm->root : src.given->root;
  if (ac != c)
    fail(ErrorCode::InvalidArgument, what + " implements " + std::string(to_string(ac)) + ", not " + std::string(to_string(c)));
  if (aranks != nranks)
    fail(ErrorCode::InvalidArgument, what + " is for " + std::to_string(aranks) + " ranks, the communicator has " +
                                         std::to_string(nranks));
  if (rooted && aroot != root)
    fail(ErrorCode::InvalidArgument, what + " has root " + std::to_string(aroot) + ", the call asks for root " +
                                         std::to_string(root));
  BuildOptions bo;
  bo.compile.instances = instances;
  bo.compile.protocol = protocol == "LL" || protocol == "LL128" ? protocol : "Simple";
  bo.compile.fifo_depth = fifo_depth;
  bo.compile.scheduler = scheduler;
  bo.compile.allocator = allocator;
  // Algorithm level in step order where deadlock-free at the communicator's FIFO depth: a
  // ring runs as NCCL's does, one block per instance doing receive-reduce-send.
  bo.compile.step_order = true;
  // The table's instances are tuned for the hand-built plans, where one thread block serves
  // every peer; a compiled plan has blocks per link, so on many peers it takes the
  // compiler's derived instances within the runtime's budget instead (compile_for_runtime).
  // WEFT_INSTANCES, when set, is taken as given.
  bo.runtime_rule = config::get_int("WEFT_INSTANCES") <= 0;
  auto build = [&](bool placement) {
    bo.compile.in_place = placement;
    return std::move(build_plan(src, topo, bo).result.plan);
  };
  Plan p = build(in_place);
  // The root of Broadcast and Reduce alone may run in place: its peers run the out-of-place
  // plan (plan/root_wire.hpp), whose messages its own must be.
  if (rooted && in_place && src.kind != SourceKind::PlanFile && p.in_place) p = match_out_of_place(std::move(p), build, bo, what, root);
  if (p.in_place != in_place)
    fail(ErrorCode::InvalidArgument, what + (src.kind == SourceKind::PlanFile ? " was compiled" : " compiles") + " only for " +
                                         (p.in_place ? "in-place" : "out-of-place") + " buffers; the call is " +
                                         (in_place ? "in place" : "out of place"));
  // A plan the runtime compiles records the channels the runtime builds for the
  // communicator's layout; a plan file keeps its own, which the communicator checks
  // (plan/placement.hpp).
  if (src.kind != SourceKind::PlanFile && static_cast<int>(node_of_rank.size()) == nranks)
    p.links = runtime_links(p, node_of_rank);
  return p;
}

}  // namespace weft
