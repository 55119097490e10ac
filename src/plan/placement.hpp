// Where a communicator's ranks are: which host each runs on (from the host identities the
// ranks exchange over the bootstrap), which node (hosts split by WEFT_EMULATE_NODES,
// net/node_layout.hpp), and so which channel the runtime builds for each link of a plan.
// Host-only, so that the CPU tests check it.
//
// Host identity: a key and a printable name. By default the key hashes the host name
// together with the kernel's boot id (/proc/sys/kernel/random/boot_id; /etc/machine-id
// where there is none): two containers or machines that share a host name but not a kernel
// are different hosts, and ranks of one host always agree. WEFT_HOST_ID=NAME replaces it (a
// testing aid: ranks of one machine given different names form a multi-host communicator
// through the real code path; docs/multi-node.md).
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
#include <string_view>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

/// One rank's host as it travels in the initialization all-gather (trivially copyable).
struct HostIdentity {
  static constexpr size_t kNameBytes = 64;
  uint64_t key = 0;            ///< never 0
  char name[kNameBytes] = {};  ///< printable ASCII, NUL-terminated: for messages only
};

/// The identity from its parts: `override_id` (WEFT_HOST_ID) when not empty, else the host
/// name with `boot_id`, else with `machine_id`. Names are cut to 63 characters and
/// non-printable characters become '?'. Throws InvalidArgument for an override that is not
/// 1 to 63 of [A-Za-z0-9._:-].
HostIdentity make_host_identity(std::string_view hostname, std::string_view boot_id, std::string_view machine_id,
                                std::string_view override_id);

/// This process's identity (WEFT_HOST_ID, gethostname, the boot id, the machine id).
HostIdentity local_host_identity();

/// Which host each rank is on.
struct HostMap {
  std::vector<int> host_of_rank;        ///< host index, numbered in order of first rank
  std::vector<std::string> host_names;  ///< by host index
  int hosts() const { return static_cast<int>(host_names.size()); }
};

/// Checks the identities every rank sent (rank `me` checking): a key of 0, a name without
/// its NUL within the field, empty or with non-printable characters, and one key sent with
/// two names are Remote errors naming the ranks. Equal names with different keys are
/// different hosts.
HostMap map_hosts(int me, const std::vector<HostIdentity>& ids);

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
