// Copies spread over a thread group: 16-byte vector accesses when both ends allow it,
// four vectors in flight per thread, then the tail. Called by every thread of the group
// with the same arguments; no synchronization inside.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"
#include "weft/device/thread_group.hpp"

#if WEFT_DEVICE_CODE
namespace weft::device {

/// Copies `bytes` from `src` to `dst` (either may be in a peer's memory). Unaligned ends
/// fall back to 4-byte or byte accesses.
WEFT_DEVICE_INLINE void copy_bytes(void* dst, const void* src, uint64_t bytes, ThreadGroup g) {
  if (g.size == 0) return;
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  uint64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15u) == 0) {
    const uint64_t nvec = bytes / 16;
    uint4* dv = reinterpret_cast<uint4*>(d);
    const uint4* sv = reinterpret_cast<const uint4*>(s);
    constexpr uint32_t kUnroll = 4;
    uint64_t i = g.rank;
    for (; i + (kUnroll - 1) * g.size < nvec; i += kUnroll * g.size) {
      uint4 v[kUnroll];
#pragma unroll
      for (uint32_t u = 0; u < kUnroll; ++u) v[u] = sv[i + u * g.size];
#pragma unroll
      for (uint32_t u = 0; u < kUnroll; ++u) dv[i + u * g.size] = v[u];
    }
    for (; i < nvec; i += g.size) dv[i] = sv[i];
    done = nvec * 16;
  } else if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 3u) == 0) {
    const uint64_t nw = bytes / 4;
    for (uint64_t i = g.rank; i < nw; i += g.size)
      reinterpret_cast<uint32_t*>(d)[i] = reinterpret_cast<const uint32_t*>(s)[i];
    done = nw * 4;
  }
  for (uint64_t i = done + g.rank; i < bytes; i += g.size) d[i] = s[i];
}

}  // namespace weft::device
#endif
