// Topology: the machines an algorithm runs on, and the cost figures of their links.
//
// A topology is `nodes` nodes of `gpus_per_node` GPUs each. Inside a node, GPUs meet
// through an NVSwitch fabric: every GPU has one NVLink port (egress and ingress), and
// any pair of GPUs can talk at the port's rate. Between nodes, each GPU goes through
// the NIC it shares with its neighbours (`nic_of_gpu`), then a Clos network of
// top-of-rack switches (`nodes_per_rack` nodes each) joined by an aggregation layer.
//
// Global GPU (rank) g lives on node g / gpus_per_node, local index g % gpus_per_node.
// The file format (JSON) and the presets are documented in docs/topology.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// A link of the topology, as the simulator and the compiler see it. Each is directed
/// (a port's egress and ingress are two resources).
enum class ResourceKind : uint8_t {
  NvlinkPair,    ///< the connection src GPU -> dst GPU through the node's switch (index: src*G_total+dst)
  NvlinkEgress,  ///< a GPU's NVLink port, outbound (index: global GPU)
  NvlinkIngress, ///< a GPU's NVLink port, inbound (index: global GPU)
  NicTx,         ///< a NIC, outbound (index: node * nics_per_node + nic)
  NicRx,         ///< a NIC, inbound
  RackUplink,    ///< a ToR switch's uplink to the aggregation layer, outbound (index: rack)
  RackDownlink,  ///< the aggregation layer's link down to a ToR, inbound (index: rack)
};

struct ResourceId {
  ResourceKind kind;
  int64_t index;
  bool operator==(const ResourceId&) const = default;
  auto operator<=>(const ResourceId&) const = default;
};

struct Topology {
  std::string name;           ///< e.g. "a100-2x4"
  std::string gpu;            ///< e.g. "a100", "h200"
  std::string description;    ///< free text: what the topology is, where its figures come from
  int32_t nodes = 1;
  int32_t gpus_per_node = 1;
  int32_t nics_per_node = 0;  ///< 0: single node, no network
  /// Local GPU index -> local NIC index (size gpus_per_node when nics_per_node > 0).
  std::vector<int32_t> nic_of_gpu;
  int32_t nodes_per_rack = 1;

  // Link figures. Bandwidths are per direction, in GB/s (1e9 bytes per second).
  double nvlink_bandwidth_GBps = 0;   ///< one GPU's NVLink port
  double nvlink_latency_us = 0;       ///< one hop GPU -> switch -> GPU
  double nic_bandwidth_GBps = 0;      ///< one NIC
  double nic_latency_us = 0;          ///< GPU -> NIC -> ToR -> NIC -> GPU, same rack
  double aggregation_latency_us = 0;  ///< extra latency when the path crosses racks
  double rack_uplink_bandwidth_GBps = 0;  ///< 0: non-blocking Clos (no uplink contention)

  // Execution figures, for the cost model (docs/cost-model.md says where each comes from).
  double tb_copy_GBps = 0;         ///< what one thread block moves over NVLink
  double tb_net_GBps = 0;          ///< what one thread block drives through a NIC
  double hbm_bandwidth_GBps = 0;   ///< device memory, for reductions and local copies
  double primitive_overhead_us = 0;  ///< alpha: fixed cost of one primitive invocation
  /// gamma of paper 001 Eq. 1, as the simulator uses it (dimensionless): a link asked for
  /// z > 1 times its bandwidth delivers bandwidth / (1 + gamma (z - 1)).
  double contention_gamma = 0;
  /// HBM traffic (GB/s) one thread block moves in a local copy or reduction (receivers
  /// copying out of staging, rrc, Copy, Reduce); 0: 4 x tb_copy_GBps (docs/cost-model.md).
  double tb_local_GBps = 0;
  /// How GPUs of one node reach each other: "nvlink" (NVLink or NVSwitch: memory channels,
  /// SMs load and store) or "pcie" (port channels by copy engine). Detection sets "pcie"
  /// when not every pair has NVLink (ir/topology_detect.hpp).
  std::string intra_node_link = "nvlink";

  int32_t num_gpus() const { return nodes * gpus_per_node; }
  int32_t node_of(int32_t gpu) const { return gpu / gpus_per_node; }
  int32_t local_of(int32_t gpu) const { return gpu % gpus_per_node; }
  int32_t rack_of_node(int32_t node) const { return node / (nodes_per_rack > 0 ? nodes_per_rack : 1); }
  bool same_node(int32_t a, int32_t b) const { return node_of(a) == node_of(b); }
  /// Global NIC index of a GPU (node * nics_per_node + local NIC); -1 without NICs.
  int32_t nic_of(int32_t gpu) const;

  /// The resources a transfer src -> dst occupies, in path order: for GPUs of one node
  /// the pair connection, the source's egress and the destination's ingress port; across
  /// nodes the source NIC's Tx, rack up/down links when racks differ and the uplink has a
  /// finite rate, and the destination NIC's Rx. Throws InvalidArgument when src == dst or
  /// either is out of range, or when the GPUs are on different nodes and there are no NICs.
  std::vector<ResourceId> route(int32_t src, int32_t dst) const;
  /// The resources whose sharing makes two transfers conflict (paper 001's communication
  /// dependency): the pair connection inside a node; the two NICs across nodes.
  std::vector<ResourceId> conflict_resources(int32_t src, int32_t dst) const;
  /// Bandwidth of one resource in GB/s.
  double bandwidth_GBps(ResourceId r) const;
  /// End-to-end latency of a transfer src -> dst in microseconds.
  double latency_us(int32_t src, int32_t dst) const;
  /// The per-thread-block rate on the path src -> dst (tb_copy_GBps in a node, tb_net_GBps across).
  double tb_rate_GBps(int32_t src, int32_t dst) const;
  /// Human-readable name of a resource, for reports ("nvlink 0->1", "nic 1.0 tx").
  std::string resource_name(ResourceId r) const;

  /// Throws weft::Error(InvalidArgument) naming the first inconsistent field.
  void validate() const;

  bool operator==(const Topology&) const = default;
};

}  // namespace weft
