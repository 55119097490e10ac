#include "sim/simulator.hpp"

#include <algorithm>
#include <chrono>

#include "sim/call_model.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "util/error.hpp"
#include "util/memory_budget.hpp"
#include "util/text.hpp"

namespace weft::sim {

Simulator::Simulator(const Plan& plan, const Topology& topo, bool merge_instances, uint64_t max_memory_bytes) : topo_(topo) {
  topo_.validate();
  // The program and the engine's state take about 64 bytes per slot of the plan (measured:
  // 45 on ring AllReduce at 512 ranks, 8.4 M slots).
  double slots = 0;
  for (const RankPlan& rp : plan.ranks)
    for (const ThreadBlock& tb : rp.tbs) slots += static_cast<double>(tb.slots.size());
  check_memory_budget(64.0 * slots, max_memory_bytes,
                      text::format("simulating the plan of %s (%.0f slots)", plan.algorithm.c_str(), slots));
  program_ = std::make_unique<Program>(build_program(plan, topo_, merge_instances));
  cost_ = CostModel::from_topology(topo_);
  // The descriptive fields only: copying the ranks would double the memory at scale.
  meta_.algorithm = plan.algorithm;
  meta_.collective = plan.collective;
  meta_.num_ranks = plan.num_ranks;
  meta_.scheduler = plan.scheduler;
  meta_.allocator = plan.allocator;
  meta_.topology = plan.topology;
  meta_.execution = plan.execution;
  for (const ProgSlot& s : program_->slots) {
    if ((s.send_conn < 0 && s.recv_conn < 0) || s.scale <= 0) continue;
    const double share = static_cast<double>(program_->tbs[static_cast<size_t>(s.tb)].weight) / s.scale;
    if (min_tb_share_ <= 0 || share < min_tb_share_) min_tb_share_ = share;
  }
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;
Simulator& Simulator::operator=(Simulator&&) noexcept = default;

namespace {

void check_scale(const char* what, double v) {
  if (!(v >= 0.001 && v <= 1000)) fail(ErrorCode::InvalidArgument, text::format("%s %g is out of range [0.001, 1000]", what, v));
}

// The runtime protocol's figures of `options` (SimOptions: alphas, latencies, block rates,
// NVLink), checked, into the cost model and the engine's parameters.
void apply_protocol_options(const SimOptions& options, CostModel& cost, EngineParams& ep) {
  if (!(options.extra_alpha_us >= 0 && options.extra_alpha_us <= 1e6))
    fail(ErrorCode::InvalidArgument, text::format("extra alpha %g us is out of range [0, 1e6]", options.extra_alpha_us));
  check_scale("latency scale", options.latency_scale);
  check_scale("alpha scale", options.alpha_scale);
  check_scale("rate scale", options.rate_scale);
  check_scale("local rate scale", options.local_rate_scale);
  if (!(options.polled_receive_scale == 0 || (options.polled_receive_scale >= 0.001 && options.polled_receive_scale <= 1000)))
    fail(ErrorCode::InvalidArgument,
         text::format("polled receive scale %g: wants 0 or 0.001 to 1000", options.polled_receive_scale));
  if (!(options.nvlink_gamma <= 1000)) fail(ErrorCode::InvalidArgument, text::format("NVLink gamma %g is above 1000", options.nvlink_gamma));
  cost.alpha_us = (cost.alpha_us + options.extra_alpha_us) * options.alpha_scale;
  ep.latency_scale = options.latency_scale;
  ep.polled_receive_GBps = options.polled_receive_scale * cost.tb_copy_GBps;
  ep.nvlink_gamma = options.nvlink_gamma;
  ep.rate_scale = options.rate_scale;
  ep.local_rate_scale = options.local_rate_scale;
}

}  // namespace

SimReport Simulator::run(const SimOptions& options) const {
  const Program& prog = *program_;
  const uint64_t mb_bytes = options.runtime_microbatch ? runtime_microbatch_bytes(options.staging_slot_bytes) : options.microbatch_bytes;
  if (mb_bytes == 0) fail(ErrorCode::InvalidArgument, "the micro-batch size must be at least 1 byte");
  if (options.fifo_depth < 1 || options.fifo_depth > 1024)
    fail(ErrorCode::InvalidArgument, text::format("FIFO depth %d is out of range [1, 1024]", options.fifo_depth));
  const uint64_t chunk = options.bytes / static_cast<uint64_t>(prog.chunks);
  if (chunk == 0)
    fail(ErrorCode::InvalidArgument, text::format("%llu bytes give less than one byte to each of the plan's %d chunk slots",
                                                  static_cast<unsigned long long>(options.bytes), prog.chunks));
  const uint64_t n_mb = chunk / mb_bytes + (chunk % mb_bytes != 0);  // no overflow near 2^64
  if (n_mb > (1u << 24))
    fail(ErrorCode::InvalidArgument, text::format("%llu micro-batches per slot is too many (raise --microbatch)",
                                                  static_cast<unsigned long long>(n_mb)));
  if (options.check && static_cast<double>(n_mb) * static_cast<double>(prog.slots.size()) > 5e7)
    fail(ErrorCode::InvalidArgument, "check mode keeps every invocation; this run has too many");

  SimReport r;
  r.algorithm = meta_.algorithm;
  r.scheduler = meta_.scheduler;
  r.allocator = meta_.allocator;
  r.topology = topo_.name;
  r.execution = std::string(to_string(prog.execution));
  r.collective = prog.collective;
  r.ranks = prog.num_ranks;
  r.bytes = options.bytes;
  r.chunk_bytes = chunk;
  r.microbatch_bytes = std::min<uint64_t>(mb_bytes, chunk);
  r.microbatches = static_cast<int32_t>(n_mb);
  r.fifo_depth = options.fifo_depth;

  EngineParams ep;
  ep.chunk_bytes = chunk;
  ep.microbatch_bytes = std::min<uint64_t>(mb_bytes, chunk);
  ep.microbatches = static_cast<int32_t>(n_mb);
  ep.fifo_depth = options.fifo_depth;
  ep.trace = options.trace;
  ep.trace_limit = options.trace_limit;
  ep.check = options.check;
  ep.slot_times = options.slot_times;
  ep.whole_messages = options.whole_messages;
  if (options.calls < 1 || options.calls > 1000 || (options.check && options.calls > 1))
    fail(ErrorCode::InvalidArgument, text::format("%d calls: wants 1 to 1000, and 1 in check mode", options.calls));
  if (!(options.call_gap_us >= 0 && options.call_gap_us <= 1e6))
    fail(ErrorCode::InvalidArgument, text::format("call gap %g us is out of range [0, 1e6]", options.call_gap_us));
  ep.calls = options.calls;
  ep.call_gap_us = options.call_gap_us;
  CostModel cost = cost_;
  apply_protocol_options(options, cost, ep);
  auto t0 = std::chrono::steady_clock::now();
  run_engine(prog, cost, ep, r);
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  for (LinkStat& l : r.links) l.name = topo_.resource_name(l.id);
  if (r.time_us > 0) {
    // nccl-tests: algbw = size / time; GB/s = bytes / us / 1e3.
    r.algbw_GBps = static_cast<double>(r.bytes) / r.time_us / 1e3;
    r.busbw_GBps = r.algbw_GBps * bus_factor(r.collective, r.ranks);
    double util = 0, bw = 0;
    int32_t used = 0;
    for (const LinkStat& l : r.links) {
      if (!l.is_link || l.bytes <= 0) continue;
      ++used;
      util += l.busy_us / r.time_us;
      bw += l.bytes / (l.capacity_GBps * 1e3 * r.time_us);
    }
    r.links_used = used;
    r.link_utilization = used ? util / used : 0;
    r.link_bandwidth_utilization = used ? bw / used : 0;
  }
  summarize_tbs(r);
  int32_t mx = 0;
  for (int32_t k : prog.rank_tbs) mx = std::max(mx, k);
  r.tbs_per_rank_max = mx;
  r.tbs_per_rank_mean = prog.num_ranks ? static_cast<double>(prog.plan_tbs) / prog.num_ranks : 0;
  return r;
}

uint64_t Simulator::runtime_microbatch_bytes(uint64_t staging_slot_bytes) const {
  // Per block and invocation a slot moves scale / weight micro-batches' worth of bytes
  // (count / instances); the runtime caps that at one staging slot.
  if (min_tb_share_ <= 0) return staging_slot_bytes;
  const uint64_t mb = static_cast<uint64_t>(static_cast<double>(staging_slot_bytes) * min_tb_share_);
  return std::max<uint64_t>(16, mb / 16 * 16);
}

SimReport simulate(const Plan& plan, const Topology& topo, const SimOptions& options) {
  return Simulator(plan, topo).run(options);
}

}  // namespace weft::sim
