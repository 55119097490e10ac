// Which node each rank is on, and so which links cross the network: ranks on different
// hosts are on different nodes, and WEFT_EMULATE_NODES=N splits each host's ranks into N
// emulated nodes (contiguous runs of its ranks in rank order, sizes differing by at most
// one), so that inter-node code runs and is tested on one machine, even one GPU with ranks
// sharing it (4 ranks as 2 nodes x 2: nodes {0,1} and {2,3}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::net {

struct NodeLayout {
  std::vector<int> node_of_rank;  ///< node id of each rank, numbered host by host
  int nodes = 0;
  bool emulated = false;          ///< some host was split by WEFT_EMULATE_NODES

  int node(int rank) const { return node_of_rank.at(static_cast<size_t>(rank)); }
  /// True when a transfer between `a` and `b` must go through the network transport.
  bool crosses_network(int a, int b) const { return node(a) != node(b); }
};

/// The layout for ranks whose hosts are `host_of_rank` (any value naming a host, e.g. a
/// hash of its name), each host split into `emulate_nodes` nodes (0 or 1: not split).
/// Throws InvalidArgument when a host has fewer ranks than `emulate_nodes`.
NodeLayout node_layout(const std::vector<uint64_t>& host_of_rank, int emulate_nodes);

/// The same with WEFT_EMULATE_NODES read from the environment.
NodeLayout node_layout(const std::vector<uint64_t>& host_of_rank);

}  // namespace weft::net
