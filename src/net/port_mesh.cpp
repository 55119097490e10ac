#include "net/port_mesh.hpp"

#include "bootstrap/bootstrap.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace weft::net {

PortMesh::PortMesh(Bootstrap& boot, const NodeLayout& nodes, void* buffer, uint64_t bytes, uint64_t* signals,
                   PortMeshOptions o)
    : rank_(boot.rank()) {
  const int n = boot.nranks();
  if (static_cast<int>(nodes.node_of_rank.size()) != n)
    fail(ErrorCode::InvalidArgument, o.name + ": the node layout has " + std::to_string(nodes.node_of_rank.size()) +
                                         " ranks, the communicator " + std::to_string(n));
  if (signals == nullptr) fail(ErrorCode::InvalidArgument, o.name + ": port mesh without a signal array");
  const double wait_s = config::wait_seconds(o.timeout_s >= 0 ? o.timeout_s : config::get_seconds("WEFT_TIMEOUT"));
  ucx_ = transport_over(boot, wait_s, o.timeout_s);
  auto mem = ucx_->register_memory(buffer, bytes, o.buffer_is_cuda);
  auto sig = ucx_->register_memory(signals, static_cast<uint64_t>(n) * 64, o.signals_are_cuda);
  proxy_ = std::make_unique<proxy::Proxy>(proxy::ProxyOptions{o.name, o.fifo_depth, o.timeout_s, o.fifo_memory});
  const uint32_t src = proxy_->add_local_memory(buffer, bytes);
  channels_.resize(static_cast<size_t>(n));
  has_.assign(static_cast<size_t>(n), false);
  for (int q = 0; q < n; ++q) {
    if (q == rank_ || !nodes.crosses_network(rank_, q)) continue;
    std::shared_ptr<proxy::Endpoint> conn = ucx_->endpoint(q);
    if (o.wrap) conn = o.wrap(conn);
    const uint32_t dst = proxy_->add_remote_memory(conn, mem[static_cast<size_t>(q)]);
    const uint32_t s = proxy_->add_remote_memory(conn, sig[static_cast<size_t>(q)]);
    uint64_t* in = o.device_pointer(signals + static_cast<size_t>(q) * 8);
    channels_[static_cast<size_t>(q)] = proxy_->make_port_channel(
        proxy::PortChannelSpec{conn, src, dst, s, static_cast<uint64_t>(rank_) * 64, in, in + 1});
    has_[static_cast<size_t>(q)] = true;
    peers_.push_back(q);
  }
  proxy_->start();
}

PortMesh::~PortMesh() {
  if (proxy_) proxy_->stop();
  proxy_.reset();
  ucx_.reset();
}

bool PortMesh::has_channel(int peer) const {
  return peer >= 0 && peer < static_cast<int>(has_.size()) && has_[static_cast<size_t>(peer)];
}

const device::PortChannelDeviceHandle& PortMesh::channel(int peer) const {
  if (!has_channel(peer))
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + " has no port channel to rank " + std::to_string(peer) +
                                         " (same node, itself, or out of range)");
  return channels_[static_cast<size_t>(peer)];
}

}  // namespace weft::net
