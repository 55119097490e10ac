// The one-shot kernel (exec/oneshot.hpp says what it does and why it is safe without
// resets). Thread block b covers words [b * wpb, (b + 1) * wpb) of the payload; thread t
// of it the words t, t + nthreads, ... (at most kOneShotWordsPerThread), which it sends to
// every peer and then receives from every peer, so its own values stay in registers and
// in-place calls need no ordering between threads.
#pragma once

#include <cstdint>
#include <type_traits>

#include "exec/oneshot.hpp"
#include "exec/reduce_ops.cuh"
#include "weft/device/atomics.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/wait.hpp"

namespace weft::exec {

constexpr int kW = kOneShotWordsPerThread;

/// Every element of the word divided by `d`, as divide_kernel does it (so that the one-shot
/// path's avg is bit-identical to the interpreter's sum + division).
template <typename T>
WEFT_DEVICE_INLINE uint64_t oneshot_divide(uint64_t x, int d) {
  constexpr int kN = 8 / sizeof(T);
  T* e = reinterpret_cast<T*>(&x);
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>)
      e[i] = static_cast<T>(static_cast<float>(e[i]) / static_cast<float>(d));
    else
      e[i] = static_cast<T>(e[i] / static_cast<T>(d));
  }
  return x;
}

/// The first thread to time out claims the error record and fills it in.
WEFT_DEVICE_INLINE void oneshot_record(const OneShotArgs& a, device::WaitResult r, int peer, uint32_t flag,
                                       uint64_t start_ns) {
  if (r != device::WaitResult::Timeout) return;  // aborted: someone else reported
  if (atomicCAS(a.error_claim, 0u, 1u) != 0u) return;
  ErrorRecord* e = a.error;
  e->rank = a.rank;
  e->tb = static_cast<int32_t>(blockIdx.x);
  e->slot = 0;
  e->prim = a.mode == kOneShotAllGather ? kRecv : kRecvReduceCopy;
  e->what = kWaitPacket;
  e->peer = peer;
  e->mb = 0;
  e->dep_tb = -1;
  e->expected = flag;
  e->seen = 0;
  e->waited_s = static_cast<double>(device::globaltimer() - start_ns) * 1e-9;
  __threadfence_system();
  e->valid = 1;
  __threadfence_system();
}

template <typename T>
__global__ void __launch_bounds__(kOneShotThreads) oneshot_kernel(const __grid_constant__ OneShotArgs a) {
  __shared__ uint64_t s_epoch;
  const int b = static_cast<int>(blockIdx.x);
  const uint64_t total = (a.bytes + 7) / 8;
  const uint64_t lo = static_cast<uint64_t>(b) * a.words_per_block;
  const uint64_t hi = lo + a.words_per_block < total ? lo + a.words_per_block : total;
  const uint32_t nth = blockDim.x;
  const int R = a.nranks, me = a.rank;

  // Own words first (ReduceScatter: this rank's chunk of the input): their loads overlap
  // the epoch's.
  const char* own_src = a.mode == kOneShotReduceScatter ? a.in + static_cast<uint64_t>(me) * a.bytes : a.in;
  uint64_t own[kW];
#pragma unroll
  for (int u = 0; u < kW; ++u) {
    const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
    own[u] = w < hi ? device::load_word(own_src, w * 8, a.bytes) : 0;
  }
  if (threadIdx.x == 0) {
    // Read and advance this block's epoch at once: the next launch on the stream (the
    // only one that may read it) starts after this kernel ends.
    uint64_t* ep = a.epochs + b;
    const uint64_t e = *reinterpret_cast<volatile uint64_t*>(ep);
    *reinterpret_cast<volatile uint64_t*>(ep) = e + 1;
    s_epoch = e;
  }
  __syncthreads();
  const uint64_t epoch = s_epoch;
  const uint32_t flag = static_cast<uint32_t>(epoch + 1);
  const int parity = static_cast<int>(epoch & 1);
  const uint64_t start_ns = device::globaltimer();
  const device::Deadline dl = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  // Send to every peer, nearest-next first so that the ranks spread over the links.
  for (int i = 1; i < R; ++i) {
    const int p = me + i < R ? me + i : me + i - R;
    device::LLPacket* dst =
        reinterpret_cast<device::LLPacket*>(a.peer_area[p] + oneshot_region(me, parity, b)) - lo;
    const char* src = a.mode == kOneShotReduceScatter ? a.in + static_cast<uint64_t>(p) * a.bytes : nullptr;
#pragma unroll
    for (int u = 0; u < kW; ++u) {
      const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
      if (w < hi) device::ll_write(dst + w, src != nullptr ? device::load_word(src, w * 8, a.bytes) : own[u], flag);
    }
  }

  // Receive from every rank in rank order (own values in place of this rank's).
  uint64_t acc[kW];
  bool failed = false;
  for (int p = 0; p < R && !failed; ++p) {
    uint64_t x[kW];
    if (p == me) {
#pragma unroll
      for (int u = 0; u < kW; ++u) x[u] = own[u];
    } else {
      const device::LLPacket* src =
          reinterpret_cast<const device::LLPacket*>(a.area + oneshot_region(p, parity, b)) - lo;
      bool ready[kW];
#pragma unroll
      for (int u = 0; u < kW; ++u) {
        ready[u] = lo + threadIdx.x + static_cast<uint64_t>(u) * nth >= hi;
        x[u] = 0;
      }
      // All of this thread's packets are polled together: their loads overlap.
      for (uint32_t spins = 0;; ++spins) {
        bool all = true;
#pragma unroll
        for (int u = 0; u < kW; ++u)
          if (!ready[u]) {
            ready[u] = device::ll_try_read(src + lo + threadIdx.x + static_cast<uint64_t>(u) * nth, flag, x[u]);
            all &= ready[u];
          }
        if (all) break;
        if ((spins & 255u) == 255u) {
          const device::WaitResult r = device::check_deadline(dl, (spins & 65535u) == 65535u);
          if (r != device::WaitResult::Ok) {
            oneshot_record(a, r, p, flag, start_ns);
            failed = true;
            break;
          }
        }
      }
      if (failed) break;
    }
    if (a.mode == kOneShotAllGather) {
      char* out = a.out + static_cast<uint64_t>(p) * a.bytes;
      // In place, this rank's part of the output is its input already.
      if (p == me && out == a.in) continue;
#pragma unroll
      for (int u = 0; u < kW; ++u) {
        const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
        if (w < hi) device::store_word(out, w * 8, a.bytes, x[u]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kW; ++u) acc[u] = p == 0 ? x[u] : combine8<T>(a.op, acc[u], x[u]);
    }
  }
  if (failed || a.mode == kOneShotAllGather) return;
#pragma unroll
  for (int u = 0; u < kW; ++u) {
    const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
    if (w >= hi) continue;
    const uint64_t v = divides(a.op) ? oneshot_divide<T>(acc[u], R) : acc[u];
    device::store_word(a.out, w * 8, a.bytes, v);
  }
}

}  // namespace weft::exec
