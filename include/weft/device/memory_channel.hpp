// MemoryChannelDeviceHandle: one-sided communication with one peer through memory mapped
// from it (CUDA IPC / peer access), after MSCCL++'s memory channel.
//
//   put / get     copy between this rank's registered buffer and the peer's, spread over a
//                 thread group with 16-byte accesses (no synchronization inside);
//   signal        one thread, after the group's puts and a __syncthreads: the peer may read;
//   wait          one thread: waits (bounded) for the peer's next signal;
//   flush         makes this thread's earlier puts visible system-wide (a memory channel's
//                 puts are plain stores, so flush is a fence; signal already implies it);
//   put_packets / get_packets   LL packets into the peer's packet buffer and out of ours:
//                 no signal needed, the data carries its flag.
//
// Trivially copyable, passed to kernels by value. It stays valid while the communicator
// and the registrations it was made from live (see docs/device-api.md).
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/copy.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/semaphore.hpp"
#include "weft/device/thread_group.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

struct MemoryChannelDeviceHandle {
  char* local = nullptr;         ///< this rank's registered buffer
  char* remote = nullptr;        ///< the peer's registered buffer, mapped here
  LLPacket* packets_in = nullptr;   ///< local packet buffer the peer writes into
  LLPacket* packets_out = nullptr;  ///< the peer's packet buffer for us, mapped here
  PeerSemaphoreDeviceHandle semaphore;

#if WEFT_DEVICE_CODE
  /// Copies `bytes` from local + src_offset to remote + dst_offset.
  WEFT_DEVICE_INLINE void put(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, ThreadGroup g) {
    copy_bytes(remote + dst_offset, local + src_offset, bytes, g);
  }
  /// Copies `bytes` from remote + src_offset to local + dst_offset.
  WEFT_DEVICE_INLINE void get(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, ThreadGroup g) {
    copy_bytes(local + dst_offset, remote + src_offset, bytes, g);
  }
  WEFT_DEVICE_INLINE void signal() { semaphore.signal(); }
  WEFT_DEVICE_INLINE WaitResult wait(const Deadline& d) { return semaphore.wait(d); }
  WEFT_DEVICE_INLINE void flush() { __threadfence_system(); }
  /// Writes `bytes` of local + src_offset as packets at packet index dst_offset / 8 of the
  /// peer's packet buffer (dst_offset a multiple of 8).
  WEFT_DEVICE_INLINE void put_packets(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, uint32_t flag,
                                      ThreadGroup g) {
    ll_put(packets_out + dst_offset / 8, local + src_offset, bytes, flag, g);
  }
  /// Waits for `bytes` of packets at packet index src_offset / 8 of the local packet buffer
  /// and writes their data to local + dst_offset.
  WEFT_DEVICE_INLINE WaitResult get_packets(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, uint32_t flag,
                                            ThreadGroup g, const Deadline& d) {
    return ll_get(local + dst_offset, packets_in + src_offset / 8, bytes, flag, g, d);
  }
#endif
};
static_assert(std::is_trivially_copyable_v<MemoryChannelDeviceHandle>);

}  // namespace weft::device
