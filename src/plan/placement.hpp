// Where a communicator's ranks are: which host each runs on (from the host identities the
// ranks exchange over the bootstrap: bootstrap/host_identity.hpp), which node (hosts split
// by WEFT_EMULATE_NODES, net/node_layout.hpp), and so which channel the runtime builds for
// each link of a plan.
// Host-only, so that the CPU tests check it.
//
// Channels: a plan records one per ordered pair of ranks it sends over (Plan::links:
// memory, port-ce, port-net); a plan without links means memory within a node and port-net
// between nodes. The runtime builds memory channels (CUDA IPC within a host) and network
// FIFOs (net/net_fifos.hpp, between ranks of different nodes); it has no copy-engine FIFO
// for the plan interpreter, so a port-ce link is refused, as are a memory channel between
// hosts and port-net within a node.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

/// Which host each rank is on.
struct HostMap {
  std::vector<int> host_of_rank;        ///< host index, numbered in order of first rank
  std::vector<std::string> host_names;  ///< by host index
  int hosts() const { return static_cast<int>(host_names.size()); }
};

/// Everything the link checks need to know of the ranks.
struct Placement {
  std::vector<int> node_of_rank;  ///< net::NodeLayout::node_of_rank
  HostMap hosts;
  int nranks() const { return static_cast<int>(node_of_rank.size()); }
  bool crosses_nodes(int a, int b) const;
  bool crosses_hosts(int a, int b) const;
  /// "rank 2 (host 'b')".
  std::string where(int rank) const;
};

/// The channel the runtime builds for src -> dst under `plan`: the recorded kind, or for a
/// plan without links port-net across nodes and memory within one. Throws InvalidUsage
/// naming the plan, the link, the ranks and their hosts when it cannot be built (port-ce;
/// memory between hosts; port-net within a node).
ChannelKind built_channel(const Plan& plan, const Placement& where, int src, int dst);

/// built_channel for every pair the plan sends over (each rank checks the whole plan, so
/// all refuse it alike); also refuses a plan for another rank count.
void check_plan_channels(const Plan& plan, const Placement& where);

/// The links the runtime records on a plan it compiles itself: per pair the plan sends
/// over, port-net between nodes, memory within one (what it builds: a PCIe pair runs a
/// memory channel, as the interpreter has no copy-engine FIFO).
std::vector<PlanLink> runtime_links(const Plan& plan, const std::vector<int>& node_of_rank);

/// Nodes of equal size in contiguous runs of ranks (0 when the layout is not that regular,
/// or is one node): the GPUs per node a compiler's Topology can express.
int regular_node_size(const std::vector<int>& node_of_rank);

}  // namespace weft
