// PortChannelDeviceHandle: one-sided communication with one peer through the host proxy
// (paper 003's port channel). The GPU only posts triggers to the proxy's FIFO; the proxy
// moves the data (copy engines within a host, the network transport between hosts), so
// no thread block spends its SMs on copies. One thread calls each method.
//
//   put                      asks the proxy to copy `bytes` from this rank's registered
//                            memory `src_mem` + src_offset to the peer's `dst_mem` + dst_offset;
//   signal                   asks the proxy to bump the peer's semaphore after every
//                            earlier put of this channel has landed there;
//   put_with_signal          both in one trigger;
//   flush                    waits (bounded) until the proxy has completed every earlier
//                            trigger of this FIFO (flush by counter);
//   put_with_signal_and_flush  all three;
//   wait                     waits (bounded) for the peer's next signal.
//
// (MSCCL++ spells them putWithSignal and putWithSignalAndFlush; weft names are snake_case.)
// Sizes and offsets travel in 32-bit fields: a put of 4 GiB or more is split into several
// triggers; registered memory used by port channels is below 4 GiB (the host refuses more).
// Trivially copyable, passed to kernels by value; valid while the proxy that made it lives.
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/fifo.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

struct PortChannelDeviceHandle {
  FifoDeviceHandle fifo;
  uint32_t channel = 0;   ///< the proxy's channel id (10 bits)
  uint32_t dst_mem = 0;   ///< the peer's memory, as registered with this rank's proxy
  uint32_t src_mem = 0;   ///< this rank's memory, as registered with its proxy
  uint64_t* inbound = nullptr;  ///< local; the peer's proxy writes its signal count here
  uint64_t* waited = nullptr;   ///< local: how many signals this side has consumed

#if WEFT_DEVICE_CODE
  WEFT_DEVICE_INLINE WaitResult post(uint32_t op, uint64_t dst_offset, uint64_t src_offset, uint64_t bytes,
                                     const Deadline& d, uint64_t* index = nullptr) {
    uint64_t i = 0;
    // Split so that size and offsets each fit their 32-bit fields (callers stay below 4 GiB).
    constexpr uint64_t kPiece = 1ull << 31;
    while (bytes > kPiece) {
      WaitResult r = fifo.push(ProxyTrigger::make(kTriggerPut, channel, dst_mem, dst_offset, src_mem, src_offset, kPiece),
                               i, d);
      if (r != WaitResult::Ok) return r;
      dst_offset += kPiece;
      src_offset += kPiece;
      bytes -= kPiece;
    }
    WaitResult r = fifo.push(ProxyTrigger::make(op, channel, dst_mem, dst_offset, src_mem, src_offset, bytes), i, d);
    if (index != nullptr) *index = i;
    return r;
  }
  WEFT_DEVICE_INLINE WaitResult put(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes, const Deadline& d) {
    return post(kTriggerPut, dst_offset, src_offset, bytes, d);
  }
  WEFT_DEVICE_INLINE WaitResult signal(const Deadline& d) { return post(kTriggerSignal, 0, 0, 0, d); }
  WEFT_DEVICE_INLINE WaitResult put_with_signal(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes,
                                                const Deadline& d) {
    return post(kTriggerPut | kTriggerSignal, dst_offset, src_offset, bytes, d);
  }
  WEFT_DEVICE_INLINE WaitResult flush(const Deadline& d) {
    uint64_t i = 0;
    WaitResult r = post(kTriggerFlush, 0, 0, 0, d, &i);
    return r == WaitResult::Ok ? fifo.wait_tail(i, d) : r;
  }
  WEFT_DEVICE_INLINE WaitResult put_with_signal_and_flush(uint64_t dst_offset, uint64_t src_offset, uint64_t bytes,
                                                          const Deadline& d) {
    uint64_t i = 0;
    WaitResult r = post(kTriggerPut | kTriggerSignal | kTriggerFlush, dst_offset, src_offset, bytes, d, &i);
    return r == WaitResult::Ok ? fifo.wait_tail(i, d) : r;
  }
  /// Waits until the peer has signalled once more than this side has waited; consumes one.
  /// Ends early (Aborted) when this rank's proxy has failed, e.g. because the peer's
  /// endpoint did: its signal would never come.
  WEFT_DEVICE_INLINE WaitResult wait(const Deadline& d) {
    const uint64_t want = *waited + 1;
    bool failed = false;
    uint32_t n = 0;
    WaitResult r = spin_until(
        [&] {
          if (ld_acquire_sys(inbound) >= want) return true;
          if ((++n & 63u) == 0) failed = *fifo.error != 0;  // host memory: read it now and then
          return failed;
        },
        d);
    if (failed) return WaitResult::Aborted;
    if (r == WaitResult::Ok) *waited = want;
    return r;
  }
  /// True if a signal is pending (nothing consumed).
  WEFT_DEVICE_INLINE bool poll() const { return ld_acquire_sys(inbound) >= *waited + 1; }
#endif
};
static_assert(std::is_trivially_copyable_v<PortChannelDeviceHandle>);

}  // namespace weft::device
