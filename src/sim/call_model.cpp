#include "sim/call_model.hpp"

#include <algorithm>
#include <cstdlib>

#include "plan/algorithms.hpp"
#include "sim/simulator.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

namespace {

CallCosts& current() {
  static CallCosts k = kCallCosts;
  return k;
}

struct Field {
  const char* name;
  double CallCosts::*member;
  double lo, hi;
};

constexpr Field kFields[] = {
    {"launch_us", &CallCosts::launch_us, 0, 1e6},
    {"graph_launch_us", &CallCosts::graph_launch_us, 0, 1e6},
    {"oneshot_exchange_us", &CallCosts::oneshot_exchange_us, 0, 1e6},
    {"oneshot_GBps", &CallCosts::oneshot_GBps, 0.001, 1e6},
    {"ll_latency_scale", &CallCosts::ll_latency_scale, 0.001, 1000},
    {"ll_alpha_scale", &CallCosts::ll_alpha_scale, 0.001, 1000},
    {"ll_rate_scale", &CallCosts::ll_rate_scale, 0.001, 1000},
    {"simple_alpha_extra_us", &CallCosts::simple_alpha_extra_us, 0, 1e6},
    {"simple_rate_scale", &CallCosts::simple_rate_scale, 0.001, 1000},
    {"simple_local_rate_scale", &CallCosts::simple_local_rate_scale, 0.001, 1000},
    {"ll128_latency_scale", &CallCosts::ll128_latency_scale, 0.001, 1000},
    {"ll128_alpha_scale", &CallCosts::ll128_alpha_scale, 0.001, 1000},
    {"ll128_rate_scale", &CallCosts::ll128_rate_scale, 0.001, 1000},
    {"nvlink_gamma", &CallCosts::nvlink_gamma, 0, 1000},
};

}  // namespace

const CallCosts& call_costs() { return current(); }

void set_call_costs(const CallCosts& k) { current() = k; }

CallCosts with_call_cost_overrides(CallCosts base, const std::map<std::string, std::string>& overrides) {
  for (const auto& [name, value] : overrides) {
    const Field* f = nullptr;
    for (const Field& x : kFields)
      if (name == x.name) f = &x;
    if (!f) {
      std::string names;
      for (const Field& x : kFields) names += std::string(names.empty() ? "" : ", ") + x.name;
      fail(ErrorCode::InvalidArgument, "unknown call cost '" + name + "' (known: " + names + ")");
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v >= f->lo && v <= f->hi))
      fail(ErrorCode::InvalidArgument,
           text::format("call cost %s=%s: wants a number from %g to %g", name.c_str(), value.c_str(), f->lo, f->hi));
    base.*(f->member) = v;
  }
  return base;
}

void set_runtime_protocol(SimOptions& o, algo::Protocol p, const CallCosts& k) {
  const bool simple = p == algo::Protocol::Simple, ll = p == algo::Protocol::LL;
  o.whole_messages = simple;
  o.extra_alpha_us = simple ? k.simple_alpha_extra_us : 0.0;
  o.latency_scale = simple ? 1.0 : ll ? k.ll_latency_scale : k.ll128_latency_scale;
  o.alpha_scale = simple ? 1.0 : ll ? k.ll_alpha_scale : k.ll128_alpha_scale;
  o.rate_scale = simple ? k.simple_rate_scale : ll ? k.ll_rate_scale : k.ll128_rate_scale;
  o.local_rate_scale = simple ? k.simple_local_rate_scale : 1.0;
  o.polled_receive_scale = simple ? 0.0 : o.rate_scale;
  o.nvlink_gamma = k.nvlink_gamma;
}

uint64_t runtime_slot_data_bytes(algo::Protocol p, uint64_t slot_bytes, uint64_t ll_slot_bytes) {
  if (p == algo::Protocol::LL) return ll_slot_bytes / 2;
  if (p == algo::Protocol::LL128) return slot_bytes / 128 * 120;
  return slot_bytes;
}

double call_overhead_us(bool graph, const CallCosts& k) { return graph ? k.graph_launch_us : k.launch_us; }

void set_back_to_back(SimOptions& o, bool graph, const CallCosts& k) {
  o.calls = kTimedCalls;
  o.call_gap_us = call_overhead_us(graph, k);
}

double per_call_us(const SimReport& r, const SimOptions& o, bool graph, const CallCosts& k) {
  const double end = r.rank_end_us.empty() ? r.time_us : r.rank_end_us[0];
  return (end + call_overhead_us(graph, k)) / o.calls;
}

bool oneshot_carries(Collective c, uint64_t bytes, int32_t ranks) {
  return algo::registry().at(algo::kOneShot).supports(algo::CallShape{c, bytes, ranks, false});
}

double oneshot_time_us(Collective c, uint64_t bytes, int32_t ranks, bool graph, const CallCosts& k) {
  const double wire = 2.0 * static_cast<double>(std::max(1, ranks - 1)) * static_cast<double>(algo::peer_bytes(c, bytes, ranks));
  return call_overhead_us(graph, k) + k.oneshot_exchange_us + wire / (k.oneshot_GBps * 1e3);
}

}  // namespace weft::sim
