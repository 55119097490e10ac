#include "plan/placement.hpp"

#include <algorithm>

#include "ir/plan_core.hpp"
#include "util/error.hpp"

namespace weft {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

bool Placement::crosses_nodes(int a, int b) const {
  return node_of_rank.at(static_cast<size_t>(a)) != node_of_rank.at(static_cast<size_t>(b));
}

bool Placement::crosses_hosts(int a, int b) const {
  return hosts.host_of_rank.at(static_cast<size_t>(a)) != hosts.host_of_rank.at(static_cast<size_t>(b));
}

std::string Placement::where(int rank) const {
  const int h = hosts.host_of_rank.at(static_cast<size_t>(rank));
  return "rank " + std::to_string(rank) + " (host " + quoted(hosts.host_names.at(static_cast<size_t>(h))) + ")";
}

ChannelKind built_channel(const Plan& plan, const Placement& w, int src, int dst) {
  ChannelKind kind = w.crosses_nodes(src, dst) ? ChannelKind::PortNetwork : ChannelKind::Memory;
  for (const PlanLink& l : plan.links)
    if (l.src == src && l.dst == dst) kind = l.channel;
  const std::string link = "plan '" + plan.algorithm + "' records " + std::string(to_string(kind)) + " for " +
                           w.where(src) + " -> " + w.where(dst);
  if (kind == ChannelKind::PortCopyEngine)
    fail(ErrorCode::InvalidUsage, link + ", a port channel moved by copy engines, which weft's plan interpreter "
                                         "has no FIFO for yet; the plan cannot run as recorded (compile it for a "
                                         "topology whose intra_node_link is nvlink, or remove its links)");
  if (kind == ChannelKind::Memory && w.crosses_hosts(src, dst))
    fail(ErrorCode::InvalidUsage, link + ": a memory channel needs both GPUs in one machine, and these are on "
                                         "different hosts; compile the plan for this layout (port-net between hosts)");
  if (kind == ChannelKind::PortNetwork && !w.crosses_nodes(src, dst))
    fail(ErrorCode::InvalidUsage, link + ", but both are on node " +
                                      std::to_string(w.node_of_rank.at(static_cast<size_t>(src))) +
                                      ": network FIFOs join only ranks of different nodes (hosts, or "
                                      "WEFT_EMULATE_NODES within one); compile the plan for this layout");
  return kind;
}

void check_plan_channels(const Plan& plan, const Placement& w) {
  if (plan.num_ranks != w.nranks())
    fail(ErrorCode::InvalidUsage, "plan '" + plan.algorithm + "' is for " + std::to_string(plan.num_ranks) +
                                      " ranks, the communicator has " + std::to_string(w.nranks()));
  for (const auto& [s, d] : sending_pairs(plan)) built_channel(plan, w, s, d);
}

std::vector<PlanLink> runtime_links(const Plan& plan, const std::vector<int>& node_of_rank) {
  std::vector<PlanLink> out;
  const int n = static_cast<int>(node_of_rank.size());
  for (const auto& [s, d] : sending_pairs(plan)) {
    PlanLink l{s, d, ChannelKind::Memory};
    if (s < n && d < n && node_of_rank[static_cast<size_t>(s)] != node_of_rank[static_cast<size_t>(d)])
      l.channel = ChannelKind::PortNetwork;
    out.push_back(l);
  }
  return out;
}

int regular_node_size(const std::vector<int>& node_of_rank) {
  const int n = static_cast<int>(node_of_rank.size());
  if (n == 0) return 0;
  // Node ids must run 0, 0, .., 1, 1, .. in equal runs.
  int g = 0;
  while (g < n && node_of_rank[static_cast<size_t>(g)] == node_of_rank[0]) ++g;
  if (g == n || n % g != 0) return 0;
  for (int r = 0; r < n; ++r)
    if (node_of_rank[static_cast<size_t>(r)] != node_of_rank[0] + r / g) return 0;
  return g;
}

}  // namespace weft
