// NetFifos: a rank's connection FIFOs to ranks on other nodes (other hosts, or WEFT_EMULATE_NODES),
// carried by the proxy and the network transport (UCX) instead of CUDA IPC stores.
//
// The kernels' protocol is the memory channel's (weft/device/memory_channel.hpp, "Across
// the network"): the send end writes its Simple slot into a LOCAL staging slot, in
// page-locked host memory registered with UCX; post(pos, bytes) pushes one
// put-with-signal trigger to this rank's proxy, which puts the bytes into the peer's slot
// pos % depth and then writes the posted count beside it (ordered after the data by the
// transport's fence). The receive end reads its slots (page-locked host memory the network
// writes, mapped into the GPU) and ack(pos) pushes a signal trigger: the acked count lands
// in the sender's region. Waits are the memory channel's, on counters in this rank's own
// region. The region's layout is net/net_layout.hpp.
//
// Per rank: one UCX transport (endpoints to every rank), one region, one proxy thread with
// two port channels per connection and peer on another node (data, acks). Collective over
// the bootstrap (every rank constructs it together). A proxy failure (a peer's endpoint
// failed, a refused trigger) calls `on_error` (the communicator marks itself broken and
// raises its abort flag, so every kernel wait ends).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/channel_end.hpp"
#include "proxy/fifo.hpp"
#include "net/net_layout.hpp"

namespace weft {

class Bootstrap;

namespace net {
class UcxTransport;
}
namespace proxy {
class Proxy;
class Endpoint;
}

/// Where NetFifos' memory comes from: CUDA's page-locked mapped memory and device memory
/// for a communicator (runtime/communicator.cpp), plain host memory for the CPU tests,
/// where host code plays the kernels' part.
struct NetFifoMemory {
  /// The region: zeroed, page-locked, at the same address for the GPU (unified addressing).
  std::function<char*(uint64_t bytes)> alloc_region;
  std::function<void(char*)> free_region;
  /// The proxy's FIFO (proxy/fifo.hpp).
  proxy::FifoMemory fifo = proxy::host_fifo_memory();
  /// Copies the NetFifoDeviceHandle table where kernels read it; returns its address.
  std::function<void*(const void* data, size_t bytes)> upload;
  std::function<void(void*)> free_upload;
  /// Reads the FIFO's head counter (device memory for GPU producers).
  std::function<uint64_t(const uint64_t* head)> read_head = [](const uint64_t* h) { return *h; };
  /// The region in GPU memory instead (zeroed), for a UCX that registers CUDA memory
  /// (WEFT_NET_GPU_MEMORY): the kernels then write and read their slots in GPU memory and
  /// UCX puts from and into it directly. Empty: page-locked host memory only (CPU tests).
  std::function<char*(uint64_t bytes)> alloc_device_region;
  std::function<void(char*)> free_device_region;
  /// The GPU's PCI bus id: the proxy thread runs near it (proxy/affinity.hpp).
  std::string pci_bus_id;
};

/// Plain host memory (calloc, malloc): the memory of NetFifos whose kernels' part host code
/// plays, in the CPU tests and bench/net_bench.
NetFifoMemory host_net_fifo_memory();

class NetFifos {
 public:
  /// Collective over `boot`. `timeout_s`: WEFT_TIMEOUT (bounds the bootstrap steps).
  NetFifos(Bootstrap& boot, NetFifoMemory memory, NetLayout layout, double timeout_s,
           std::function<void(const std::string&)> on_error);
  /// Stops the proxy, closes the transport; frees the region unless keep_region() was called.
  ~NetFifos();
  NetFifos(const NetFifos&) = delete;
  NetFifos& operator=(const NetFifos&) = delete;

  bool crosses(int peer) const { return peer != rank_ && layout_.crosses(rank_, peer); }
  /// The ends of connection k with `peer` (another node); `position` is the end's own
  /// message count (device memory of this rank).
  exec::ChannelEnd send_end(int peer, int k, uint64_t* position) const;
  exec::ChannelEnd recv_end(int peer, int k, uint64_t* position) const;

  /// Waits (at most `max_s`) until the proxy has taken every trigger the kernels pushed and
  /// written every signal it held; false if it did not (failed or still busy).
  bool drain(double max_s);
  /// Stops the proxy and closes the transport (peers' later transfers to this rank fail).
  /// `graceful`: every rank met first, so endpoints close after their transfers; else they
  /// are closed at once (a dead peer's endpoint could hold a flushing close until its
  /// deadline).
  void close(bool graceful = true);
  /// After a failed teardown: the region stays allocated (a peer's transport may still write).
  void keep_region() { free_region_ = false; }
  const NetLayout& layout() const { return layout_; }
  /// This rank's region (tests).
  char* region() const { return region_; }
  /// True where the region is GPU memory that UCX reads and writes directly.
  bool region_on_device() const { return on_device_; }
  /// The proxy (tests: a host producer pushes into its FIFO).
  proxy::Proxy& proxy() { return *proxy_; }

 private:
  int rank_ = 0;
  NetFifoMemory memory_;
  NetLayout layout_;
  char* region_ = nullptr;                      // page-locked, mapped (UVA: same address on the GPU)
  device::NetFifoDeviceHandle* handles_ = nullptr;  // device memory: [send 0 / recv 1][cross index][k]
  std::unique_ptr<net::UcxTransport> ucx_;
  std::unique_ptr<proxy::Proxy> proxy_;
  bool free_region_ = true;
  bool on_device_ = false;
  const device::NetFifoDeviceHandle* handle(bool send, int peer, int k) const;
  void allocate_region(uint64_t bytes);
  void free_region();
  void watch_counters(const std::vector<int>& peers);
};

}  // namespace weft
