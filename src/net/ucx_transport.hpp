// weft's network transport: UCX (UCP) between the ranks of a communicator, for port
// channels whose peer is on another host (or another emulated node). Two modes
// (WEFT_NET_PROTO): `put`, RMA puts into the peer's registered memory and 8-byte signals
// ordered after them (held until they landed, or a worker fence); `am` (the default where
// UCX cannot register CUDA memory), active messages whose receiver writes each one into its
// registered memory and applies a signal after the data sent before it (net/am_inbox.hpp).
// Flush is ucp_ep_flush (bounded); worker progress is driven by the proxy thread. UCX's TCP
// segments are raised to WEFT_NET_TCP_SEG_BYTES unless UCX_TCP_*_SEG_SIZE is set.
//
// Trust. Worker addresses and memory keys travel only through `allgather`, which the
// caller backs with the bootstrap's ring (bootstrap/bootstrap.hpp), so only ranks that proved
// the communicator's secret learn them, and every endpoint is created from an address
// received there. Every byte received is checked: block tags, lengths, sizes, addresses
// (see docs/port-channels.md for what UCX itself does not protect).
//
// Failures. Endpoints run with UCX's peer error handling: a peer that dies or whose
// endpoint fails is recorded, and every later put, signal, flush or progress on its
// endpoint throws weft::Error(Remote) naming the rank; a flush that does not complete by
// its deadline (a stalled peer) throws Timeout naming it. Nothing waits without a deadline.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proxy/endpoint.hpp"

namespace weft {
class Bootstrap;
}

namespace weft::net {

/// Empty when the transport can run here; else why not (net/ucx_api.hpp).
std::string ucx_unavailable_reason();

/// One line on what the network path would use here, for `weft env` and logs: UCX's
/// version and whether its context registers CUDA memory (then the network FIFOs live in
/// GPU memory and UCX puts from and into it) or not (staged through page-locked host
/// memory), after WEFT_NET_GPU_MEMORY; or why UCX cannot run. Creates and destroys a UCP
/// context (reads UCX_* variables); never call it in a process that forks afterwards.
std::string ucx_describe();

class UcxTransport {
 public:
  /// All-gather of `bytes_per_rank` blocks in `data` (nranks blocks; this rank's filled in),
  /// bounded: the bootstrap's Bootstrap::allgather.
  using AllGather = std::function<void(void* data, size_t bytes_per_rank)>;

  /// Collective over `allgather`: creates this rank's UCP context and worker, exchanges
  /// worker addresses and connects to every other rank. `timeout_s` (negative:
  /// WEFT_TIMEOUT) bounds teardown, at most 10 s; an endpoint's flush is bounded by the
  /// deadline its caller (the proxy) passes. Throws InvalidUsage with
  /// ucx_unavailable_reason() where UCX is missing.
  UcxTransport(int rank, int nranks, AllGather allgather, double timeout_s = -1);
  ~UcxTransport();
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const;
  int nranks() const;
  /// True where this UCX registers CUDA device memory directly (else stage through host).
  bool supports_cuda_memory() const;

  /// Collective: registers [ptr, ptr + bytes) with UCX on every rank and exchanges the
  /// keys. Returns every rank's memory as seen from here (index: rank); this rank's own
  /// entry has a null key. `cuda`: the memory is CUDA device memory (refused where
  /// supports_cuda_memory() is false). The registration lives as long as the transport.
  std::vector<proxy::RemoteMemory> register_memory(void* ptr, uint64_t bytes, bool cuda = false);

  /// Registers [ptr, ptr + bytes) on this rank only (not collective) and returns the block
  /// (address, size, packed key) a peer turns into a RemoteMemory with remote_memory, for
  /// setups whose keys travel by other means (partitioned requests). Lives as long as the
  /// transport. register_memory is both, over `allgather`.
  std::vector<char> register_local(void* ptr, uint64_t bytes, bool cuda = false);
  /// `peer`'s block from register_local, checked (tag, lengths, address range) and unpacked.
  /// Throws Remote naming the peer for a malformed block.
  proxy::RemoteMemory remote_memory(int peer, const void* block, size_t bytes);

  /// The endpoint to `peer` (not this rank), for a proxy.
  std::shared_ptr<proxy::Endpoint> endpoint(int peer);

  /// Drives the worker once (the proxy calls it through its endpoints). Throws Remote for
  /// a peer whose endpoint has failed.
  void progress();
  /// Drives the worker once and checks no peer (the partitioned engine checks the peers it
  /// has work with, check_peer).
  void progress_worker();
  /// Throws Remote if `peer`'s endpoint has failed.
  void check_peer(int peer) const;

  /// Moves the transport's own threads (the lanes', WEFT_NET_LANES) near the GPU at
  /// `pci_bus_id`, as WEFT_PROXY_CPUS says for proxies (proxy/affinity.hpp); logs where.
  void place_threads(const std::string& pci_bus_id);

  /// Closes every endpoint at once, without flushing (abort; tests: a failing endpoint).
  void abort();

  /// UCX's lanes to `peer` as ucp_ep_print_info reports them, "; "-separated ("lane[0]:
  /// 1:tcp/lo.0 md[0] -> ... am am_bw#0"), for the log; empty where UCX cannot say.
  std::string describe_peer(int peer) const;
  /// True where this rank's messages of WEFT_NET_RNDV_BYTES or more to `peer` go by UCX's
  /// rendezvous: active-message mode, and the peer's data not over TCP or WEFT_NET_TCP_RNDV=1
  /// (net/tcp_rendezvous.hpp); otherwise they go eagerly.
  bool rendezvous_to(int peer) const;
  /// "1.16.0", or "" where UCX does not say.
  std::string version() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// A UcxTransport among the ranks of `boot`, its exchanges through the bootstrap's bounded
/// all-gather (each waiting at most `allgather_wait_s`); `timeout_s` as for the constructor.
std::unique_ptr<UcxTransport> transport_over(Bootstrap& boot, double allgather_wait_s, double timeout_s);

}  // namespace weft::net
