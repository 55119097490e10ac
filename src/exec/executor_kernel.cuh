// The plan interpreter: one CUDA block per thread block of the rank's plan (or, with
// ExecArgs::roles > 1, several thread blocks per CUDA block, each on its own warps: "roles"),
// walking its slots and micro-batches (exec/exec_plan.hpp says how addresses are computed, and
// exec/plan_lowering.hpp how connections are numbered).
//
// Connections are memory-channel FIFOs (weft/device/memory_channel.hpp: the protocol and
// who owns which counter). At the start of a launch the block's threads load, one
// connection each and all at once, the position of every connection end of the thread
// block and the peer's count there (send end: acked; receive end: posted) into shared
// memory (ConnState): the invocations then read positions from there, and a wait loads the
// peer's count only when the one seen last does not already allow the message. Per
// invocation (slot s, micro-batch k), thread 0 waits, bounded by the deadline:
//   - on every dependency's counter to reach base + k + 1 (base: the counters' common
//     value when the launch started; counters only grow, so no reset between launches or
//     graph replays);
//   - if s receives (Simple): wait_posted_cached for the next message;
//   - if s sends: wait_credit_cached for a free staging slot.
// Then the whole block (role) moves the data; then thread 0 publishes: post at the receiver
// (always, so that Simple and LL messages share one count), ack at the sender, and the
// slot's own counter; it advances the cached positions, and stores them where the next
// launch reads them (the post and the ack do). With ExecArgs::post_thread (WEFT_POST_THREAD)
// thread 32 publishes instead (thread 0 still advances the positions), so that one message's
// fence overlaps thread 0's waits for the next. LL receives poll their packets instead of
// waiting for the post. Launched with a posting warp (PostWarp, WEFT_POST_WARP), that warp
// publishes instead, while the block's movers go on with the next invocation. Invocations run
// in exec::InvocationOrder.
// A wait that times out records rank, thread block, slot, micro-batch and what it waited
// for in host-mapped memory and ends the block; the other blocks see the claim and end too.
#pragma once

#include <cstdint>
#include <type_traits>

#include "exec/exec_plan.hpp"
#include "exec/ll128.cuh"
#include "exec/reduce_ops.cuh"
#include "ir/trace_record.hpp"
#include "weft/device/atomics.hpp"
#include "weft/device/packet.hpp"
#include "weft/device/wait.hpp"

namespace weft::exec {

constexpr int kMaxThreads = 512;

/// What the posting warp (exec_kernel's PostWarp) publishes for one invocation, written by
/// thread 0 once the invocation's waits succeeded; `stop` ends the posting warp.
struct PostRecord {
  const ChannelHandle* sc;  ///< null: nothing sent
  const ChannelHandle* rc;  ///< null: nothing received
  uint64_t spos;
  uint64_t rpos;
  uint64_t* counter;        ///< null: no thread block waits on the slot
  uint64_t value;
  int stop;
};

/// Written by thread 0 (or, for proc_status, by a thread whose packet wait failed) and read
/// by every thread after a barrier. The statuses alternate between two copies per
/// invocation, so thread 0 writing the next invocation's status never races with a slow
/// thread still reading this one's; start_status is the launch's own, for the same reason
/// (the first invocation writes wait_status[0] while the others may still read it).
struct BlockShared {
  uint64_t base;
  uint64_t rpos;
  uint64_t spos;
  int start_status;
  int wait_status[2];
  int proc_status[2];
  uint64_t trace_t[3];  ///< traced launches: the invocation's first timestamps (TraceRecord)
  uint32_t trace_n;     ///< traced launches: records made so far
  PostRecord post[2];   ///< PostWarp launches: by invocation parity
};

/// The named barrier that joins a PostWarp launch's movers (`movers` threads) and its posting warp.
constexpr uint32_t kPostBarrier = 2;
WEFT_DEVICE_INLINE void post_sync(uint32_t movers) {
  asm volatile("bar.sync %0, %1;" ::"r"(kPostBarrier), "r"(movers + 32) : "memory");
}

/// One connection end's state for the launch, in shared memory (thread 0 of the role reads and
/// advances it; the start of the launch fills it: load_conn_states).
struct ConnState {
  uint64_t pos;   ///< this end's message count (send: posted so far; receive: consumed so far)
  uint64_t peer;  ///< the peer's count seen last (send end: acked; receive end: posted)
};

struct Invocation {
  const ExecArgs* a;
  const DevSlot* slots;  ///< the plan's arrays, inline or in device memory
  const ChannelHandle* conns;
  int32_t cs_bias;       ///< connection c's state is conn_state(iv, c): the dynamic shared array's entry c + cs_bias
  device::Deadline dl;
  uint64_t start_ns;
  int32_t tb;
  int32_t tb_first_slot;
  uint32_t tid;  ///< this thread within its role (the block, or its role's warps: exec_kernel)
  uint32_t nth;  ///< threads of the role
  uint32_t bar;  ///< the role's barrier: 0 (__syncthreads) for a whole block, else its named barrier
};

/// The launch's dynamic shared memory: each role's connection states, `ExecArgs::conn_cache`
/// per role (a shared-space array, so that thread 0 reaches them with 32-bit addresses).
extern __shared__ ConnState exec_conn_states[];

/// Sets where the invocation's connection states are: role `role`'s `per_role` entries, its
/// thread block's connections starting at `conn_begin`.
WEFT_DEVICE_INLINE void set_conn_states(Invocation& iv, uint32_t role, int32_t per_role, int32_t conn_begin) {
  iv.cs_bias = static_cast<int32_t>(role) * per_role - conn_begin;
}
/// Connection `c`'s state (c one of the invocation's thread block's connections).
WEFT_DEVICE_INLINE ConnState& conn_state(const Invocation& iv, int32_t c) { return exec_conn_states[c + iv.cs_bias]; }

/// Every thread of the role, at the start of a launch: fills the thread block's connection
/// states, one connection per thread, so that their loads are in flight together (one
/// memory latency for all, instead of one or two per invocation). The role's barrier that
/// follows orders them before thread 0's reads. A send end is the one with a `signalled`
/// counter (exec/channel_end.cpp).
WEFT_DEVICE_INLINE void load_conn_states(const Invocation& iv, int32_t conn_begin, int32_t nconns) {
  for (uint32_t i = iv.tid; i < static_cast<uint32_t>(nconns); i += iv.nth) {
    const int32_t c = conn_begin + static_cast<int32_t>(i);
    const ChannelHandle& h = iv.conns[c];
    const bool send = h.semaphore.signalled != nullptr;
    const uint64_t pos = send ? h.send_position() : h.recv_position();
    const uint64_t peer = h.peer_count();
    ConnState& st = conn_state(iv, c);
    st.pos = pos;
    st.peer = peer;
  }
}

/// ExecArgs::warm (WEFT_EXEC_WARM): the role's threads read one word of every 64-byte line
/// of the launch's parameters, all at once, before the launch's first barrier, so that
/// thread 0's chain of dependent reads of them afterwards (its thread block, each slot, the
/// slot's connection handles, the geometry) finds them in the constant cache instead of
/// missing once per line, one after another.
WEFT_DEVICE_INLINE void warm_params(const ExecArgs& a, uint32_t tid, uint32_t nth) {
  constexpr uint32_t kLines = static_cast<uint32_t>((sizeof(ExecArgs) + 63) / 64);
  const uint32_t* words = reinterpret_cast<const uint32_t*>(&a);
  for (uint32_t i = tid; i < kLines; i += nth) {
    const uint32_t v = words[i * 16];
    asm volatile("" ::"r"(v));  // keeps the load, and the barrier after it waits for it
  }
}

/// The barrier of the invocation's thread group: barrier 0 over the whole block (as
/// __syncthreads), or its role's named barrier over its warps (bar.sync orders the
/// participating threads' memory accesses as __syncthreads does).
WEFT_DEVICE_INLINE void role_sync(const Invocation& iv) {
  asm volatile("bar.sync %0, %1;" ::"r"(iv.bar), "r"(iv.nth) : "memory");
}

WEFT_DEVICE_INLINE void record_error(const Invocation& iv, device::WaitResult r, int32_t gslot, int32_t prim,
                                     int32_t what, int32_t peer, uint32_t mb, int32_t dep_tb, uint64_t expected,
                                     uint64_t seen) {
  if (r != device::WaitResult::Timeout) return;  // aborted: another block or the host already reported
  const ExecArgs& a = *iv.a;
  if (atomicCAS(a.error_claim, 0u, 1u) != 0u) return;
  ErrorRecord* e = a.error;
  e->rank = a.rank;
  e->tb = iv.tb;
  e->slot = gslot - iv.tb_first_slot;
  e->prim = prim;
  e->what = what;
  e->peer = peer;
  e->mb = static_cast<int32_t>(mb);
  e->dep_tb = dep_tb;
  e->expected = expected;
  e->seen = seen;
  e->waited_s = static_cast<double>(device::globaltimer() - iv.start_ns) * 1e-9;
  __threadfence_system();
  e->valid = 1;
  __threadfence_system();
}

/// Thread 0, traced launches: the record of invocation (gs, k), timestamps from `sh`, the
/// end taken now (before publishing, so that a peer sees the message after this reading).
WEFT_DEVICE_INLINE void trace_invocation(const Invocation& iv, BlockShared& sh, int32_t gs, uint32_t k, bool recvs,
                                         bool sends) {
  const ExecArgs& a = *iv.a;
  TraceBlockHeader* h = trace_block(a.trace, a.trace_cap, iv.tb);
  const uint32_t n = sh.trace_n++;
  if (n < a.trace_cap) {
    TraceRecord* r = reinterpret_cast<TraceRecord*>(h + 1) + n;
    r->wait_ns = sh.trace_t[0];
    r->deps_ns = sh.trace_t[1];
    r->move_ns = sh.trace_t[2];
    r->end_ns = device::globaltimer();
    r->slot = gs;
    r->mb = k;
    r->rpos = recvs ? static_cast<uint32_t>(sh.rpos) : 0u;
    r->spos = sends ? static_cast<uint32_t>(sh.spos) : 0u;
  }
  h->count = n + 1;
}

/// Stores x[0..N) at i, i + nth, ... of o1 and of o2 (either may be null).
template <uint32_t N>
WEFT_DEVICE_INLINE void store_vecs(const uint4 (&x)[N], uint4* o1, uint4* o2, uint64_t i, uint32_t nth) {
  if (o1 != nullptr) {
#pragma unroll
    for (uint32_t u = 0; u < N; ++u) o1[i + u * nth] = x[u];
  }
  if (o2 != nullptr) {
#pragma unroll
    for (uint32_t u = 0; u < N; ++u) o2[i + u * nth] = x[u];
  }
}

/// A thread's last, shorter round (fewer than N vectors left at i, i + nth, ... below nvec):
/// every load issued before the first store, so that the rest costs one memory latency
/// rather than one per vector. b null: a copy. Out of line: inlined, its predicated round
/// made ptxas spill in move_simple and in exec_kernel around it.
template <typename T, int Op, uint32_t N, bool Reduce>
__device__ __noinline__ void move_rest(const uint4* a, const uint4* b, uint4* o1, uint4* o2, uint64_t i,
                                       uint64_t nvec, uint32_t nth) {
  const uint32_t m = static_cast<uint32_t>(div_u64(nvec - i + nth - 1, nth));  // vectors left: 1 .. N - 1
  uint4 x[N], y[N];
#pragma unroll
  for (uint32_t u = 0; u < N; ++u) {
    x[u] = u < m ? device::ld_cg_v4(a + i + u * nth) : make_uint4(0, 0, 0, 0);
    if constexpr (Reduce) y[u] = u < m ? device::ld_cg_v4(b + i + u * nth) : make_uint4(0, 0, 0, 0);
  }
  if constexpr (Reduce) {
#pragma unroll
    for (uint32_t u = 0; u < N; ++u) x[u] = apply16<T, Op>(x[u], y[u]);
  }
#pragma unroll
  for (uint32_t u = 0; u < N; ++u)
    if (u < m) {
      if (o1 != nullptr) o1[i + u * nth] = x[u];
      if (o2 != nullptr) o2[i + u * nth] = x[u];
    }
}

/// The thread group (threads tid of nth: the block, or one role's warps of a block that
/// hosts several plan thread blocks) moves n elements: x = a (op) b (b may be null), then x
/// to o1 and/or o2. a and b may be staging memory another GPU wrote: every load bypasses L1.
/// Each thread keeps several independent 16-byte loads in flight before its stores (a plain
/// copy: U loads of a; with b: R loads of each), which is what a block's copy rate depends
/// on (memory latency x bytes in flight); its last, shorter round loads all it has left at
/// once (a 512 KiB message at 6 was 10 rounds of 6 and then 4 of one vector each). U = 6, R = 3: the movers stay spill-free and
/// exec_kernel<float> spills least within its 128 registers (ptxas -v: 64 / 156 bytes of
/// spill stores / loads, outside the movers; 4 / 4 gives 84 / 216, 8 / 4 gives 100 / 256);
/// bench/exec_copy_bench.cu measures 6 / 3 against the former 4 / 4 and 16 / 8.
template <typename T, int Op, uint32_t U = 6, uint32_t R = 3>
__device__ __noinline__ void move_simple(const T* a, const T* b, T* o1, T* o2, uint64_t n, uint32_t tid,
                                         uint32_t nth) {
  uint64_t done = 0;
  const uintptr_t align = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                          reinterpret_cast<uintptr_t>(o1) | reinterpret_cast<uintptr_t>(o2);
  if ((align & 15u) == 0) {
    const uint64_t nvec = n * sizeof(T) / 16;
    const uint4* av = reinterpret_cast<const uint4*>(a);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    uint4* v1 = reinterpret_cast<uint4*>(o1);
    uint4* v2 = reinterpret_cast<uint4*>(o2);
    uint64_t i = tid;
    if (bv == nullptr) {
      for (; i + (U - 1) * nth < nvec; i += U * nth) {
        uint4 x[U];
#pragma unroll
        for (uint32_t u = 0; u < U; ++u) x[u] = device::ld_cg_v4(av + i + u * nth);
        store_vecs<U>(x, v1, v2, i, nth);
      }
      if (i < nvec) move_rest<T, Op, U, false>(av, nullptr, v1, v2, i, nvec, nth);  // fewer than U left
    } else {
      constexpr uint32_t kR = R > 0 ? R : 1;
      for (; i + (kR - 1) * nth < nvec; i += kR * nth) {
        uint4 x[kR], y[kR];
#pragma unroll
        for (uint32_t u = 0; u < kR; ++u) x[u] = device::ld_cg_v4(av + i + u * nth);
#pragma unroll
        for (uint32_t u = 0; u < kR; ++u) y[u] = device::ld_cg_v4(bv + i + u * nth);
#pragma unroll
        for (uint32_t u = 0; u < kR; ++u) x[u] = apply16<T, Op>(x[u], y[u]);
        store_vecs<kR>(x, v1, v2, i, nth);
      }
      if (i < nvec) move_rest<T, Op, kR, true>(av, bv, v1, v2, i, nvec, nth);  // fewer than R of each left
    }
    done = nvec * 16 / sizeof(T);
  }
  for (uint64_t i = done + tid; i < n; i += nth) {
    T x = ld_cg(a + i);
    if (b != nullptr) x = apply_op<Op>(x, ld_cg(b + i));
    if (o1 != nullptr) o1[i] = x;
    if (o2 != nullptr) o2[i] = x;
  }
}

template <typename T, uint32_t U, uint32_t R>
WEFT_DEVICE_INLINE void move_simple_ops(int op, const T* a, const T* b, T* o1, T* o2, uint64_t n, uint32_t tid,
                                         uint32_t nth) {
  if (b == nullptr || op == kOpSum || op == kOpAvg) return move_simple<T, kOpSum, U, R>(a, b, o1, o2, n, tid, nth);
  if (op == kOpProd) return move_simple<T, kOpProd, U, R>(a, b, o1, o2, n, tid, nth);
  if (op == kOpMax) return move_simple<T, kOpMax, U, R>(a, b, o1, o2, n, tid, nth);
  return move_simple<T, kOpMin, U, R>(a, b, o1, o2, n, tid, nth);
}

/// `Wide` (exec_kernel's instantiation for ExecArgs::mover_wide, WEFT_MOVER_WIDE): 8 loads in
/// flight on a copy and 8 of each input on a reduction, NCCL's unroll on sm_90, instead of 6
/// and 3. A kernel of its own: calling either mover from one kernel made exec_kernel<float>
/// spill about twice as much (ptxas -v), and in the PostWarp kernel's 96 registers ptxas
/// spills 8 / 8 (and 8 / 4) but not 6 / 3.
template <typename T, bool Wide = false>
WEFT_DEVICE_INLINE void move_simple_op(int op, const T* a, const T* b, T* o1, T* o2, uint64_t n, uint32_t tid,
                                        uint32_t nth) {
  if constexpr (Wide) return move_simple_ops<T, 8, 8>(op, a, b, o1, o2, n, tid, nth);
  else return move_simple_ops<T, 6, 3>(op, a, b, o1, o2, n, tid, nth);
}

/// LL: the block moves `bytes` word by word; `in` packets are polled (flag rflag), `out`
/// packets written (flag sflag). Returns the failed wait, if any, for this thread.
template <typename T, int Op>
__device__ __noinline__ device::WaitResult move_ll(int prim, const char* src, const device::LLPacket* in, char* dst,
                                                   device::LLPacket* out, uint64_t bytes, uint64_t wire_bytes,
                                                   uint32_t rflag, uint32_t sflag, device::Deadline dl, uint32_t tid,
                                                   uint32_t nth_) {
  // Packets cover the whole piece (wire_bytes), so that sender and receiver agree on their
  // number whatever each side's buffers hold; user memory is touched for `bytes` only.
  // Each thread polls kU packets at once: their loads are in flight together instead of
  // one memory latency per packet (8 spills registers under the 512-thread bound).
  constexpr uint32_t kU = 4;
  const uint64_t words = (wire_bytes + 7) / 8;
  const uint64_t nth = nth_;
  for (uint64_t base = tid; base < words; base += nth * kU) {
    // The source words first: their loads are in flight while the packets are polled (on a
    // hop that receives, reduces and sends, one memory latency less per hop).
    uint64_t x[kU], sv[kU];
#pragma unroll
    for (uint32_t u = 0; u < kU; ++u) {
      const uint64_t w = base + u * nth;
      sv[u] = src != nullptr && w < words ? device::load_word(src, w * 8, bytes) : 0;
    }
    if (in != nullptr) {
      bool ready[kU];
#pragma unroll
      for (uint32_t u = 0; u < kU; ++u) {
        ready[u] = base + u * nth >= words;
        x[u] = 0;
      }
      for (uint32_t spins = 0;; ++spins) {
        bool all = true;
#pragma unroll
        for (uint32_t u = 0; u < kU; ++u)
          if (!ready[u]) {
            ready[u] = device::ll_try_read(in + base + u * nth, rflag, x[u]);
            all &= ready[u];
          }
        if (all) break;
        if ((spins & 255u) == 255u) {
          device::WaitResult r = device::check_deadline(dl, (spins & 65535u) == 65535u);
          if (r != device::WaitResult::Ok) return r;
        }
      }
    }
#pragma unroll
    for (uint32_t u = 0; u < kU; ++u) {
      const uint64_t w = base + u * nth;
      if (w >= words) break;
      uint64_t v;
      switch (prim) {
        case kSend:
        case kCopy: v = sv[u]; break;
        case kRecv:
        case kRecvCopySend: v = x[u]; break;
        case kReduce: v = apply8<T, Op>(device::load_word(dst, w * 8, bytes), sv[u]); break;
        default: v = apply8<T, Op>(sv[u], x[u]); break;
      }
      if (dst != nullptr) device::store_word(dst, w * 8, bytes, v);
      if (out != nullptr) device::ll_write(out + w, v, sflag);
    }
  }
  return device::WaitResult::Ok;
}

template <typename T>
WEFT_DEVICE_INLINE device::WaitResult move_ll_op(int op, int prim, const char* src, const device::LLPacket* in,
                                                 char* dst, device::LLPacket* out, uint64_t bytes, uint64_t wire_bytes,
                                                 uint32_t rflag, uint32_t sflag, const device::Deadline& dl,
                                                 uint32_t tid, uint32_t nth) {
  switch (op) {
    case kOpProd: return move_ll<T, kOpProd>(prim, src, in, dst, out, bytes, wire_bytes, rflag, sflag, dl, tid, nth);
    case kOpMax: return move_ll<T, kOpMax>(prim, src, in, dst, out, bytes, wire_bytes, rflag, sflag, dl, tid, nth);
    case kOpMin: return move_ll<T, kOpMin>(prim, src, in, dst, out, bytes, wire_bytes, rflag, sflag, dl, tid, nth);
    default: return move_ll<T, kOpSum>(prim, src, in, dst, out, bytes, wire_bytes, rflag, sflag, dl, tid, nth);
  }
}

/// One invocation of slot `s` (this rank's slot number `gs`) for micro-batch `k`; false
/// when the block must stop. `Protocol` and `Op` below 0 (the interpreter) read the launch's
/// from ExecArgs; generated kernels (src/gen) pass them and the slot as constants, so that
/// the branches on them fold. `Net`: some connection may cross the network (a separate
/// instantiation, so that the network's trigger pushes cost the kernel without them no
/// registers). `Traced`: thread 0 records the invocation's timestamps in ExecArgs::trace
/// (also a separate instantiation: the readings cost the untraced kernel spills).
///
/// Simple receives within a node ack without a fence, as LL ones do: every value the role
/// loaded from the staging slot was consumed before the barrier that precedes the ack
/// (stored to the output or the next staging slot, or reduced into such a store), so those
/// loads have completed and the sender's next writes into the slot cannot change them; the
/// role's own stores need no ordering against the ack (the output is ordered for this rank's
/// other blocks by the counter's release, a next slot by the post's release). The fence it
/// saves (one per received micro-batch) waited for all the micro-batch's stores to complete
/// before the sender could reuse the slot.
///
/// `PostWarp` (Simple within a node only): thread 0 takes the invocation's FIFO positions as
/// soon as its waits succeed (the cached positions, and the counts the next launch reads) and
/// leaves what to publish in sh.post[par]; the movers then meet the posting warp at post_sync
/// instead of publishing (exec_kernel's posting warp does). `Wide`: the 8 / 8 movers.
/// One Simple piece of a slot: the operands its primitive reads and writes (`in`: this
/// piece in the receive slot; `out`: in the send slot), then the move.
template <typename T, bool Wide>
WEFT_DEVICE_INLINE void move_simple_piece(int op, int prim, char* src, const char* in, char* dst, char* out,
                                          uint64_t n, uint32_t tid, uint32_t nth) {
  const T* ta = nullptr;
  const T* tb = nullptr;
  T* o1 = nullptr;
  T* o2 = reinterpret_cast<T*>(out);
  switch (prim) {
    case kSend: ta = reinterpret_cast<const T*>(src); o1 = reinterpret_cast<T*>(dst); break;  // dst: kFusedCopy
    case kRecv:
    case kRecvCopySend: ta = reinterpret_cast<const T*>(in); o1 = reinterpret_cast<T*>(dst); break;
    case kRecvReduceCopy:
    case kRecvReduceCopySend:
    case kRecvReduceSend:
      ta = reinterpret_cast<const T*>(src);
      tb = reinterpret_cast<const T*>(in);
      o1 = reinterpret_cast<T*>(dst);
      break;
    case kCopy: ta = reinterpret_cast<const T*>(src); o1 = reinterpret_cast<T*>(dst); break;
    case kReduce:
      ta = reinterpret_cast<const T*>(dst);
      tb = reinterpret_cast<const T*>(src);
      o1 = reinterpret_cast<T*>(dst);
      break;
    default: break;
  }
  // An in-place local copy (src and dst the same memory) has nothing to move.
  if (ta != nullptr && !(prim == kCopy && ta == o1)) move_simple_op<T, Wide>(op, ta, tb, o1, o2, n, tid, nth);
}

/// Thread 0, posting warp on (invoke_slot): this end's counts move now (the next invocation
/// may use the same FIFO end before the posting warp has published this one); the
/// peer-visible counts are the posting warp's, after the movers' post_sync.
WEFT_DEVICE_INLINE void stage_post(const Invocation& iv, BlockShared& sh, const DevSlot& s, int32_t gs, uint32_t k,
                                   uint32_t par, int st, const ChannelHandle* sc, const ChannelHandle* rc) {
  PostRecord& p = sh.post[par];
  p.stop = st;
  if (st != 0) return;
  p.sc = sc;
  p.rc = rc;
  p.spos = sh.spos;
  p.rpos = sh.rpos;
  p.counter = (s.flags & kHasDependents) ? &iv.a->counters[gs] : nullptr;
  p.value = sh.base + k + 1;
  if (sc != nullptr) {
    conn_state(iv, s.send_conn).pos = sh.spos + 1;
    *sc->semaphore.signalled = sh.spos + 1;
  }
  if (rc != nullptr) {
    conn_state(iv, s.recv_conn).pos = sh.rpos + 1;
    *rc->semaphore.waited = sh.rpos + 1;
  }
}

template <typename T, bool Net, int Protocol = -1, int Op = -1, bool Traced = false, bool PostWarp = false,
          bool Wide = false>
WEFT_DEVICE_INLINE bool invoke_slot(const Invocation& iv, BlockShared& sh, const DevSlot s, int32_t gs, uint32_t k,
                                    uint32_t par) {
  const ExecArgs& a = *iv.a;
  const bool sends = prim_sends(s.prim), recvs = prim_receives(s.prim);
  const int proto = Protocol >= 0 ? Protocol : a.protocol;
  const bool ll = proto != kSimple;  // LL or LL128: the data carries its flags
  const ChannelHandle* rc = recvs ? &iv.conns[s.recv_conn] : nullptr;
  const ChannelHandle* sc = sends ? &iv.conns[s.send_conn] : nullptr;
  if (iv.tid == 0) {
    if constexpr (Traced) sh.trace_t[0] = device::globaltimer();
    int st = 0;
    const uint64_t want = sh.base + k + 1;
    // A dependency is another block of this rank, stuck only if a wait on a peer is stuck
    // further up its chain: its deadline comes an eighth of the timeout later, so the wait on
    // the peer times out first and the error names the peer, not this rank's block.
    device::Deadline dep_dl = iv.dl;
    if (dep_dl.end_ns != ~0ull) dep_dl.end_ns += a.timeout_ns >> 3;
    for (int32_t d = 0; d < s.ndeps && st == 0; ++d) {
      const uint64_t* ctr = &a.counters[a.deps[s.dep_begin + d]];
      device::WaitResult r = device::spin_until([&] { return device::ld_acquire_gpu(ctr) >= want; }, dep_dl);
      if (r != device::WaitResult::Ok) {
        record_error(iv, r, gs, s.prim, kWaitDependency, -1, k, a.dep_tbs[s.dep_begin + d], k + 1,
                     device::ld_acquire_gpu(ctr) - sh.base);
        st = 1;
      }
    }
    if constexpr (Traced) sh.trace_t[1] = device::globaltimer();
    if (st == 0 && recvs) {
      ConnState& rcs = conn_state(iv, s.recv_conn);
      const uint64_t rpos = rcs.pos;
      sh.rpos = rpos;
      if (!ll) {
        device::WaitResult r = rc->wait_posted_cached(rpos, rcs.peer, iv.dl);
        if (r != device::WaitResult::Ok) {
          record_error(iv, r, gs, s.prim, kWaitData, rc->peer, k, -1, rpos + 1, rc->peer_count());
          st = 1;
        }
      }
    }
    if (st == 0 && sends) {
      ConnState& scs = conn_state(iv, s.send_conn);
      const uint64_t spos = scs.pos;
      sh.spos = spos;
      device::WaitResult r = sc->wait_credit_cached(spos, scs.peer, iv.dl);
      if (r != device::WaitResult::Ok) {
        record_error(iv, r, gs, s.prim, kWaitCredit, sc->peer, k, -1, spos + 1 - sc->depth, sc->peer_count());
        st = 1;
      }
    }
    sh.wait_status[par] = st;
    sh.proc_status[par] = 0;
    if constexpr (PostWarp) stage_post(iv, sh, s, gs, k, par, st, sc, rc);
  }
  role_sync(iv);
  if (sh.wait_status[par] != 0) return false;
  if (Traced && iv.tid == 0) sh.trace_t[2] = device::globaltimer();

  const Geometry& g = a.geo;
  const uint64_t rpos = sh.rpos, spos = sh.spos;
  const uint64_t esz = g.elem_size;
  const uint64_t part = part_elems(g, s.instances);
  const Range range = piece_range(g, k, s.instance, s.instances);
  const bool rd = prim_reads_src(s.prim), wr = slot_writes_dst(s);
  uint64_t used = 0;  // Net, Simple: bytes of the send slot written (what crosses the network)
  for (int32_t c = 0; c < s.count; ++c) {
    const uint64_t n = piece_valid(g, s, c, range);
    // Simple: only the counters must agree, so pieces without data are skipped. LL: every
    // packet of the piece travels (the receiver counts packets), data or padding.
    if (range.hi <= range.lo || (n == 0 && !ll)) continue;
    char* src = rd ? a.buf[s.src_buf] + (chunk_offset(g, s.src_buf, s.src_index + c) + range.lo) * esz : nullptr;
    char* dst = wr ? a.buf[s.dst_buf] + (chunk_offset(g, s.dst_buf, s.dst_index + c) + range.lo) * esz : nullptr;
    const uint64_t piece_off = static_cast<uint64_t>(c) * part * esz;
    if constexpr (Net) used = piece_off + n * esz;  // pieces come in slot order
    if (!ll) {
      const char* in = recvs ? rc->recv_slot(rpos) + piece_off : nullptr;
      char* out = sends ? sc->send_slot(spos) + piece_off : nullptr;
      move_simple_piece<T, Wide>(Op >= 0 ? Op : a.op, s.prim, src, in, dst, out, n, iv.tid, iv.nth);
    } else {
      device::WaitResult r;
      if (!Net && proto == kLL128) {
        // LL128 lines in the Simple slots, each piece on whole lines (exec/ll128.cuh); never
        // across the network (the runtime runs Simple there), so not in that instantiation;
        // never with block roles (the host groups Simple and LL only), so the whole block.
        r = move_ll128<T>(Op >= 0 ? Op : a.op, s.prim, src, dst, rc, sc, rpos, spos,
                          static_cast<uint64_t>(c) * device::ll128_buffer_bytes(part * esz), n * esz,
                          (range.hi - range.lo) * esz, iv.dl);
      } else {
        const device::LLPacket* in = recvs ? rc->recv_packets(rpos) + piece_off / 8 : nullptr;
        device::LLPacket* out = sends ? sc->send_packets(spos) + piece_off / 8 : nullptr;
        r = move_ll_op<T>(Op >= 0 ? Op : a.op, s.prim, src, in, dst, out, n * esz, (range.hi - range.lo) * esz,
                          static_cast<uint32_t>(rpos + 1), static_cast<uint32_t>(spos + 1), iv.dl, iv.tid, iv.nth);
      }
      if (r != device::WaitResult::Ok) {
        record_error(iv, r, gs, s.prim, kWaitPacket, rc != nullptr ? rc->peer : -1, k, -1, rpos + 1, 0);
        sh.proc_status[par] = 1;
        break;
      }
    }
  }
  if constexpr (PostWarp) {
    post_sync(iv.nth);  // the posting warp publishes sh.post[par] (Simple: no packet waits failed)
    return true;
  }
  role_sync(iv);
  if (sh.proc_status[par] != 0) return false;
  // Who publishes: thread 0, or with ExecArgs::post_thread (within a node, untraced) thread
  // 32, so that the system fence of this message's post overlaps thread 0's waits for the
  // next invocation. Thread 0 alone moves the connection states it reads next.
  const uint32_t poster = !Net && !Traced && a.post_thread != 0 && iv.nth > 32 ? 32u : 0u;
  if (iv.tid == poster) {
    if constexpr (Traced) trace_invocation(iv, sh, gs, k, recvs, sends);
    // LL: the data carries its own flags and the block's reads have returned, so neither
    // count needs a fence (which would wait for every packet to land).
    // A FIFO across the network (sc->net / rc->net) pushes a trigger to the proxy here; a
    // push that timed out is recorded, and the next wait of every block then ends.
    if (sends) {
      if (ll) sc->post_packets(spos);
      else if constexpr (!Net) sc->post(spos);
      else if (device::WaitResult r = sc->post(spos, used, iv.dl); r != device::WaitResult::Ok)
        record_error(iv, r, gs, s.prim, kWaitProxy, sc->peer, k, -1, spos + 1, 0);
    }
    // Simple receives within a node ack without a fence too (see above).
    if (recvs) {
      if (ll || !Net) rc->ack_packets(rpos);
      else if (device::WaitResult r = rc->ack(rpos, iv.dl); r != device::WaitResult::Ok)
        record_error(iv, r, gs, s.prim, kWaitProxy, rc->peer, k, -1, rpos + 1, 0);
    }
    if (s.flags & kHasDependents) device::st_release_gpu(&a.counters[gs], sh.base + k + 1);
  }
  if (iv.tid == 0) {
    // The next invocation on these connections takes the next messages (after a failed
    // network push every block ends at its next wait, so the count no longer matters).
    if (sends) conn_state(iv, s.send_conn).pos = spos + 1;
    if (recvs) conn_state(iv, s.recv_conn).pos = rpos + 1;
  }
  return true;
}

/// The interpreter's invocation of slot `gs` for micro-batch `k` (invoke_slot); `Proto` below
/// 0 reads the protocol from ExecArgs.
template <typename T, bool Net, bool Traced, bool PostWarp, bool Wide, int Proto = -1>
__device__ bool invoke(const Invocation& iv, BlockShared& sh, int32_t gs, uint32_t k, uint32_t par) {
  return invoke_slot<T, Net, Proto, -1, Traced, PostWarp, Wide>(iv, sh, iv.slots[gs], gs, k, par);
}

/// A PostWarp launch's last warp: after each invocation's post_sync, lane 0 publishes what
/// thread 0 recorded (the message's posted count with a system-scope release, the ack, the
/// slot's counter), while the movers go on with the next invocation: the fence that waits
/// for the message's stores to land overlaps the next move (NCCL's extra warp for Simple).
/// The movers meet it once more when they stop (record `stop`), normally or on a failed wait.
WEFT_DEVICE_INLINE void post_loop(BlockShared& sh, uint32_t movers, uint32_t lane) {
  for (uint32_t par = 0;; par ^= 1u) {
    post_sync(movers);
    const PostRecord& p = sh.post[par];
    if (p.stop != 0) return;
    if (lane != 0) continue;
    if (p.sc != nullptr) p.sc->publish_posted(p.spos);
    if (p.rc != nullptr) p.rc->publish_ack(p.rpos);
    if (p.counter != nullptr) device::st_release_gpu(p.counter, p.value);
  }
}

/// The plan interpreter. `PostWarp`: launched with 32 threads more than the movers (one thread
/// block per CUDA block, Simple within a node, untraced; ExecArgs::post_warp), the last warp
/// running post_loop. `Wide`: the 8 / 8 movers (ExecArgs::mover_wide; move_simple_op).
/// `Proto` 0 or more: built for that protocol alone (ExecArgs::ll_kernel: kLL, untraced,
/// within a node), so that the branches on it fold and the Simple and LL128 paths leave the
/// code a small call runs through.
template <typename T, bool Net = false, bool Traced = false, bool PostWarp = false, bool Wide = false, int Proto = -1>
__global__ void __launch_bounds__(PostWarp ? kMaxThreads + 32 : kMaxThreads) exec_kernel(const __grid_constant__ ExecArgs a) {
  // a.roles > 1: this CUDA block runs a.roles plan thread blocks (a.block_tbs), each on its
  // own warps with its own shared state and named barrier (plan_lowering.hpp, RoleGroups).
  __shared__ BlockShared shs[kMaxBlockRoles];
  const uint32_t roles = !PostWarp && a.roles > 1 ? static_cast<uint32_t>(a.roles) : 1u;
  const uint32_t movers = PostWarp ? blockDim.x - 32 : blockDim.x;
  const uint32_t nth = movers / roles, role = PostWarp ? 0u : threadIdx.x / nth;
  if (role >= roles) return;
  const int32_t tbi = roles > 1 ? a.block_tbs[blockIdx.x * roles + role] : static_cast<int32_t>(blockIdx.x);
  if (tbi < 0) return;
  BlockShared& sh = shs[role];
  const DevTB tb = a.inline_plan ? a.itbs[tbi] : a.tbs[tbi];
  if (tb.nslots == 0 || a.geo.nmb == 0) return;
  Invocation iv;
  iv.a = &a;
  iv.slots = a.inline_plan ? a.islots : a.slots;
  iv.conns = a.inline_plan ? a.iconns : a.conns;
  set_conn_states(iv, role, a.conn_cache, tb.conn_begin);
  iv.tb = tbi;
  iv.tb_first_slot = tb.slot_begin;
  iv.tid = threadIdx.x - role * nth;
  iv.nth = nth;
  iv.bar = roles > 1 ? role + 1 : 0;
  if (!PostWarp || threadIdx.x < movers) load_conn_states(iv, tb.conn_begin, tb.nconns);
  if (a.warm) warm_params(a, iv.tid, iv.nth);
  // After the loads above are issued: the timer's read and the sum on it then wait beside them.
  iv.start_ns = device::globaltimer();
  iv.dl = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  if (iv.tid == 0) {
    // Only slots that others wait on bump their counters, so the base is read from such
    // a slot of this block, if any (all such counters hold the same value at launch).
    sh.base = 0;
    for (int32_t i = 0; i < tb.nslots; ++i)
      if (iv.slots[tb.slot_begin + i].flags & kHasDependents) {
        sh.base = *reinterpret_cast<volatile uint64_t*>(&a.counters[tb.slot_begin + i]);
        break;
      }
    // The host's abort flag is not read here: a PCIe read would delay every launch.
    sh.start_status = *reinterpret_cast<volatile uint32_t*>(a.error_claim) != 0 ? 1 : 0;
    if constexpr (Traced) {
      sh.trace_n = 0;
      TraceBlockHeader* h = trace_block(a.trace, a.trace_cap, iv.tb);
      h->start_ns = iv.start_ns;
      h->cap = a.trace_cap;
    }
  }
  if constexpr (PostWarp) {
    __syncthreads();  // movers and the posting warp
    if (sh.start_status != 0) return;
    if (threadIdx.x >= movers) return post_loop(sh, movers, threadIdx.x - movers);
    iv.bar = 1;  // the movers' own barrier from here on
  } else {
    role_sync(iv);
    if (sh.start_status != 0) return;
  }
  // One loop for both models (one inlined copy of invoke: fewer registers), in the order of
  // exec::InvocationOrder: task-level runs each slot over all micro-batches, algorithm-level
  // each window of a.mb_window micro-batches over all slots.
  const uint32_t nmb = a.geo.nmb;
  const uint32_t win = order_window(a.model == kTaskModel, nmb, a.mb_window);
  InvocationOrder at = order_begin(nmb, win);
  uint32_t par = 0;
  for (;; par ^= 1u) {
    if (!invoke<T, Net, Traced, PostWarp, Wide, Proto>(iv, sh, tb.slot_begin + at.slot, at.k, par)) {
      if constexpr (PostWarp) post_sync(iv.nth);  // the failed wait's record stops the posting warp
      return;
    }
    if (!order_next(at, tb.nslots, nmb, win)) break;
  }
  if constexpr (PostWarp) {
    if (iv.tid == 0) sh.post[par ^ 1u].stop = 1;  // the record after the last stops the posting warp
    post_sync(iv.nth);
    return;
  }
  if (Traced && iv.tid == 0) trace_block(a.trace, a.trace_cap, iv.tb)->end_ns = device::globaltimer();
}

/// weftAvg's last step: x[i] /= divisor (integer division for integer types).
template <typename T>
__global__ void divide_kernel(T* x, uint64_t n, int divisor) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 2 && !std::is_integral_v<T>)
      x[i] = static_cast<T>(static_cast<float>(x[i]) / static_cast<float>(divisor));
    else
      x[i] = static_cast<T>(x[i] / static_cast<T>(divisor));
  }
}

}  // namespace weft::exec
