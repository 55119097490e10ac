#include "ir/topology.hpp"

#include <cmath>
#include <utility>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

int32_t Topology::nic_of(int32_t gpu) const {
  if (nics_per_node <= 0) return -1;
  int32_t local = local_of(gpu);
  int32_t nic = local < static_cast<int32_t>(nic_of_gpu.size()) ? nic_of_gpu[local] : local * nics_per_node / gpus_per_node;
  return node_of(gpu) * nics_per_node + nic;
}

static void check_pair(const Topology& t, int32_t src, int32_t dst) {
  if (src < 0 || src >= t.num_gpus() || dst < 0 || dst >= t.num_gpus())
    fail(ErrorCode::InvalidArgument, text::format("topology %s: GPUs %d -> %d out of range [0, %d)", t.name.c_str(), src, dst, t.num_gpus()));
  if (src == dst) fail(ErrorCode::InvalidArgument, text::format("topology %s: no link from GPU %d to itself", t.name.c_str(), src));
  if (!t.same_node(src, dst) && t.nics_per_node <= 0)
    fail(ErrorCode::InvalidArgument, text::format("topology %s: GPUs %d and %d are on different nodes, but the topology has no NICs", t.name.c_str(), src, dst));
}

std::vector<ResourceId> Topology::route(int32_t src, int32_t dst) const {
  check_pair(*this, src, dst);
  if (same_node(src, dst))
    return {{ResourceKind::NvlinkPair, static_cast<int64_t>(src) * num_gpus() + dst},
            {ResourceKind::NvlinkEgress, src},
            {ResourceKind::NvlinkIngress, dst}};
  std::vector<ResourceId> path{{ResourceKind::NicTx, nic_of(src)}};
  int32_t rs = rack_of_node(node_of(src)), rd = rack_of_node(node_of(dst));
  if (rs != rd && rack_uplink_bandwidth_GBps > 0) {
    path.push_back({ResourceKind::RackUplink, rs});
    path.push_back({ResourceKind::RackDownlink, rd});
  }
  path.push_back({ResourceKind::NicRx, nic_of(dst)});
  return path;
}

std::vector<ResourceId> Topology::conflict_resources(int32_t src, int32_t dst) const {
  check_pair(*this, src, dst);
  if (same_node(src, dst)) return {{ResourceKind::NvlinkPair, static_cast<int64_t>(src) * num_gpus() + dst}};
  return {{ResourceKind::NicTx, nic_of(src)}, {ResourceKind::NicRx, nic_of(dst)}};
}

double Topology::bandwidth_GBps(ResourceId r) const {
  switch (r.kind) {
    case ResourceKind::NvlinkPair:
    case ResourceKind::NvlinkEgress:
    case ResourceKind::NvlinkIngress: return nvlink_bandwidth_GBps;
    case ResourceKind::NicTx:
    case ResourceKind::NicRx: return nic_bandwidth_GBps;
    case ResourceKind::RackUplink:
    case ResourceKind::RackDownlink: return rack_uplink_bandwidth_GBps;
  }
  return 0;
}

double Topology::latency_us(int32_t src, int32_t dst) const {
  check_pair(*this, src, dst);
  if (same_node(src, dst)) return nvlink_latency_us;
  double l = nic_latency_us;
  if (rack_of_node(node_of(src)) != rack_of_node(node_of(dst))) l += aggregation_latency_us;
  return l;
}

double Topology::tb_rate_GBps(int32_t src, int32_t dst) const {
  return same_node(src, dst) ? tb_copy_GBps : tb_net_GBps;
}

std::string Topology::resource_name(ResourceId r) const {
  switch (r.kind) {
    case ResourceKind::NvlinkPair:
      return text::format("nvlink %lld->%lld", static_cast<long long>(r.index / num_gpus()), static_cast<long long>(r.index % num_gpus()));
    case ResourceKind::NvlinkEgress: return text::format("nvlink port %lld out", static_cast<long long>(r.index));
    case ResourceKind::NvlinkIngress: return text::format("nvlink port %lld in", static_cast<long long>(r.index));
    case ResourceKind::NicTx:
      return text::format("nic %lld.%lld tx", static_cast<long long>(r.index / nics_per_node), static_cast<long long>(r.index % nics_per_node));
    case ResourceKind::NicRx:
      return text::format("nic %lld.%lld rx", static_cast<long long>(r.index / nics_per_node), static_cast<long long>(r.index % nics_per_node));
    case ResourceKind::RackUplink: return text::format("rack %lld uplink", static_cast<long long>(r.index));
    case ResourceKind::RackDownlink: return text::format("rack %lld downlink", static_cast<long long>(r.index));
  }
  return "?";
}

void Topology::validate() const {
  auto bad = [&](const std::string& what) { fail(ErrorCode::InvalidArgument, "topology " + name + ": " + what); };
  if (nodes <= 0) bad("nodes must be positive");
  if (gpus_per_node <= 0) bad("gpus_per_node must be positive");
  if (nics_per_node < 0) bad("nics_per_node must not be negative");
  if (nodes > 1 && nics_per_node == 0) bad("several nodes need at least one NIC per node");
  if (nics_per_node == 0 && !nic_of_gpu.empty())
    bad(text::format("nic_of_gpu[0] = %d names a NIC, but nics_per_node is 0 (a topology without NICs has nic_of_gpu [])",
                     nic_of_gpu[0]));
  if (nics_per_node > 0) {
    if (static_cast<int32_t>(nic_of_gpu.size()) != gpus_per_node)
      bad(text::format("nic_of_gpu has %zu entries, expected gpus_per_node = %d", nic_of_gpu.size(), gpus_per_node));
    for (size_t i = 0; i < nic_of_gpu.size(); ++i)
      if (nic_of_gpu[i] < 0 || nic_of_gpu[i] >= nics_per_node)
        bad(text::format("nic_of_gpu[%zu] = %d is out of range [0, %d)", i, nic_of_gpu[i], nics_per_node));
    if (nic_bandwidth_GBps <= 0) bad("nic_bandwidth_GBps must be positive");
  }
  if (gpus_per_node > 1 && nvlink_bandwidth_GBps <= 0) bad("nvlink_bandwidth_GBps must be positive");
  if (intra_node_link != "nvlink" && intra_node_link != "pcie")
    bad("intra_node_link is \"" + intra_node_link + "\", expected \"nvlink\" or \"pcie\"");
  if (nodes_per_rack <= 0) bad("nodes_per_rack must be positive");
  if (tb_copy_GBps <= 0) bad("tb_copy_GBps must be positive");
  if (nics_per_node > 0 && tb_net_GBps <= 0) bad("tb_net_GBps must be positive");
  if (hbm_bandwidth_GBps <= 0) bad("hbm_bandwidth_GBps must be positive");
  if (nvlink_latency_us < 0 || nic_latency_us < 0 || aggregation_latency_us < 0 || primitive_overhead_us < 0 || contention_gamma < 0 ||
      tb_local_GBps < 0)
    bad("latencies and overheads must not be negative");
  // Figures beyond these bounds make the simulator's times overflow or vanish below its
  // resolution (a false deadlock, or a time of 1e300 us); no hardware is near them.
  auto within = [&](const char* field, double v, double lo, double hi, const char* unit) {
    if (!std::isfinite(v) || v < lo || v > hi)
      bad(text::format("%s = %g is out of range: it must be between %g and %g%s", field, v, lo, hi, unit));
  };
  constexpr double kMinGBps = 1e-3, kMaxGBps = 1e6, kMaxUs = 1e6, kMaxGamma = 1e3;
  for (auto [field, v] : {std::pair{"nvlink_bandwidth_GBps", nvlink_bandwidth_GBps}, {"nic_bandwidth_GBps", nic_bandwidth_GBps},
                          {"rack_uplink_bandwidth_GBps", rack_uplink_bandwidth_GBps}, {"tb_copy_GBps", tb_copy_GBps},
                          {"tb_net_GBps", tb_net_GBps}, {"tb_local_GBps", tb_local_GBps},
                          {"hbm_bandwidth_GBps", hbm_bandwidth_GBps}})
    if (v != 0) within(field, v, kMinGBps, kMaxGBps, " GB/s");
  for (auto [field, v] : {std::pair{"nvlink_latency_us", nvlink_latency_us}, {"nic_latency_us", nic_latency_us},
                          {"aggregation_latency_us", aggregation_latency_us}, {"primitive_overhead_us", primitive_overhead_us}})
    within(field, v, 0, kMaxUs, " us");
  within("contention_gamma", contention_gamma, 0, kMaxGamma, "");
}

}  // namespace weft
