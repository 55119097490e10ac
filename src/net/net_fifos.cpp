#include "net/net_fifos.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "net/ucx_transport.hpp"
#include "proxy/proxy.hpp"
#include "bootstrap/bootstrap.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft {

namespace {
/// Triggers the proxy's FIFO holds: every thread block of a launch may push at once.
constexpr uint64_t kProxyFifoDepth = 1024;
}  // namespace

NetFifos::NetFifos(Bootstrap& boot, NetFifoMemory memory, NetLayout layout, double timeout_s,
                   std::function<void(const std::string&)> on_error)
    : rank_(boot.rank()), memory_(std::move(memory)), layout_(std::move(layout)) {
  const std::string who = "rank " + std::to_string(rank_);
  layout_.check(rank_, static_cast<int>(device::ProxyTrigger::kMaxChannels));
  const std::vector<int> peers = layout_.cross_peers(rank_);
  const int K = layout_.connections;
  const uint64_t total = layout_.total(rank_);
  try {
    ucx_ = net::transport_over(boot, config::wait_seconds(timeout_s), timeout_s);
    ucx_->place_threads(memory_.pci_bus_id);
    allocate_region(total);
    const std::vector<proxy::RemoteMemory> mem = ucx_->register_memory(region_, total, on_device_);

    proxy::ProxyOptions po;
    po.name = "proxy of rank " + std::to_string(rank_);
    po.fifo_depth = kProxyFifoDepth;
    po.timeout_s = timeout_s;
    po.memory = memory_.fifo;
    po.on_error = std::move(on_error);
    po.pci_bus_id = memory_.pci_bus_id;
    proxy_ = std::make_unique<proxy::Proxy>(po);
    const uint32_t src = proxy_->add_local_memory(region_, total);
    std::vector<device::NetFifoDeviceHandle> host(2 * peers.size() * static_cast<size_t>(K));
    for (size_t i = 0; i < peers.size(); ++i) {
      const int q = peers[i];
      std::shared_ptr<proxy::Endpoint> conn = ucx_->endpoint(q);
      const proxy::RemoteMemory& theirs = mem[static_cast<size_t>(q)];
      if (theirs.bytes != layout_.total(q))
        fail(ErrorCode::Remote, who + ": rank " + std::to_string(q) + " registered " + std::to_string(theirs.bytes) +
                                    " bytes for its network FIFOs, " + std::to_string(layout_.total(q)) + " expected");
      const uint32_t dst = proxy_->add_remote_memory(conn, theirs);
      for (int k = 0; k < K; ++k) {
        // The port channel's own wait is unused: inbound and waited point at spare words
        // of the counter block's line.
        uint64_t* spare = reinterpret_cast<uint64_t*>(region_ + layout_.posted(rank_, q, k) + 8);
        device::NetFifoDeviceHandle& s = host[(0 * peers.size() + i) * static_cast<size_t>(K) + static_cast<size_t>(k)];
        s.port = proxy_->make_port_channel(proxy::PortChannelSpec{conn, src, dst, dst, layout_.posted(q, rank_, k), spare, spare + 1});
        s.src_base = layout_.out(rank_, q, k);
        s.dst_base = layout_.in(q, rank_, k);
        device::NetFifoDeviceHandle& r = host[(1 * peers.size() + i) * static_cast<size_t>(K) + static_cast<size_t>(k)];
        r.port = proxy_->make_port_channel(proxy::PortChannelSpec{conn, src, dst, dst, layout_.acked(q, rank_, k), spare, spare + 1});
      }
    }
    handles_ = static_cast<device::NetFifoDeviceHandle*>(memory_.upload(host.data(), host.size() * sizeof(host[0])));
    watch_counters(peers);
    proxy_->start();
  } catch (...) {
    close(false);
    if (handles_) memory_.free_upload(handles_);
    free_region();
    throw;
  }
  WEFT_LOG(Info, "NET", who << ": " << peers.size() << " peers on other nodes through UCX "
                            << ucx_->version() << ", " << total / (1 << 20) << " MiB of "
                            << (on_device_ ? "GPU memory that UCX puts from and into directly"
                                           : "page-locked host memory the kernels stage through")
                            << ", " << layout_.channels(rank_) << " port channels; signals "
                            << (peers.empty() || !ucx_->endpoint(peers[0])->signals_after_landing()
                                    ? (config::get_string("WEFT_NET_PROTO") == "am" && !on_device_ ? "applied by the receiver after their data"
                                                                                                  : "fenced")
                                    : "after landing"));
  if (!peers.empty()) WEFT_LOG(Info, "NET", who << ": UCX to rank " << peers[0] << ": " << ucx_->describe_peer(peers[0]));
}

void NetFifos::allocate_region(uint64_t bytes) {
  const std::string mode = config::get_string("WEFT_NET_GPU_MEMORY");
  if (mode != "auto" && mode != "host" && mode != "gpu")
    fail(ErrorCode::InvalidArgument, "WEFT_NET_GPU_MEMORY='" + mode + "': expected auto, host or gpu");
  const bool can = ucx_->supports_cuda_memory() && memory_.alloc_device_region;
  if (mode == "gpu" && !can)
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": WEFT_NET_GPU_MEMORY=gpu, but " +
                                      (memory_.alloc_device_region ? "this UCX cannot register CUDA memory (built without CUDA support)"
                                                                   : "these network FIFOs have no GPU") +
                                      "; use auto or host (staged through page-locked host memory)");
  on_device_ = can && mode != "host";
  region_ = on_device_ ? memory_.alloc_device_region(bytes) : memory_.alloc_region(bytes);
}

void NetFifos::free_region() {
  if (region_ == nullptr) return;
  if (on_device_) memory_.free_device_region(region_);
  else memory_.free_region(region_);
  region_ = nullptr;
}

void NetFifos::watch_counters(const std::vector<int>& peers) {
  if (proxy_->trace() == nullptr) return;
  if (on_device_) return;  // GPU memory: the host cannot read the counters
  // Labels: 2 (i K + k) for the posted count of messages from peer i on connection k (a
  // message landed here), + 1 for its acked count (the peer consumed one of ours).
  const int K = layout_.connections;
  for (size_t i = 0; i < peers.size(); ++i)
    for (int k = 0; k < K; ++k) {
      const uint32_t label = 2 * static_cast<uint32_t>(i * static_cast<size_t>(K) + static_cast<size_t>(k));
      proxy_->watch(reinterpret_cast<const uint64_t*>(region_ + layout_.posted(rank_, peers[i], k)), label);
      proxy_->watch(reinterpret_cast<const uint64_t*>(region_ + layout_.acked(rank_, peers[i], k)), label + 1);
    }
}

NetFifos::~NetFifos() {
  close();
  if (handles_) memory_.free_upload(handles_);
  if (free_region_) free_region();
  if (region_ && !free_region_)
    WEFT_LOG(Info, "NET", "rank " << rank_ << ": " << layout_.total(rank_) / (1 << 20)
                                  << " MiB of network staging stay allocated (a peer may still write into them)");
}

void NetFifos::close(bool graceful) {
  if (proxy_) proxy_->stop();
  proxy_.reset();
  if (ucx_ && !graceful) ucx_->abort();
  ucx_.reset();
}

const device::NetFifoDeviceHandle* NetFifos::handle(bool send, int peer, int k) const {
  const int i = layout_.cross_index(rank_, peer);
  const size_t n = layout_.cross_peers(rank_).size();
  if (i < 0 || k < 0 || k >= layout_.connections)
    fail(ErrorCode::Internal, "rank " + std::to_string(rank_) + ": no network FIFO to rank " + std::to_string(peer));
  return handles_ + ((send ? 0 : 1) * n + static_cast<size_t>(i)) * static_cast<size_t>(layout_.connections) +
         static_cast<size_t>(k);
}

exec::ChannelEnd NetFifos::send_end(int peer, int k, uint64_t* position) const {
  const exec::FifoShape shape{layout_.depth, layout_.slot_bytes, 0};
  uint64_t* spare = reinterpret_cast<uint64_t*>(region_ + layout_.posted(rank_, peer, k) + 16);
  exec::FifoMemory m{region_ + layout_.out(rank_, peer, k), nullptr, spare,
                     reinterpret_cast<uint64_t*>(region_ + layout_.acked(rank_, peer, k)), position};
  device::MemoryChannelDeviceHandle h = exec::ChannelEnd::fifo_send(peer, shape, m).device_handle();
  h.net = handle(true, peer, k);
  return exec::ChannelEnd(h, nullptr);
}

exec::ChannelEnd NetFifos::recv_end(int peer, int k, uint64_t* position) const {
  const exec::FifoShape shape{layout_.depth, layout_.slot_bytes, 0};
  uint64_t* spare = reinterpret_cast<uint64_t*>(region_ + layout_.posted(rank_, peer, k) + 24);
  exec::FifoMemory m{region_ + layout_.in(rank_, peer, k), nullptr,
                     reinterpret_cast<uint64_t*>(region_ + layout_.posted(rank_, peer, k)), spare, position};
  device::MemoryChannelDeviceHandle h = exec::ChannelEnd::fifo_recv(peer, shape, m).device_handle();
  h.net = handle(false, peer, k);
  return exec::ChannelEnd(h, nullptr);
}

bool NetFifos::drain(double max_s) {
  if (!proxy_ || !proxy_->running()) return false;
  const device::FifoDeviceHandle f = proxy_->fifo().device_handle();
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_s);
  for (;;) {
    if (proxy_->error()) return false;
    if (proxy_->fifo().tail() >= memory_.read_head(f.head) && proxy_->held_signals() == 0) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

NetFifoMemory host_net_fifo_memory() {
  NetFifoMemory m;
  m.alloc_region = [](uint64_t bytes) { return static_cast<char*>(std::calloc(1, bytes)); };
  m.free_region = [](char* p) { std::free(p); };
  m.upload = [](const void* data, size_t bytes) {
    void* p = std::malloc(std::max<size_t>(bytes, 16));
    if (bytes > 0) std::memcpy(p, data, bytes);
    return p;
  };
  m.free_upload = [](void* p) { std::free(p); };
  return m;
}

}  // namespace weft
