// PortMesh: the port channels of one rank to every rank on another node, over the network
// transport: what a communicator builds for inter-node (or emulated inter-node) links.
//
// Collective over the communicator's bootstrap (authenticated: only ranks that proved its
// secret take part): creates the UCX transport, registers this rank's buffer and its
// signal array with it, and makes one Proxy (one thread) with a channel to each rank q for
// which nodes.crosses_network(rank, q). Channel to q puts from this rank's buffer into q's
// buffer at the offsets the triggers carry; its signals land in q's signal array at
// [rank * 8]; this rank waits for q's signals at its own [q * 8] (consumed count at
// [q * 8 + 1]). The signal array holds nranks * 64 bytes, zeroed, in memory both the
// network and the waiting side can reach (page-locked mapped host memory, or GPU memory
// where UCX registers it).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "net/node_layout.hpp"
#include "net/ucx_transport.hpp"
#include "proxy/proxy.hpp"

namespace weft {
class Bootstrap;
}

namespace weft::net {

struct PortMeshOptions {
  std::string name = "proxy";              ///< for errors: "proxy of rank 2"
  double timeout_s = -1;                   ///< negative: WEFT_TIMEOUT
  uint64_t fifo_depth = 512;
  proxy::FifoMemory fifo_memory = proxy::host_fifo_memory();
  bool buffer_is_cuda = false;             ///< register the buffer as CUDA memory
  bool signals_are_cuda = false;
  /// Wraps each network endpoint (e.g. a StagingEndpoint where UCX cannot read GPU
  /// memory); null: used as is.
  std::function<std::shared_ptr<proxy::Endpoint>(std::shared_ptr<proxy::Endpoint>)> wrap;
  /// Device address of a signal-array word for the handles (identity for host memory).
  std::function<uint64_t*(uint64_t*)> device_pointer = [](uint64_t* p) { return p; };
};

class PortMesh {
 public:
  /// Collective over `boot`. `buffer`: this rank's memory of `bytes` (below 4 GiB);
  /// `signals`: nranks * 64 zeroed bytes.
  PortMesh(Bootstrap& boot, const NodeLayout& nodes, void* buffer, uint64_t bytes, uint64_t* signals,
           PortMeshOptions options = {});
  /// Stops the proxy, then closes the transport. Destroy it once every rank is done with
  /// it (after a barrier): a peer still transferring sees its endpoints fail.
  ~PortMesh();
  PortMesh(const PortMesh&) = delete;
  PortMesh& operator=(const PortMesh&) = delete;

  /// True when this rank has a channel to `peer` (another node).
  bool has_channel(int peer) const;
  /// The device handle of the channel to `peer`; throws InvalidArgument without one.
  const device::PortChannelDeviceHandle& channel(int peer) const;
  proxy::Proxy& proxy() { return *proxy_; }
  /// Peers reached over the network, in rank order.
  const std::vector<int>& peers() const { return peers_; }

 private:
  int rank_ = 0;
  std::unique_ptr<UcxTransport> ucx_;
  std::unique_ptr<proxy::Proxy> proxy_;
  std::vector<int> peers_;
  std::vector<device::PortChannelDeviceHandle> channels_;  // index: rank
  std::vector<bool> has_;
};

}  // namespace weft::net
