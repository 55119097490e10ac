// Thread groups: who calls a device function together. A group is `size` threads with
// ranks 0..size-1 inside it; copies stride their 16-byte vectors over the group.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"

namespace weft::device {

struct ThreadGroup {
  uint32_t rank = 0;  ///< this thread's index in the group
  uint32_t size = 1;  ///< threads in the group

#if WEFT_DEVICE_CODE
  /// All threads of the calling block.
  WEFT_DEVICE_INLINE static ThreadGroup block() { return {threadIdx.x, blockDim.x}; }
  /// The calling thread's warp.
  WEFT_DEVICE_INLINE static ThreadGroup warp() { return {threadIdx.x & 31u, 32u}; }
  /// Threads [first, first + count) of the block; callers outside it get size 0.
  WEFT_DEVICE_INLINE static ThreadGroup slice(uint32_t first, uint32_t count) {
    uint32_t t = threadIdx.x;
    return t >= first && t < first + count ? ThreadGroup{t - first, count} : ThreadGroup{0, 0};
  }
#endif
};

}  // namespace weft::device
