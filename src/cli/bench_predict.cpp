#include "cli/bench_predict.hpp"

#include "ir/topology_io.hpp"
#include "runtime/plan_source.hpp"
#include "runtime/selection.hpp"
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
    static const auto table = selection_table_for_environment();
    const Choice ch = select_algorithm(*table, c, bytes, ranks_, static_cast<int>(config::get_int("WEFT_CONNECTIONS")));
    if (ch.algorithm == kOneShot) {
      p.us = sim::oneshot_time_us(c, bytes, ranks_, graph_);
      return p;
    }
    const int depth = static_cast<int>(config::get_int("WEFT_FIFO_DEPTH"));
    const bool ll = ch.protocol == "LL";
    const std::string key = describe_choice(ch) + "/" + ch.scheduler + "/" + ch.allocator + "/" + std::string(to_string(c)) +
                            (trace ? "/traced" : "");
    auto it = sims_.find(key);
    if (it == sims_.end()) {
      const Plan plan = make_plan(c, ranks_, ch.algorithm, ch.protocol, ch.instances, false, 0, depth, ch.scheduler,
                                  ch.allocator);
      // A traced run keeps every thread block apart, as the measured trace does.
      it = sims_.emplace(key, std::make_unique<sim::Simulator>(plan, *topo_, !trace)).first;
    }
    sim::SimOptions o;
    o.bytes = bytes;
    o.runtime_microbatch = true;
    o.staging_slot_bytes = static_cast<uint64_t>(ll ? config::get_int("WEFT_LL_SLOT_BYTES") / 2
                                                    : config::get_int("WEFT_SLOT_BYTES"));
    o.fifo_depth = depth;
    o.ll = ll;
    o.whole_messages = !ll;
    o.extra_alpha_us = ll ? 0.0 : sim::kCallCosts.simple_alpha_extra_us;
    o.trace = trace;
    p.report = it->second->run(o);
    p.us = p.report->time_us + sim::call_overhead_us(graph_);
  } catch (const Error& e) {
    p.us = -1;
    p.why = e.what();
  }
  return p;
}

}  // namespace weft::cli
