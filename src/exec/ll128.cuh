// The interpreter's LL128 data path (weft/device/packet.hpp gives the line layout and the
// ordering it relies on). One call moves one piece of a message: `in` and `out` are the
// piece's lines in a staging slot (the receiver's Simple slot: LL128 lines never share memory
// with LL packets, whose flags user data could imitate), `src` and `dst` user or scratch
// memory. Included by executor_kernel.cuh.
#pragma once

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "exec/reduce_ops.cuh"
#include "weft/device/atomics.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/wait.hpp"

namespace weft::exec {

/// LL128: the block (whole warps) moves `bytes` through LL128 lines; `in` lines are polled
/// (flag rflag), `out` lines written (flag sflag). Every line of the piece travels
/// (wire_bytes), so that sender and receiver count the same lines whatever each side's
/// buffers hold; user memory is touched for `bytes` only. Eight lanes serve one line, a warp
/// four lines per group, and each warp keeps kU groups in flight. A failed wait is the
/// warp's (lane 0 decides for all), returned by every lane of it. The op is a run-time
/// value (combine8) and the staging addresses are computed here, so that the interpreter
/// calls this from one place with few live values (each call site costs it registers).
template <typename T>
__device__ __noinline__ device::WaitResult move_ll128(int op, int prim, const char* src, char* dst,
                                                      const ChannelHandle* rc, const ChannelHandle* sc, uint64_t rpos,
                                                      uint64_t spos, uint64_t line_off, uint64_t bytes,
                                                      uint64_t wire_bytes, device::Deadline dl) {
  const char* in = rc != nullptr ? rc->recv_slot(rpos) + line_off : nullptr;
  char* out = sc != nullptr ? sc->send_slot(spos) + line_off : nullptr;
  const uint64_t rflag = device::ll128_flag(rpos), sflag = device::ll128_flag(spos);
  constexpr uint32_t kU = 2;
  constexpr uint32_t kFull = 0xffffffffu;
  const uint64_t lines = device::ll128_lines(wire_bytes);
  const uint32_t lane = threadIdx.x & 31u, lane8 = lane & 7u, sub = lane >> 3;
  const uint64_t warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  // `base` depends on the warp only: every lane of a warp runs the same iterations, so the
  // warp-wide shuffles and votes below see all 32 lanes.
  for (uint64_t base = warp * 4 * kU; base < lines; base += nwarps * 4 * kU) {
    uint64_t lo[kU], hi[kU];
#pragma unroll
    for (uint32_t u = 0; u < kU; ++u) lo[u] = hi[u] = 0;
    if (in != nullptr) {
      bool ready[kU];  // the same in the eight lanes of a line (its flag is shuffled to them)
#pragma unroll
      for (uint32_t u = 0; u < kU; ++u) ready[u] = base + u * 4 + sub >= lines;
      for (uint32_t spins = 0;; ++spins) {
        bool all = true;
#pragma unroll
        for (uint32_t u = 0; u < kU; ++u) {
          if (!ready[u]) {
            // One instruction loads the whole line: data and flag of the same write.
            uint32_t x0, x1, x2, x3;
            device::ld_volatile_v4(in + device::ll128_line_offset(base + u * 4 + sub, lane8), x0, x1, x2, x3);
            lo[u] = static_cast<uint64_t>(x0) | static_cast<uint64_t>(x1) << 32;
            hi[u] = static_cast<uint64_t>(x2) | static_cast<uint64_t>(x3) << 32;
          }
          const uint64_t f = __shfl_sync(kFull, hi[u], lane | 7u);
          ready[u] = ready[u] || f == rflag;
          all &= ready[u];
        }
        if (__all_sync(kFull, all)) break;
        if ((spins & 255u) == 255u) {
          int st = lane == 0 ? static_cast<int>(device::check_deadline(dl, (spins & 65535u) == 65535u)) : 0;
          st = __shfl_sync(kFull, st, 0);
          if (st != 0) return static_cast<device::WaitResult>(st);
        }
      }
    }
#pragma unroll
    for (uint32_t u = 0; u < kU; ++u) {
      const uint64_t line = base + u * 4 + sub;
      if (line >= lines) continue;  // the same for the line's eight lanes: its store stays one instruction
      const uint64_t off = device::ll128_data_offset(line, lane8);
      const bool two = lane8 != 7u;  // lane 7 carries 8 data bytes and the flag
      uint64_t v[2] = {0, 0};
      const uint64_t x[2] = {lo[u], hi[u]};
#pragma unroll
      for (uint32_t w = 0; w < 2; ++w) {
        if (w == 1 && !two) break;
        const uint64_t o = off + w * 8;
        const uint64_t sv = src != nullptr ? device::load_word(src, o, bytes) : 0;
        switch (prim) {
          case kSend:
          case kCopy: v[w] = sv; break;
          case kRecv:
          case kRecvCopySend: v[w] = x[w]; break;
          case kReduce: v[w] = combine8<T>(op, device::load_word(dst, o, bytes), sv); break;
          default: v[w] = combine8<T>(op, sv, x[w]); break;
        }
        if (dst != nullptr) device::store_word(dst, o, bytes, v[w]);
      }
      if (out != nullptr) {
        const uint64_t h = two ? v[1] : sflag;
        device::st_volatile_v4(out + device::ll128_line_offset(line, lane8), static_cast<uint32_t>(v[0]),
                               static_cast<uint32_t>(v[0] >> 32), static_cast<uint32_t>(h),
                               static_cast<uint32_t>(h >> 32));
      }
    }
  }
  return device::WaitResult::Ok;
}

}  // namespace weft::exec
