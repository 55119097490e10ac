// Semaphores: counters one side bumps and the other waits on, with bounded waits.
//
// PeerSemaphoreDeviceHandle connects this GPU to one peer: signal() tells the peer "one
// more", wait() waits until the peer has signalled once more than this side has waited.
// BlockSemaphoreDeviceHandle does the same between thread blocks of one kernel.
// Both are trivially copyable and passed to kernels by value; the memory they point to
// belongs to the host object that made them (a communicator) and lives until it is
// destroyed. Counters only grow, so no reset is needed between kernels or graph replays.
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/atomics.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

struct PeerSemaphoreDeviceHandle {
  uint64_t* inbound = nullptr;     ///< local; the peer writes its signal count here
  uint64_t* outbound = nullptr;    ///< the peer's inbound counter for this semaphore (mapped)
  uint64_t* signalled = nullptr;   ///< local: how many signals this side has sent
  uint64_t* waited = nullptr;      ///< local: how many signals this side has consumed

#if WEFT_DEVICE_CODE
  /// One thread: makes every write the calling block ordered before this call (by a
  /// __syncthreads) visible to the peer, then bumps the peer's counter.
  WEFT_DEVICE_INLINE void signal() {
    uint64_t n = *signalled + 1;
    *signalled = n;
    st_release_sys(outbound, n);
  }
  /// One thread: waits until the peer's count exceeds what this side has consumed, then
  /// consumes one signal. On Timeout or Aborted nothing is consumed.
  WEFT_DEVICE_INLINE WaitResult wait(const Deadline& d) {
    const uint64_t want = *waited + 1;
    WaitResult r = spin_until([&] { return ld_acquire_sys(inbound) >= want; }, d);
    if (r == WaitResult::Ok) *waited = want;
    return r;
  }
  /// One thread: true if a signal is pending (nothing consumed).
  WEFT_DEVICE_INLINE bool poll() const { return ld_acquire_sys(inbound) >= *waited + 1; }
#endif
};
static_assert(std::is_trivially_copyable_v<PeerSemaphoreDeviceHandle>);

/// Between thread blocks of one kernel: producers arrive(), consumers wait for a count.
struct BlockSemaphoreDeviceHandle {
  uint64_t* counter = nullptr;  ///< device memory, only grows

#if WEFT_DEVICE_CODE
  /// One thread of the producing block, after a __syncthreads: publishes its block's writes.
  WEFT_DEVICE_INLINE void arrive() { atomicAdd(reinterpret_cast<unsigned long long*>(counter), 1ull); __threadfence(); }
  /// Publishes an absolute value (one producer per semaphore).
  WEFT_DEVICE_INLINE void set(uint64_t value) { st_release_gpu(counter, value); }
  /// One thread: waits until the counter reaches `value`.
  WEFT_DEVICE_INLINE WaitResult wait_for(uint64_t value, const Deadline& d) const {
    return spin_until([&] { return ld_acquire_gpu(counter) >= value; }, d);
  }
#endif
};
static_assert(std::is_trivially_copyable_v<BlockSemaphoreDeviceHandle>);

}  // namespace weft::device
