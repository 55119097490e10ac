#include "cli/bench_predict.hpp"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ir/topology_io.hpp"
#include "tune/net_selection.hpp"
#include "sim/report.hpp"
#include "util/text.hpp"
#include "plan/algorithms.hpp"
#include "plan/plan_source.hpp"
#include "tune/auto_schedule.hpp"
#include "util/log.hpp"
#include "sim/call_model.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::cli {

BenchPredictor::BenchPredictor(int ranks, bool graph, const std::string& topology) : ranks_(ranks), graph_(graph) {
  topo_name_ = topology.empty() ? "h200-1x" + std::to_string(ranks) : topology;
  try {
    topo_ = load_topology(topo_name_);
    if (topo_->num_gpus() != ranks)
      fail(ErrorCode::InvalidArgument, "topology " + topo_name_ + " has " + std::to_string(topo_->num_gpus()) +
                                           " GPUs, the run " + std::to_string(ranks) + " ranks");
  } catch (const Error& e) {
    topo_.reset();
    error_ = e.what();
  }
}

Prediction BenchPredictor::predict(Collective c, uint64_t bytes, bool trace) {
  Prediction p;
  if (!topo_) {
    p.why = error_;
    return p;
  }
  try {
    // A topology of several nodes: the runtime's multi-node table (tune/net_selection.hpp) and
    // plans compiled for those nodes, as a communicator spanning them runs.
    const bool nodes = topo_->nodes > 1;
    std::vector<int> node_of_rank;
    for (int r = 0; nodes && r < ranks_; ++r) node_of_rank.push_back(r / topo_->gpus_per_node);
    if (!decider_) {
      static const auto table = selection_table_for_environment();
      static const auto net_table = multi_node_table_for_environment();
      CommShape shape = CommShape::from_environment(ranks_);
      shape.multi_node = nodes;
      decider_ = std::make_unique<Decider>(nodes ? net_table : table, shape, DecideEnv::from_environment());
    }
    const Call call{c, bytes, false};
    const Decision d = decider_->decide(call);
    p.plan = describe(d);
    if (d.executor == algo::Executor::OneShot) {
      p.us = sim::oneshot_time_us(c, bytes, ranks_, graph_);
      p.oneshot_blocks = d.instances;
      return p;
    }
    if (d.executor == algo::Executor::CopyEngineExchange || d.executor == algo::Executor::CopyEngineDirect) {
      p.why = "the copy engines are not simulated";
      return p;
    }
    const int depth = static_cast<int>(config::get_int("WEFT_FIFO_DEPTH"));
    const PlanKey key = plan_key(call, d, 0);
    auto& sims = sims_[trace ? 1 : 0];
    auto it = sims.find(key);
    if (it == sims.end()) {
      const algo::Algorithm& a = algo::registry().at(d.algorithm);
      const std::string proto(algo::to_string(d.protocol));
      Plan plan;
      if (a.auto_schedule()) {  // as the communicator chooses, per size bucket (tune/auto_schedule.hpp)
        AutoChoice ch = choose_auto_schedule(c, ranks_, a.name(), proto, d.instances, false, 0, depth, a.allocator(),
                                             node_of_rank, bytes,
                                             sim::runtime_slot_data_bytes(d.protocol, decider_->shape().slot_bytes,
                                                                          decider_->shape().ll_slot_bytes));
        auto_why_[key] = "auto chose " + ch.reason;
        WEFT_LOG(Info, "PLAN", "weft bench --predict: " << to_string(c) << ": scheduler " << auto_why_[key]);
        plan = std::move(ch.plan);
      } else {
        plan = make_plan(c, ranks_, a.name(), proto, d.instances, false, 0, depth, a.scheduler(), a.allocator(),
                         node_of_rank);  // hand-built: no scheduler
      }
      // A traced run keeps every thread block apart, as the measured trace does.
      it = sims.emplace(key, std::make_unique<sim::Simulator>(plan, *topo_, !trace)).first;
    }
    if (auto w = auto_why_.find(key); w != auto_why_.end()) {
      p.schedule_why = w->second;
      p.plan += ", " + w->second.substr(0, w->second.find(" for "));  // "auto chose hpds"
    }
    sim::SimOptions o;
    o.bytes = bytes;
    o.runtime_microbatch = true;
    o.staging_slot_bytes = sim::runtime_slot_data_bytes(d.protocol, decider_->shape().slot_bytes, decider_->shape().ll_slot_bytes);
    if (d.microbatch_bytes > 0) {  // the row's or WEFT_MICROBATCH_BYTES, as the runtime caps its micro-batches
      o.runtime_microbatch = false;
      o.microbatch_bytes = std::min(it->second->runtime_microbatch_bytes(o.staging_slot_bytes), d.microbatch_bytes);
    }
    o.fifo_depth = depth;
    sim::set_runtime_protocol(o, d.protocol);
    o.trace = trace;
    // Timed as `weft bench` times the GPUs: calls back to back, rank 0's mean; a traced run
    // shows one call.
    if (!trace) sim::set_back_to_back(o, graph_);
    p.report = it->second->run(o);
    p.us = sim::per_call_us(*p.report, o, graph_);
  } catch (const Error& e) {
    p.us = -1;
    p.why = e.what();
  }
  return p;
}

void run_predicted_bench(const std::vector<Collective>& collectives, const std::vector<uint64_t>& sizes, int ranks,
                         bool graph, const std::string& topology, const std::string& dtype, size_t dtype_bytes, bool json,
                         std::ostream* csv) {
  BenchPredictor pred(ranks, graph, topology);
  if (!pred.error().empty()) fail(ErrorCode::InvalidArgument, pred.error());
  std::printf("# weft bench --predict: nothing runs on a GPU; every figure below is SIMULATED: the time per call of what the "
              "runtime would run (its selection table and plans), launch included%s, %d ranks on topology %s "
              "(docs/traces.md)\n",
              graph ? " (CUDA graph)" : "", ranks, pred.topology_name().c_str());
  if (csv) *csv << "collective,bytes,count,type,sim_us,sim_algbw,sim_busbw,tbs,weft_plan\n";
  for (Collective c : collectives) {
    text::Table t({"size", "count", "type", "sim(us)", "algbw(GB/s)", "busbw(GB/s)", "TBs", "weft plan"});
    for (uint64_t bytes : sizes) {
      const Prediction p = pred.predict(c, bytes);
      const double algbw = p.us > 0 ? static_cast<double>(bytes) / p.us / 1e3 : 0;
      const double busbw = algbw * sim::bus_factor(c, ranks);
      const std::string plan = p.us >= 0 ? p.plan : "none: " + p.why;
      const int tbs = p.us < 0 ? 0 : p.report ? p.report->tbs_per_rank_max : p.oneshot_blocks;
      if (csv)
        *csv << to_string(c) << ',' << bytes << ',' << bytes / dtype_bytes << ',' << dtype << ',' << p.us << ',' << algbw << ','
             << busbw << ',' << tbs << ',' << nlohmann::json(plan).dump() << '\n';
      if (json) {
        const std::string why = p.schedule_why.empty() ? "" : ",\"schedule_reason\":" + nlohmann::json(p.schedule_why).dump();
        std::printf("{\"collective\":\"%s\",\"bytes\":%llu,\"sim_us\":%.3f,\"sim_busbw\":%.3f,\"tbs\":%d,\"weft_plan\":%s%s}\n",
                    std::string(to_string(c)).c_str(), static_cast<unsigned long long>(bytes), p.us, busbw, tbs,
                    nlohmann::json(plan).dump().c_str(), why.c_str());
        continue;
      }
      t.add_row({std::to_string(bytes), std::to_string(bytes / dtype_bytes), dtype, p.us >= 0 ? text::format("%.2f", p.us) : "-",
                 text::format("%.2f", algbw), text::format("%.2f", busbw), p.us >= 0 ? std::to_string(tbs) : "-", plan});
    }
    if (!json) std::printf("#\n# %s\n%s", std::string(to_string(c)).c_str(), t.str().c_str());
  }
  std::fflush(stdout);
}

}  // namespace weft::cli
