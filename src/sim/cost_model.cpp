#include "sim/cost_model.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {

CostModel CostModel::from_topology(const Topology& topo) {
  CostModel m;
  m.alpha_us = topo.primitive_overhead_us;
  m.gamma = topo.contention_gamma;
  m.tb_copy_GBps = topo.tb_copy_GBps;
  m.tb_net_GBps = topo.tb_net_GBps > 0 ? topo.tb_net_GBps : topo.tb_copy_GBps;
  // Without a figure in the topology, a thread block's local copy rate is taken as four
  // times its NVLink rate: local stores see a fraction of the remote ones' latency.
  m.tb_local_GBps = topo.tb_local_GBps > 0 ? topo.tb_local_GBps : 4.0 * topo.tb_copy_GBps;
  m.hbm_GBps = topo.hbm_bandwidth_GBps;
  return m;
}

double CostModel::local_traffic_factor(Primitive p) {
  switch (p) {
    case Primitive::Recv:
    case Primitive::Copy: return 2.0;
    case Primitive::RecvReduceCopy:
    case Primitive::Reduce: return 3.0;
    default: return 0.0;
  }
}

namespace {

struct Field {
  const char* name;
  double Topology::*member;
};

const Field kFields[] = {
    {"nvlink_bandwidth_GBps", &Topology::nvlink_bandwidth_GBps},
    {"nvlink_latency_us", &Topology::nvlink_latency_us},
    {"nic_bandwidth_GBps", &Topology::nic_bandwidth_GBps},
    {"nic_latency_us", &Topology::nic_latency_us},
    {"aggregation_latency_us", &Topology::aggregation_latency_us},
    {"rack_uplink_bandwidth_GBps", &Topology::rack_uplink_bandwidth_GBps},
    {"tb_copy_GBps", &Topology::tb_copy_GBps},
    {"tb_net_GBps", &Topology::tb_net_GBps},
    {"tb_local_GBps", &Topology::tb_local_GBps},
    {"hbm_bandwidth_GBps", &Topology::hbm_bandwidth_GBps},
    {"primitive_overhead_us", &Topology::primitive_overhead_us},
    {"contention_gamma", &Topology::contention_gamma},
};

}  // namespace

std::vector<std::string> cost_parameter_names() {
  std::vector<std::string> out;
  for (const Field& f : kFields) out.emplace_back(f.name);
  return out;
}

void apply_cost_overrides(Topology& topo, const std::map<std::string, std::string>& overrides) {
  for (const auto& [key, value] : overrides) {
    const Field* field = nullptr;
    for (const Field& f : kFields)
      if (key == f.name) field = &f;
    if (!field) {
      std::string known;
      for (const Field& f : kFields) known += (known.empty() ? "" : ", ") + std::string(f.name);
      fail(ErrorCode::InvalidArgument, "unknown cost parameter '" + key + "' (known: " + known + ")");
    }
    errno = 0;
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (value.empty() || errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0)
      fail(ErrorCode::InvalidArgument,
           "cost parameter " + key + "='" + value + "' is not a non-negative number");
    topo.*(field->member) = v;
  }
  topo.validate();
}

}  // namespace weft::sim
