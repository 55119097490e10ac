// Packets that carry data and a flag in one store, so a receiver polls the data itself
// instead of a separate signal (the LL and LL128 protocols).
//
// LL: a 16-byte packet holds 8 bytes of data and the 4-byte flag twice; one thread writes
// it with one 16-byte store, and a reader accepts it once both flags equal the value it
// expects (each 8-byte half arrives whole). Half the bytes on the wire are data.
//
// LL128: a 128-byte line holds 120 bytes of data and an 8-byte flag in its last word; the
// eight lanes of a warp that share a line each store 16 bytes in the same instruction, and
// a reader accepts the line once the flag lane sees the expected value; 15/16 of the bytes
// are data. Lane j (0..7) of a line stores bytes [16j, 16j + 16) of it: data bytes
// [120 l + 16j, 120 l + 16j + 16) of the piece for j < 7, and for j = 7 eight data bytes
// (120 l + 112 ..) then the flag (ll128_line_offset, ll128_data_offset).
//
// The ordering LL128 relies on (and nothing weaker would do): the eight 16-byte stores one
// warp instruction makes to one 128-byte-aligned line travel as one 128-byte write, and the
// eight 16-byte volatile loads one warp instruction makes of such a line read it in one
// access, so a reader whose flag lane sees the new flag sees the same write's data in the
// other seven lanes of that load. No fence orders the data before the flag. This holds
// within one GPU (the line is one L2 sector group) and over NVLink on the GPUs NCCL enables
// its LL128 protocol for (Hopper among them); it does not hold over PCIe (writes may split
// and reorder) nor across the network, where weft runs Simple instead. Lines must therefore
// start on 128-byte boundaries (weft's staging slots do: runtime/collectives.cpp checks).
//
// Flags must differ between successive uses of a buffer (weft uses a message counter + 1),
// and never be 0, which is what fresh (zeroed) buffers hold.
#pragma once

#include <cstdint>

#include "weft/device/atomics.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/thread_group.hpp"
#include "weft/device/wait.hpp"

namespace weft::device {

struct alignas(16) LLPacket {
  uint32_t data_lo;
  uint32_t flag_lo;
  uint32_t data_hi;
  uint32_t flag_hi;
};
static_assert(sizeof(LLPacket) == 16);

/// Data bytes per LL128 line and line size.
constexpr uint32_t kLL128LineBytes = 128;
constexpr uint32_t kLL128DataBytes = 120;

/// Packet-buffer bytes needed for `bytes` of data.
WEFT_HOST_DEVICE_INLINE uint64_t ll_buffer_bytes(uint64_t bytes) { return (bytes + 7) / 8 * 16; }
WEFT_HOST_DEVICE_INLINE uint64_t ll128_buffer_bytes(uint64_t bytes) {
  return (bytes + kLL128DataBytes - 1) / kLL128DataBytes * kLL128LineBytes;
}

/// LL128 lines that carry `bytes` of data.
WEFT_HOST_DEVICE_INLINE uint64_t ll128_lines(uint64_t bytes) { return (bytes + kLL128DataBytes - 1) / kLL128DataBytes; }
/// Byte offset of lane `lane8` (0..7)'s 16 bytes within a piece's lines.
WEFT_HOST_DEVICE_INLINE uint64_t ll128_line_offset(uint64_t line, uint32_t lane8) {
  return line * kLL128LineBytes + lane8 * 16u;
}
/// Offset of the data that lane `lane8` of `line` carries (16 bytes, 8 for lane 7).
WEFT_HOST_DEVICE_INLINE uint64_t ll128_data_offset(uint64_t line, uint32_t lane8) {
  return line * kLL128DataBytes + lane8 * 16u;
}
/// The flag of message `count` (0, 1, ...) of a staging slot: an odd multiple of count + 1,
/// so distinct for distinct messages and never 0. Not count + 1 itself: the executor's LL128
/// lines live in the Simple staging slots, whose earlier contents are user data, where a small
/// integer at a flag word is common and a value like this one is not.
WEFT_HOST_DEVICE_INLINE uint64_t ll128_flag(uint64_t count) { return (count + 1) * 0x9E3779B97F4A7C15ull; }

#if WEFT_DEVICE_CODE
/// One thread writes one packet.
WEFT_DEVICE_INLINE void ll_write(LLPacket* p, uint64_t data, uint32_t flag) {
  st_volatile_v4(p, static_cast<uint32_t>(data), flag, static_cast<uint32_t>(data >> 32), flag);
}

/// One thread reads one packet; true (and `data` set) when both flags equal `flag`.
WEFT_DEVICE_INLINE bool ll_try_read(const LLPacket* p, uint32_t flag, uint64_t& data) {
  uint32_t a, f1, b, f2;
  ld_volatile_v4(p, a, f1, b, f2);
  data = static_cast<uint64_t>(a) | static_cast<uint64_t>(b) << 32;
  return f1 == flag && f2 == flag;
}

/// Reads 8 bytes of `src` at byte offset `off` of a `bytes`-long range, zero past its end.
WEFT_DEVICE_INLINE uint64_t load_word(const char* src, uint64_t off, uint64_t bytes) {
  if (off + 8 <= bytes && (reinterpret_cast<uintptr_t>(src + off) & 7u) == 0)
    return *reinterpret_cast<const uint64_t*>(src + off);
  uint64_t v = 0;
  for (uint32_t i = 0; i < 8 && off + i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(src[off + i])) << (8 * i);
  return v;
}

/// Writes the bytes of `v` that fall inside `bytes` to `dst` at byte offset `off`.
WEFT_DEVICE_INLINE void store_word(char* dst, uint64_t off, uint64_t bytes, uint64_t v) {
  if (off + 8 <= bytes && (reinterpret_cast<uintptr_t>(dst + off) & 7u) == 0) {
    *reinterpret_cast<uint64_t*>(dst + off) = v;
    return;
  }
  for (uint32_t i = 0; i < 8 && off + i < bytes; ++i) dst[off + i] = static_cast<char>(v >> (8 * i));
}

/// The group writes `bytes` of `src` as LL packets to `dst` (often a peer's buffer).
WEFT_DEVICE_INLINE void ll_put(LLPacket* dst, const void* src, uint64_t bytes, uint32_t flag, ThreadGroup g) {
  const uint64_t words = (bytes + 7) / 8;
  for (uint64_t w = g.rank; w < words; w += g.size)
    ll_write(dst + w, load_word(static_cast<const char*>(src), w * 8, bytes), flag);
}

/// The group waits for `bytes` of LL packets in `src` (flag `flag`) and writes the data to
/// `dst`. Each thread waits for its own packets; a thread whose wait fails stops and
/// returns the failure (the caller combines the group's results).
WEFT_DEVICE_INLINE WaitResult ll_get(void* dst, const LLPacket* src, uint64_t bytes, uint32_t flag, ThreadGroup g,
                                     const Deadline& d) {
  const uint64_t words = (bytes + 7) / 8;
  for (uint64_t w = g.rank; w < words; w += g.size) {
    uint64_t v = 0;
    WaitResult r = spin_until([&] { return ll_try_read(src + w, flag, v); }, d);
    if (r != WaitResult::Ok) return r;
    store_word(static_cast<char*>(dst), w * 8, bytes, v);
  }
  return WaitResult::Ok;
}

/// The group (whole warps, group rank 0 on a warp boundary) writes `bytes` of `src` as LL128 lines to `dst`.
WEFT_DEVICE_INLINE void ll128_put(void* dst, const void* src, uint64_t bytes, uint64_t flag, ThreadGroup g) {
  const uint64_t lines = (bytes + kLL128DataBytes - 1) / kLL128DataBytes;
  const uint32_t lane8 = g.rank & 7u;
  const char* s = static_cast<const char*>(src);
  // Each warp covers 4 lines per step; every lane of the warp runs the same number of steps.
  const uint32_t warp = g.rank / 32, nwarps = (g.size + 31) / 32;
  for (uint64_t base = static_cast<uint64_t>(warp) * 4; base < lines; base += static_cast<uint64_t>(nwarps) * 4) {
    const uint64_t line = base + ((g.rank & 31u) >> 3);
    if (line < lines) {
      const uint64_t off = line * kLL128DataBytes + lane8 * 16;
      uint64_t a = load_word(s, off, bytes);
      uint64_t b = lane8 == 7 ? flag : load_word(s, off + 8, bytes);
      char* p = static_cast<char*>(dst) + line * kLL128LineBytes + lane8 * 16;
      st_volatile_v4(p, static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
                     static_cast<uint32_t>(b >> 32));
    }
  }
}

/// The group (whole warps, group rank 0 on a warp boundary) waits for `bytes` of LL128 lines in `src` and writes the data
/// to `dst`. Returns the failure if a wait fails (the whole warp stops together).
WEFT_DEVICE_INLINE WaitResult ll128_get(void* dst, const void* src, uint64_t bytes, uint64_t flag, ThreadGroup g,
                                        const Deadline& d) {
  const uint64_t lines = (bytes + kLL128DataBytes - 1) / kLL128DataBytes;
  const uint32_t lane = g.rank & 31u, lane8 = lane & 7u;
  const uint32_t warp = g.rank / 32, nwarps = (g.size + 31) / 32;
  char* out = static_cast<char*>(dst);
  for (uint64_t base = static_cast<uint64_t>(warp) * 4; base < lines; base += static_cast<uint64_t>(nwarps) * 4) {
    const uint64_t line = base + (lane >> 3);
    const bool mine = line < lines;
    const char* p = static_cast<const char*>(src) + line * kLL128LineBytes + lane8 * 16;
    uint64_t a = 0, b = 0;
    // The whole warp polls together (the flag is shuffled from lane 7 of each line), so the
    // timeout decision is lane 0's, shared with the warp.
    for (uint32_t spins = 0;;) {
      uint32_t x0 = 0, x1 = 0, x2 = 0, x3 = 0;
      if (mine) ld_volatile_v4(p, x0, x1, x2, x3);
      a = static_cast<uint64_t>(x0) | static_cast<uint64_t>(x1) << 32;
      b = static_cast<uint64_t>(x2) | static_cast<uint64_t>(x3) << 32;
      uint64_t f = __shfl_sync(0xffffffffu, b, (lane & ~7u) | 7u);
      if (__all_sync(0xffffffffu, !mine || f == flag)) break;
      if ((++spins & 255u) == 0) {
        int st = lane == 0 ? static_cast<int>(check_deadline(d, (spins & 65535u) == 0)) : 0;
        st = __shfl_sync(0xffffffffu, st, 0);
        if (st != 0) return static_cast<WaitResult>(st);
      }
    }
    if (mine) {
      const uint64_t off = line * kLL128DataBytes + lane8 * 16;
      store_word(out, off, bytes, a);
      if (lane8 != 7) store_word(out, off + 8, bytes, b);
    }
  }
  return WaitResult::Ok;
}
#endif

}  // namespace weft::device
