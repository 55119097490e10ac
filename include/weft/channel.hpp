// weft::MemoryChannel: the host half of a user's memory channel, over the C calls of
// weft.h (weftCommConnectMemoryChannels). connect_memory_channels is collective: every
// rank of the communicator calls it together, each with its own peers and buffer; it
// returns one channel per peer, whose device_handle() a kernel takes by value
// (weft/device/memory_channel.hpp). A channel is move-only; destroy it (or let it go out
// of scope) only once every kernel using it, on either side, has ended. docs/device-api.md
// shows a complete program; examples/ring_put.cu is one.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weft/device/memory_channel.hpp"
#include "weft/weft.h"

namespace weft {

class MemoryChannel {
 public:
  MemoryChannel() = default;
  MemoryChannel(MemoryChannel&& o) noexcept : ch_(std::exchange(o.ch_, nullptr)), handle_(o.handle_) {}
  MemoryChannel& operator=(MemoryChannel&& o) noexcept {
    if (this != &o) {
      reset();
      ch_ = std::exchange(o.ch_, nullptr);
      handle_ = o.handle_;
    }
    return *this;
  }
  MemoryChannel(const MemoryChannel&) = delete;
  MemoryChannel& operator=(const MemoryChannel&) = delete;
  ~MemoryChannel() { reset(); }

  /// What a kernel takes (by value): valid while this object lives.
  const device::MemoryChannelDeviceHandle& device_handle() const { return handle_; }
  int peer() const { return handle_.peer; }
  /// Releases the channel now (the memory of its connect call goes with the last channel).
  void reset() {
    if (ch_ != nullptr) weftMemoryChannelDestroy(ch_);
    ch_ = nullptr;
    handle_ = device::MemoryChannelDeviceHandle{};
  }

 private:
  friend std::vector<MemoryChannel> connect_memory_channels(weftComm_t, const std::vector<int>&, void*, size_t,
                                                            size_t);
  weftMemoryChannel_t ch_ = nullptr;
  device::MemoryChannelDeviceHandle handle_;
};

/// Collective (see weftCommConnectMemoryChannels): channels from this rank to each of
/// `peers`, over this rank's `buffer` of `bytes` and the buffers the peers pass, with LL
/// packet buffers of `packet_bytes` each way (0: none; every rank the same). Throws
/// std::runtime_error with weft's message on failure (every rank fails together).
inline std::vector<MemoryChannel> connect_memory_channels(weftComm_t comm, const std::vector<int>& peers, void* buffer,
                                                          size_t bytes, size_t packet_bytes = 0) {
  std::vector<weftMemoryChannel_t> raw(peers.size(), nullptr);
  weftResult_t r = weftCommConnectMemoryChannels(comm, peers.data(), static_cast<int>(peers.size()), buffer, bytes,
                                                 packet_bytes, raw.data());
  if (r != weftSuccess) throw std::runtime_error(weftGetLastError(comm));
  std::vector<MemoryChannel> out(peers.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i].ch_ = raw[i];
  for (MemoryChannel& ch : out) {
    r = weftMemoryChannelGetDeviceHandle(ch.ch_, &ch.handle_, sizeof(ch.handle_));
    if (r != weftSuccess) throw std::runtime_error(weftGetLastError(comm));
  }
  return out;
}

}  // namespace weft
