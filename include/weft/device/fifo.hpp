// The GPU-to-host FIFO of port channels (paper 003): a ring of 16-byte triggers in
// page-locked host memory that device threads fill and one host proxy thread drains.
//
// Trigger layout, paper 003's, low bit first:
//   first word:  size (32 bits) | source offset (32 bits)
//   second word: destination offset (32) | source memory id (9) | destination memory id (9)
//                | operation (3: put, signal, flush) | channel id (10) | valid (1, the
//                paper's reserved bit: set by the producer, so an all-zero slot is empty)
//
// Protocol. A producer claims slot `head++` (an atomic add on `head`), waits (bounded)
// until the proxy's counter `tail` shows the slot free (tail > index - depth), writes the
// first word, then the second with release semantics. The proxy polls the second word of
// slot `tail % depth`, handles the trigger, zeroes the slot and only then publishes
// tail + 1. `tail` is the flush counter: when it passes a trigger carrying the flush bit,
// every transfer of that trigger's channel and all earlier triggers are complete.
//
// Every device wait is bounded by a Deadline and cut short by the proxy's error flag (set
// when the proxy refused a trigger or a transfer failed or timed out).
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/atomics.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

/// Operation bits of a trigger (any non-empty combination).
enum TriggerOp : uint32_t { kTriggerPut = 1u, kTriggerSignal = 2u, kTriggerFlush = 4u };

struct ProxyTrigger {
  uint64_t fst = 0;
  uint64_t snd = 0;

  static constexpr uint32_t kMemIdBits = 9, kChannelBits = 10;
  static constexpr uint32_t kMaxMemIds = 1u << kMemIdBits;        ///< 512
  static constexpr uint32_t kMaxChannels = 1u << kChannelBits;    ///< 1024
  static constexpr uint64_t kMaxField = 0xffffffffull;            ///< size and offsets: 32 bits
  static constexpr uint64_t kValidBit = 1ull << 63;

  WEFT_HOST_DEVICE_INLINE static ProxyTrigger make(uint32_t op, uint32_t channel, uint32_t dst_mem,
                                                   uint64_t dst_offset, uint32_t src_mem, uint64_t src_offset,
                                                   uint64_t size) {
    ProxyTrigger t;
    t.fst = (size & kMaxField) | ((src_offset & kMaxField) << 32);
    t.snd = (dst_offset & kMaxField) | (uint64_t(src_mem & (kMaxMemIds - 1)) << 32) |
            (uint64_t(dst_mem & (kMaxMemIds - 1)) << 41) | (uint64_t(op & 7u) << 50) |
            (uint64_t(channel & (kMaxChannels - 1)) << 53) | kValidBit;
    return t;
  }
  WEFT_HOST_DEVICE_INLINE uint64_t size() const { return fst & kMaxField; }
  WEFT_HOST_DEVICE_INLINE uint64_t src_offset() const { return fst >> 32; }
  WEFT_HOST_DEVICE_INLINE uint64_t dst_offset() const { return snd & kMaxField; }
  WEFT_HOST_DEVICE_INLINE uint32_t src_mem() const { return uint32_t(snd >> 32) & (kMaxMemIds - 1); }
  WEFT_HOST_DEVICE_INLINE uint32_t dst_mem() const { return uint32_t(snd >> 41) & (kMaxMemIds - 1); }
  WEFT_HOST_DEVICE_INLINE uint32_t op() const { return uint32_t(snd >> 50) & 7u; }
  WEFT_HOST_DEVICE_INLINE uint32_t channel() const { return uint32_t(snd >> 53) & (kMaxChannels - 1); }
  WEFT_HOST_DEVICE_INLINE bool valid() const { return (snd & kValidBit) != 0; }
};
static_assert(sizeof(ProxyTrigger) == 16 && std::is_trivially_copyable_v<ProxyTrigger>);

struct FifoDeviceHandle {
  ProxyTrigger* triggers = nullptr;        ///< `depth` slots, page-locked host memory mapped here
  uint64_t* head = nullptr;                ///< producers' claim counter (device memory)
  const uint64_t* tail = nullptr;          ///< proxy's counter (page-locked, mapped)
  const volatile uint32_t* error = nullptr;  ///< proxy's error flag (page-locked, mapped)
  uint64_t depth = 0;

#if WEFT_DEVICE_CODE
  /// Any thread: waits (bounded) until the proxy's counter exceeds `index`.
  WEFT_DEVICE_INLINE WaitResult wait_tail(uint64_t index, const Deadline& d) const {
    bool failed = false;
    uint32_t n = 0;
    WaitResult r = spin_until(
        [&] {
          if (ld_acquire_sys(tail) > index) return true;
          if ((++n & 63u) == 0) failed = *error != 0;  // host memory: read it now and then
          return failed;
        },
        d);
    return failed ? WaitResult::Aborted : r;
  }
  /// Any thread: appends one trigger and returns its index in `index`. Waits (bounded)
  /// while the FIFO is full.
  WEFT_DEVICE_INLINE WaitResult push(const ProxyTrigger& t, uint64_t& index, const Deadline& d) {
    index = atomicAdd(reinterpret_cast<unsigned long long*>(head), 1ull);
    if (index >= depth) {
      WaitResult r = wait_tail(index - depth, d);
      if (r != WaitResult::Ok) return r;
    }
    ProxyTrigger* slot = triggers + index % depth;
    *reinterpret_cast<volatile uint64_t*>(&slot->fst) = t.fst;
    st_release_sys(&slot->snd, t.snd);
    return WaitResult::Ok;
  }
#endif
};
static_assert(std::is_trivially_copyable_v<FifoDeviceHandle>);

}  // namespace weft::device
