// The one-shot kernel (exec/oneshot.hpp says what it does and why it is safe without
// resets). Thread block b covers words [b * wpb, (b + 1) * wpb) of the payload; thread t
// of it the words t, t + nthreads, ... (at most W), which it sends to every peer and then
// receives from every peer, so its own values stay in registers and in-place calls need no
// ordering between threads. Two instantiations per type: W = 1 (one word per thread, the
// small calls) polls every peer's packet at once, so the wait costs one memory latency
// after the last packet lands whatever the rank count; W = kOneShotWordsPerThread polls the
// peers one after another in rank order (the registers of W x peers packets would spill),
// which adds a latency per peer (OneShotArgs::one_word picks; WEFT_ONESHOT_POLL).
#pragma once

#include <cstdint>
#include <type_traits>

#include "exec/oneshot.hpp"
#include "exec/reduce_ops.cuh"
#include "weft/device/atomics.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/wait.hpp"

namespace weft::exec {

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
  e->prim = oneshot_stores_blocks(a.mode) ? kRecv : kRecvReduceCopy;
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

/// x[0] (op) x[1] (op) ... x[R - 1], in rank order.
template <typename T, int Op>
WEFT_DEVICE_INLINE uint64_t oneshot_fold(const uint64_t (&x)[kOneShotMaxRanks], int R) {
  uint64_t acc = x[0];
#pragma unroll
  for (int p = 1; p < kOneShotMaxRanks; ++p)
    if (p < R) acc = apply8<T, Op>(acc, x[p]);
  return acc;
}

/// The word of every rank, in rank order, as the reduction (or AllGather's copy) uses them.
template <typename T>
WEFT_DEVICE_INLINE void oneshot_finish_all(const OneShotArgs& a, const uint64_t (&x)[kOneShotMaxRanks], uint64_t w) {
  const int R = a.nranks;
  if (a.mode == kOneShotBroadcast) {  // the root's word; the root itself only out of place
    if (a.rank == a.root && a.out == a.in) return;
    // Masks, not x[a.root] (nor a select the compiler turns back into one): a run-time
    // index would put x in local memory.
    uint64_t v = 0;
#pragma unroll
    for (int p = 0; p < kOneShotMaxRanks; ++p) v |= x[p] & (0ull - static_cast<uint64_t>(p == a.root));
    device::store_word(a.out, w * 8, a.bytes, v);
    return;
  }
  if (a.mode == kOneShotReduce && a.rank != a.root) return;  // only the root has an output
  if (oneshot_stores_blocks(a.mode)) {
    // In place, this rank's block of the output is its input's already (AllGather: the input;
    // AllToAll: the input's block for itself).
    const char* own = a.mode == kOneShotAllToAll ? a.in + static_cast<uint64_t>(a.rank) * a.bytes : a.in;
#pragma unroll
    for (int p = 0; p < kOneShotMaxRanks; ++p) {
      if (p >= R) break;
      char* out = a.out + static_cast<uint64_t>(p) * a.bytes;
      if (p == a.rank && out == own) continue;
      device::store_word(out, w * 8, a.bytes, x[p]);
    }
    return;
  }
  // The operation chosen once, outside the ranks' loop: the path a call runs is one
  // straight run of code (fewer instruction-cache lines than a switch per rank).
  uint64_t acc;
  switch (a.op) {
    case kOpProd: acc = oneshot_fold<T, kOpProd>(x, R); break;
    case kOpMax: acc = oneshot_fold<T, kOpMax>(x, R); break;
    case kOpMin: acc = oneshot_fold<T, kOpMin>(x, R); break;
    default: acc = oneshot_fold<T, kOpSum>(x, R); break;
  }
  device::store_word(a.out, w * 8, a.bytes, divides(a.op) ? oneshot_divide<T>(acc, R) : acc);
}

/// W = 1: this thread's word `w` (in the block's range when `mine`) from every peer, all
/// peers' packets polled together; `own` stands for this rank's. False when the wait failed.
template <typename T>
WEFT_DEVICE_INLINE bool oneshot_receive_all(const OneShotArgs& a, uint64_t own, uint64_t w, bool mine, uint64_t lo,
                                            int parity, uint32_t flag, const device::Deadline& dl, uint64_t start_ns) {
  const int R = a.nranks, me = a.rank, b = static_cast<int>(blockIdx.x);
  uint64_t x[kOneShotMaxRanks];
  uint32_t pending = 0;
#pragma unroll
  for (int p = 0; p < kOneShotMaxRanks; ++p) {
    x[p] = own;
    if (mine && p < R && p != me) pending |= 1u << p;
  }
  for (uint32_t spins = 0; pending != 0; ++spins) {
#pragma unroll
    for (int p = 0; p < kOneShotMaxRanks; ++p)
      if ((pending >> p) & 1u) {
        const device::LLPacket* src =
            reinterpret_cast<const device::LLPacket*>(a.area + oneshot_region(p, parity, b)) + (w - lo);
        if (device::ll_try_read(src, flag, x[p])) pending &= ~(1u << p);
      }
    if (pending != 0 && (spins & 255u) == 255u) {
      const device::WaitResult r = device::check_deadline(dl, (spins & 65535u) == 65535u);
      if (r != device::WaitResult::Ok) {
        oneshot_record(a, r, __ffs(static_cast<int>(pending)) - 1, flag, start_ns);
        return false;
      }
    }
  }
  if (mine) oneshot_finish_all<T>(a, x, w);
  return true;
}

/// W = kOneShotWordsPerThread: the peers one after another in rank order.
template <typename T, int W>
WEFT_DEVICE_INLINE void oneshot_receive_seq(const OneShotArgs& a, const uint64_t (&own)[W], uint64_t lo, uint64_t hi,
                                            int parity, uint32_t flag, const device::Deadline& dl, uint64_t start_ns) {
  const int R = a.nranks, me = a.rank, b = static_cast<int>(blockIdx.x);
  const uint32_t nth = blockDim.x;
  uint64_t acc[W] = {};
  for (int p = 0; p < R; ++p) {
    uint64_t x[W];
    if (p == me) {
#pragma unroll
      for (int u = 0; u < W; ++u) x[u] = own[u];
    } else {
      const device::LLPacket* src =
          reinterpret_cast<const device::LLPacket*>(a.area + oneshot_region(p, parity, b)) - lo;
      bool ready[W];
#pragma unroll
      for (int u = 0; u < W; ++u) {
        ready[u] = lo + threadIdx.x + static_cast<uint64_t>(u) * nth >= hi;
        x[u] = 0;
      }
      // All of this thread's packets are polled together: their loads overlap.
      for (uint32_t spins = 0;; ++spins) {
        bool all = true;
#pragma unroll
        for (int u = 0; u < W; ++u)
          if (!ready[u]) {
            ready[u] = device::ll_try_read(src + lo + threadIdx.x + static_cast<uint64_t>(u) * nth, flag, x[u]);
            all &= ready[u];
          }
        if (all) break;
        if ((spins & 255u) == 255u) {
          const device::WaitResult r = device::check_deadline(dl, (spins & 65535u) == 65535u);
          if (r != device::WaitResult::Ok) {
            oneshot_record(a, r, p, flag, start_ns);
            return;
          }
        }
      }
    }
    if (oneshot_stores_blocks(a.mode)) {
      char* out = a.out + static_cast<uint64_t>(p) * a.bytes;
      // In place, this rank's part of the output is its input already.
      if (p == me && out == (a.mode == kOneShotAllToAll ? a.in + static_cast<uint64_t>(me) * a.bytes : a.in)) continue;
#pragma unroll
      for (int u = 0; u < W; ++u) {
        const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
        if (w < hi) device::store_word(out, w * 8, a.bytes, x[u]);
      }
    } else if (a.mode == kOneShotBroadcast) {
      if (p == a.root) {
#pragma unroll
        for (int u = 0; u < W; ++u) acc[u] = x[u];
      }
    } else {
#pragma unroll
      for (int u = 0; u < W; ++u) acc[u] = p == 0 ? x[u] : combine8<T>(a.op, acc[u], x[u]);
    }
  }
  if (oneshot_stores_blocks(a.mode) || (a.mode == kOneShotReduce && me != a.root)) return;
  if (a.mode == kOneShotBroadcast && me == a.root && a.out == a.in) return;  // in place: nothing to write
#pragma unroll
  for (int u = 0; u < W; ++u) {
    const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
    if (w >= hi) continue;
    const uint64_t v = divides(a.op) ? oneshot_divide<T>(acc[u], R) : acc[u];
    device::store_word(a.out, w * 8, a.bytes, v);
  }
}

template <typename T, int W>
__global__ void __launch_bounds__(kOneShotThreads, 1) oneshot_kernel(const __grid_constant__ OneShotArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Programmatic dependent launch (WEFT_ONESHOT_PDL): both are no-ops for a kernel launched
  // without the attribute. The wait comes before any load (the previous kernel may have
  // written this call's input, and it advanced the epochs); the trigger lets a dependent
  // launched the same way start its blocks now, to wait in turn for this kernel's end.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  __shared__ uint64_t s_epoch;
  const int b = static_cast<int>(blockIdx.x);
  const uint64_t total = (a.bytes + 7) / 8;
  const uint64_t lo = static_cast<uint64_t>(b) * a.words_per_block;
  const uint64_t hi = lo + a.words_per_block < total ? lo + a.words_per_block : total;
  const uint32_t nth = blockDim.x;
  const int R = a.nranks, me = a.rank;

  // Own words first (ReduceScatter, AllToAll: this rank's chunk of the input): their loads
  // overlap the epoch's.
  // Broadcast's non-roots have no input: they send zeros.
  const char* own_src = oneshot_sends_blocks(a.mode) ? a.in + static_cast<uint64_t>(me) * a.bytes : a.in;
  const bool has_input = a.mode != kOneShotBroadcast || me == a.root;
  uint64_t own[W];
#pragma unroll
  for (int u = 0; u < W; ++u) {
    const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
    own[u] = w < hi && has_input ? device::load_word(own_src, w * 8, a.bytes) : 0;
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
  // Send to every peer, nearest-next first so that the ranks spread over the links.
  for (int i = 1; i < R; ++i) {
    const int p = me + i < R ? me + i : me + i - R;
    device::LLPacket* dst =
        reinterpret_cast<device::LLPacket*>(a.peer_area[p] + oneshot_region(me, parity, b)) - lo;
    const char* src = oneshot_sends_blocks(a.mode) ? a.in + static_cast<uint64_t>(p) * a.bytes : nullptr;
#pragma unroll
    for (int u = 0; u < W; ++u) {
      const uint64_t w = lo + threadIdx.x + static_cast<uint64_t>(u) * nth;
      if (w < hi) device::ll_write(dst + w, src != nullptr ? device::load_word(src, w * 8, a.bytes) : own[u], flag);
    }
  }

  // The deadline after the sends: reading the timer and the sum that depends on it would
  // hold the (in-order) thread before its stores.
  const uint64_t start_ns = device::globaltimer();
  const device::Deadline dl = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  if constexpr (W == 1) {
    const uint64_t w = lo + threadIdx.x;
    oneshot_receive_all<T>(a, own[0], w, w < hi, lo, parity, flag, dl, start_ns);
  } else {
    oneshot_receive_seq<T, W>(a, own, lo, hi, parity, flag, dl, start_ns);
  }
}

}  // namespace weft::exec
