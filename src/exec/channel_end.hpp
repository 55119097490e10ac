// ChannelEnd: the host half of one end of a memory channel (after MSCCL++'s MemoryChannel): one object per end of
// a channel that knows where that end's memory lives, in this rank and mapped from the
// peer, keeps it alive, and hands out the trivially copyable device handle kernels use
// (weft/device/memory_channel.hpp).
//
// Two kinds are made:
//   - FIFO ends (fifo_send / fifo_recv): one direction of one of weft's connections, in the
//     communicator's arena (runtime/communicator.hpp gives the layout). The arena belongs
//     to the communicator, which frees it only once no peer can write into it any more, so
//     these ends own nothing themselves.
//   - users' channels (runtime/user_channel.cpp, weftCommConnectMemoryChannel): a user
//     buffer and its peer's, plus semaphore counters and packet buffers; the end owns its
//     allocation and its mappings of the peer's, released with the last copy of the object.
//
// Host code only (no CUDA calls here): what owns memory passes a shared owner whose
// deleter frees it.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "weft/device/memory_channel.hpp"

namespace weft::exec {

/// Sizes of a FIFO: `depth` slots of `slot_bytes` (Simple) and of `packet_slot_bytes` (LL).
struct FifoShape {
  uint32_t depth = 0;
  uint32_t slot_bytes = 0;
  uint32_t packet_slot_bytes = 0;
};

/// One direction of a connection, addressed from this process: the receiver's slots and
/// posted counter, the sender's acked counter, and this end's own message count.
struct FifoMemory {
  char* slots = nullptr;           ///< receiver's memory: depth Simple slots
  char* packet_slots = nullptr;    ///< receiver's memory: depth LL slots
  uint64_t* posted = nullptr;      ///< receiver's memory; the sender bumps it
  uint64_t* acked = nullptr;       ///< sender's memory; the receiver bumps it
  uint64_t* position = nullptr;    ///< this end's memory: messages posted (send) or consumed (receive)
};

class ChannelEnd {
 public:
  ChannelEnd() = default;
  /// Wraps a handle; `owned` (may be null) is what keeps its memory: released with the
  /// last copy of every channel that shares it (a user's channels of one connect call share
  /// one allocation and its mappings).
  ChannelEnd(const device::MemoryChannelDeviceHandle& handle, std::shared_ptr<void> owned)
      : handle_(handle), owned_(std::move(owned)) {}

  /// The send end of a FIFO to `peer`: writes the peer's slots, waits on `acked`, bumps `posted`.
  static ChannelEnd fifo_send(int peer, const FifoShape& shape, const FifoMemory& mem);
  /// The receive end of a FIFO from `peer`: reads its own slots, waits on `posted`, bumps `acked`.
  static ChannelEnd fifo_recv(int peer, const FifoShape& shape, const FifoMemory& mem);

  const device::MemoryChannelDeviceHandle& device_handle() const { return handle_; }
  int peer() const { return handle_.peer; }

 private:
  device::MemoryChannelDeviceHandle handle_;
  std::shared_ptr<void> owned_;
};

}  // namespace weft::exec
