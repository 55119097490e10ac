// Communicator::connect_memory_channels: the host call that builds users' memory channels
// (weftCommConnectMemoryChannels; weft/channel.hpp wraps it for C++).
//
// Each call allocates, per rank, one block of device memory: per source rank s a 256-byte
// control block (the inbound counter s signals, at 0; this rank's signalled and waited
// counts for its channel to s, at 64 and 128) and, after the control area, a packet buffer
// per source rank. The ranks all-gather their buffers' and blocks' CUDA IPC handles over
// the bootstrap; each then maps what its peers gave (or takes the address as is, for a
// peer in this process) and fills one device handle per peer. A channel from r to p:
// remote = p's buffer, semaphore outbound = p's inbound counter for r, inbound = r's
// counter for p, packets_out = p's packet buffer for r, packets_in = r's for p.
#include <cuda_runtime_api.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

/// What each rank tells the others (all-gathered).
struct ChannelInfo {
  int32_t ok;              ///< 0: this rank refused its own arguments
  int32_t pad;
  uint64_t packet_bytes;   ///< per source rank, rounded up to 16; every rank must agree
  uint64_t buf;            ///< the buffer's address in its own process
  uint64_t buf_offset;     ///< from the base of its allocation
  uint64_t mem;            ///< the control and packet block's address in its own process
  cudaIpcMemHandle_t buf_handle;
  cudaIpcMemHandle_t mem_handle;
};

constexpr uint64_t kControlBytes = 256;
constexpr uint64_t kSignalled = 64, kWaited = 128;

/// What a call's channels share: the block of device memory and the peers' mappings.
struct ChannelMemory {
  int device = 0;
  char* mem = nullptr;
  std::vector<void*> opened;  ///< cudaIpcOpenMemHandle results, closed at release
  ~ChannelMemory() {
    DeviceGuard g(device);
    for (void* p : opened) cudaIpcCloseMemHandle(p);
    if (mem != nullptr) cudaFree(mem);
    cudaGetLastError();
  }
};

}  // namespace

std::vector<exec::ChannelEnd> Communicator::connect_memory_channels(const std::vector<int>& peers, void* buf,
                                                                       uint64_t bytes, uint64_t packet_bytes) {
  static const std::string fn = "weftCommConnectMemoryChannels";
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  DeviceGuard guard(device_);
  const std::string me = "rank " + std::to_string(rank_) + ": " + fn + ": ";
  // Local checks first; the verdict travels with the exchange so that every rank fails
  // together instead of waiting for one that already gave up.
  std::string bad;
  uint64_t base = 0;
  std::set<int> seen;
  for (int p : peers) {
    if (p < 0 || p >= nranks_ || p == rank_)
      bad = "peer " + std::to_string(p) + " is not another rank of 0.." + std::to_string(nranks_ - 1);
    else if (!seen.insert(p).second)
      bad = "peer " + std::to_string(p) + " is listed twice";
    else if (placement_.crosses_hosts(rank_, p))
      bad = "peer " + placement_.where(p) + " is on another host than " + placement_.where(rank_) +
            ": a memory channel maps the peer's buffer through CUDA IPC, within one host only";
  }
  if (bad.empty() && (buf == nullptr || bytes == 0)) bad = "null buffer or zero size";
  if (bad.empty()) {
    try {
      base = allocation_base(buf, bytes, fn);
    } catch (const Error& e) {
      bad = e.what();
    }
  }
  auto owner = std::make_shared<ChannelMemory>();
  owner->device = device_;
  const uint64_t pb = (packet_bytes + 15) / 16 * 16;
  const uint64_t ctrl = (static_cast<uint64_t>(nranks_) * kControlBytes + 4095) / 4096 * 4096;
  const uint64_t total = ctrl + static_cast<uint64_t>(nranks_) * pb;
  ChannelInfo mine{};
  if (bad.empty()) {
    cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&owner->mem), total);
    // Zeroed before any peer learns where it is.
    if (err == cudaSuccess) err = cudaMemsetAsync(owner->mem, 0, total, setup_stream_);
    if (err == cudaSuccess) err = cudaStreamSynchronize(setup_stream_);
    if (err == cudaSuccess) err = cudaIpcGetMemHandle(&mine.buf_handle, reinterpret_cast<void*>(base));
    if (err == cudaSuccess) err = cudaIpcGetMemHandle(&mine.mem_handle, owner->mem);
    if (err != cudaSuccess) bad = std::string("CUDA: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  }
  mine.ok = bad.empty() ? 1 : 0;
  mine.packet_bytes = pb;
  mine.buf = reinterpret_cast<uint64_t>(buf);
  mine.buf_offset = reinterpret_cast<uint64_t>(buf) - base;
  mine.mem = reinterpret_cast<uint64_t>(owner->mem);
  std::vector<ChannelInfo> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = mine;
  boot_->allgather(all.data(), sizeof(ChannelInfo));
  if (!bad.empty()) fail(ErrorCode::InvalidArgument, me + bad);
  for (int p = 0; p < nranks_; ++p) {
    const ChannelInfo& pi = all[static_cast<size_t>(p)];
    if (!pi.ok) fail(ErrorCode::InvalidUsage, me + "rank " + std::to_string(p) + " refused its arguments, so no rank made channels");
    if (pi.packet_bytes != pb)
      fail(ErrorCode::InvalidUsage, me + "rank " + std::to_string(p) + " asked for packet buffers of " +
                                        std::to_string(pi.packet_bytes) + " bytes, this rank for " + std::to_string(pb) +
                                        "; every rank must pass the same packet size");
  }

  // Maps one of peer p's allocations into this process (closed when the owner goes).
  auto map = [&](int p, const cudaIpcMemHandle_t& handle, const char* what) {
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess)
      fail(ErrorCode::UnhandledCuda, me + "cannot map rank " + std::to_string(p) + "'s " + what +
                                         " through CUDA IPC (" + cudaGetErrorName(err) + ": " +
                                         cudaGetErrorString(err) + "); the GPUs need peer access");
    owner->opened.push_back(ptr);
    return static_cast<char*>(ptr);
  };
  std::vector<exec::ChannelEnd> out;
  out.reserve(peers.size());
  for (int p : peers) {
    const ChannelInfo& pi = all[static_cast<size_t>(p)];
    char* peer_buf = nullptr;
    char* peer_mem = nullptr;
    if (peer_device_[static_cast<size_t>(p)] >= 0) {
      // In this process: its addresses are ours (peer access was enabled at creation).
      peer_buf = reinterpret_cast<char*>(pi.buf);
      peer_mem = reinterpret_cast<char*>(pi.mem);
    } else {
      peer_buf = map(p, pi.buf_handle, "buffer") + pi.buf_offset;
      peer_mem = map(p, pi.mem_handle, "channel memory");
    }
    device::MemoryChannelDeviceHandle h;
    char* own = owner->mem + static_cast<uint64_t>(p) * kControlBytes;
    h.local = static_cast<char*>(buf);
    h.remote = peer_buf;
    h.semaphore.inbound = reinterpret_cast<uint64_t*>(own);
    h.semaphore.signalled = reinterpret_cast<uint64_t*>(own + kSignalled);
    h.semaphore.waited = reinterpret_cast<uint64_t*>(own + kWaited);
    h.semaphore.outbound = reinterpret_cast<uint64_t*>(peer_mem + static_cast<uint64_t>(rank_) * kControlBytes);
    if (pb > 0) {
      h.packets_in = reinterpret_cast<device::LLPacket*>(owner->mem + ctrl + static_cast<uint64_t>(p) * pb);
      h.packets_out = reinterpret_cast<device::LLPacket*>(peer_mem + ctrl + static_cast<uint64_t>(rank_) * pb);
    }
    h.peer = p;
    out.emplace_back(h, owner);
  }
  WEFT_LOG(Info, "INIT", "rank " << rank_ << ": " << out.size() << " memory channels made ("
                                  << total << " bytes of counters and packet buffers)");
  return out;
}

}  // namespace weft
