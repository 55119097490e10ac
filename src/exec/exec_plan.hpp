// The executor's view of a Plan: flat arrays in device memory, and the geometry that maps
// (slot, micro-batch, instance) to element ranges of the call's buffers.
//
// Host code (exec/plan_lowering, the CPU emulator) and the interpreter kernel include
// this file, so that the addressing they compute is the same code.
//
// Geometry. A buffer is `groups` groups of `n` elements (one group for AllReduce, one per
// rank for AllGather's output, ReduceScatter's input and AllToAll's buffers), each group cut
// into `k` chunk slots of `stride` elements (stride = ceil(n / k) rounded up to 16 bytes);
// the last slots of a group are shorter or empty: elements past `n` are padding that no
// access touches. Scratch chunks are `stride` elements each, all valid. Chunk slot j is
// cut into micro-batches of `mb` elements; a slot with I instances gives instance i the
// part [i * part, (i + 1) * part) of each micro-batch, part = ceil(mb / I) rounded up to
// 16 bytes. A message on a connection carries, for each of the slot's `count` chunks, that
// chunk's part at offset c * part (elements) of the staging slot; sender and receiver
// compute the same offsets because a transfer keeps a chunk's position within its group.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"
#include "weft/device/memory_channel.hpp"

namespace weft::exec {

enum BufferId : uint8_t { kInput = 0, kOutput = 1, kScratch = 2 };

/// Primitive codes, equal to weft::Primitive's values (static_assert in plan_lowering.cpp).
enum Prim : uint8_t {
  kSend = 0, kRecv, kRecvReduceCopy, kRecvCopySend, kRecvReduceCopySend, kRecvReduceSend, kCopy, kReduce, kNop
};

enum Protocol : uint8_t { kSimple = 0, kLL = 1, kLL128 = 2 };
enum Model : uint8_t { kTaskModel = 0, kAlgorithmModel = 1 };

constexpr uint8_t kHasDependents = 1;
/// On a kSend slot: the slot also copies its source pieces to `dst_buf` / `dst_index` (which a
/// send does not use otherwise) in the same pass; set by fuse_copies (exec/plan_fuse.hpp).
constexpr uint8_t kFusedCopy = 2;

/// One pipeline slot, as the interpreter reads it (32 bytes).
struct DevSlot {
  uint8_t prim;
  uint8_t src_buf;
  uint8_t dst_buf;
  uint8_t flags;      ///< kHasDependents: another slot waits on this slot's counter
  int16_t send_conn;  ///< index into the rank's connection table (ChannelHandle), -1 if none
  int16_t recv_conn;
  int32_t src_index;  ///< first chunk slot
  int32_t dst_index;
  int32_t count;      ///< consecutive chunk slots
  int16_t instance;
  int16_t instances;
  int32_t dep_begin;  ///< deps[dep_begin .. dep_begin + ndeps) are counter indices
  int32_t ndeps;
};
static_assert(sizeof(DevSlot) == 32);

/// A thread block's slots: slots[slot_begin .. slot_begin + nslots), and its connections:
/// conns[conn_begin .. conn_begin + nconns) of the rank's table (a connection end belongs to
/// one thread block, and lowering numbers them in order of first use, so each thread block's
/// are contiguous; plan_lowering checks it). The interpreter keeps their positions and the
/// peers' counts in shared memory for the launch (executor_kernel.cuh, ConnState).
struct DevTB {
  int32_t slot_begin;
  int32_t nslots;
  int32_t conn_begin;
  int32_t nconns;
};

/// One end of one direction of a connection: a FIFO of `depth` staging slots in the
/// receiver's memory, driven through the public memory-channel handle's FIFO calls
/// (weft/device/memory_channel.hpp says which pointer is whose). Made on the host by
/// exec/channel_end.hpp.
using ChannelHandle = device::MemoryChannelDeviceHandle;

/// Per-call geometry (see the file comment). All counts in elements.
struct Geometry {
  uint64_t n = 0;          ///< elements per group
  uint64_t stride = 0;     ///< chunk slot stride
  uint64_t mb = 0;         ///< micro-batch
  uint32_t nmb = 0;        ///< micro-batches per chunk slot
  uint32_t elem_size = 1;  ///< bytes
  int32_t k[3] = {1, 1, 1};  ///< chunk slots per group, per buffer
};

/// a / b, in 32 bits when both fit (every call of a small plan): a 64-bit division is a
/// long instruction sequence on the GPU, and every thread of the interpreter runs several
/// per invocation. Same result either way.
WEFT_HOST_DEVICE_INLINE uint64_t div_u64(uint64_t a, uint64_t b) {
  if (((a | b) >> 32) == 0) return static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
  return a / b;
}

/// Elements a part covers for `instances` instances: ceil(mb / instances) rounded up to
/// 16 bytes, at least one element.
WEFT_HOST_DEVICE_INLINE uint64_t part_elems(const Geometry& g, int instances) {
  uint64_t align = g.elem_size >= 16 ? 1 : 16 / g.elem_size;
  uint64_t p = div_u64(g.mb + static_cast<uint64_t>(instances) - 1, static_cast<uint64_t>(instances));
  return div_u64(p + align - 1, align) * align;
}

/// The element range [lo, hi) within a chunk slot that micro-batch `m`, instance `inst`
/// of `instances` covers (hi <= lo: nothing).
struct Range {
  uint64_t lo;
  uint64_t hi;
};
/// Where part `inst` of `instances` starts within a micro-batch: b(i) = floor(i·mb / (a·m))·a
/// elements for a = 16 bytes' worth (mb is a multiple of a), b(m) = mb; docs/plan-format.md,
/// "Instances". Because b is monotone in i/m, parts of different instance counts overlap only
/// where their fractions [i/m, (i+1)/m) do, which is how the compiler chooses dependencies
/// between them; each part is at most part_elems long.
WEFT_HOST_DEVICE_INLINE uint64_t part_start(const Geometry& g, int inst, int instances) {
  if (inst >= instances) return g.mb;
  uint64_t align = g.elem_size >= 16 ? 1 : 16 / g.elem_size;
  return div_u64(static_cast<uint64_t>(inst) * div_u64(g.mb, align), static_cast<uint64_t>(instances)) * align;
}
WEFT_HOST_DEVICE_INLINE Range piece_range(const Geometry& g, uint32_t m, int inst, int instances) {
  uint64_t mb_lo = static_cast<uint64_t>(m) * g.mb;
  uint64_t mb_hi = mb_lo + g.mb < g.stride ? mb_lo + g.mb : g.stride;
  uint64_t lo = mb_lo + part_start(g, inst, instances);
  uint64_t hi = mb_lo + part_start(g, inst + 1, instances);
  if (hi > mb_hi) hi = mb_hi;
  if (lo > hi) lo = hi;
  return {lo, hi};
}

/// Where chunk slot `j` of buffer `b` starts, in elements from the buffer's base.
WEFT_HOST_DEVICE_INLINE uint64_t chunk_offset(const Geometry& g, int b, int64_t j) {
  if (b == kScratch) return static_cast<uint64_t>(j) * g.stride;
  uint64_t k = static_cast<uint64_t>(g.k[b]);
  uint64_t group = div_u64(static_cast<uint64_t>(j), k), sub = static_cast<uint64_t>(j) - group * k;
  return group * g.n + sub * g.stride;
}

/// How many elements of chunk slot `j` of buffer `b` hold data (the rest is padding).
WEFT_HOST_DEVICE_INLINE uint64_t chunk_valid(const Geometry& g, int b, int64_t j) {
  if (b == kScratch) return g.stride;
  const uint64_t k = static_cast<uint64_t>(g.k[b]);
  uint64_t sub = static_cast<uint64_t>(j) - div_u64(static_cast<uint64_t>(j), k) * k;
  uint64_t start = sub * g.stride;
  if (start >= g.n) return 0;
  return g.n - start < g.stride ? g.n - start : g.stride;
}

WEFT_HOST_DEVICE_INLINE bool prim_sends(int p) {
  return p == kSend || p == kRecvCopySend || p == kRecvReduceCopySend || p == kRecvReduceSend;
}
WEFT_HOST_DEVICE_INLINE bool prim_receives(int p) {
  return p == kRecv || p == kRecvReduceCopy || p == kRecvCopySend || p == kRecvReduceCopySend || p == kRecvReduceSend;
}
/// Whether the primitive reads its `src` operand.
WEFT_HOST_DEVICE_INLINE bool prim_reads_src(int p) {
  return p == kSend || p == kRecvReduceCopy || p == kRecvReduceCopySend || p == kRecvReduceSend || p == kCopy ||
         p == kReduce;
}
/// Whether the primitive writes its `dst` operand.
WEFT_HOST_DEVICE_INLINE bool prim_writes_dst(int p) {
  return p == kRecv || p == kRecvReduceCopy || p == kRecvCopySend || p == kRecvReduceCopySend || p == kCopy ||
         p == kReduce;
}

/// Whether the slot writes its `dst` operand: its primitive does, or it is a send with a fused copy.
WEFT_HOST_DEVICE_INLINE bool slot_writes_dst(const DevSlot& s) {
  return prim_writes_dst(s.prim) || (s.prim == kSend && (s.flags & kFusedCopy) != 0);
}

/// For piece (chunk c of a slot, range r), the number of elements the primitive touches:
/// the range clipped to the valid part of every user buffer it reads or writes.
WEFT_HOST_DEVICE_INLINE uint64_t piece_valid(const Geometry& g, const DevSlot& s, int c, Range r) {
  if (r.hi <= r.lo) return 0;
  uint64_t valid = r.hi;
  if (prim_reads_src(s.prim)) {
    uint64_t v = chunk_valid(g, s.src_buf, s.src_index + c);
    if (v < valid) valid = v;
  }
  if (slot_writes_dst(s)) {
    uint64_t v = chunk_valid(g, s.dst_buf, s.dst_index + c);
    if (v < valid) valid = v;
  }
  return valid > r.lo ? valid - r.lo : 0;
}

/// The order in which a thread block runs its invocations (slot, micro-batch), shared by the
/// interpreter, the generated kernels and the CPU emulator. Micro-batches go in windows of
/// `win`: every slot of the block runs over the window's micro-batches [k0, k1) before the
/// next slot, then the next window. The task model is one window of all nmb micro-batches
/// (each slot over every micro-batch), the algorithm model a window of ExecArgs::mb_window
/// (1: each micro-batch over every slot). Both ends of a connection run their slots in
/// this order with the same window, so the j-th message a sender posts is the j-th its
/// receiver takes.
struct InvocationOrder {
  int32_t slot = 0;
  uint32_t k = 0, k0 = 0;  ///< the micro-batch, and the first of its window
};
WEFT_HOST_DEVICE_INLINE uint32_t order_window(bool task, uint32_t nmb, uint32_t mb_window) {
  return task ? nmb : (mb_window > 1 ? mb_window : 1u);
}
WEFT_HOST_DEVICE_INLINE InvocationOrder order_begin(uint32_t, uint32_t) { return InvocationOrder{}; }
/// Moves to the next invocation; false once the block has run all of them.
WEFT_HOST_DEVICE_INLINE bool order_next(InvocationOrder& o, int32_t nslots, uint32_t nmb, uint32_t win) {
  const uint32_t k1 = nmb - o.k0 > win ? o.k0 + win : nmb;  // the window's end
  if (++o.k < k1) return true;
  o.k = o.k0;
  if (++o.slot < nslots) return true;
  if (k1 >= nmb) return false;
  o.slot = 0;
  o.k0 = o.k = k1;
  return true;
}

/// What a device wait was waiting for, recorded on timeout.
enum WaitKind : int32_t {
  kWaitNone = 0, kWaitDependency = 1, kWaitData = 2, kWaitCredit = 3, kWaitPacket = 4,
  kWaitProxy = 5,  ///< a network FIFO's trigger push: the proxy's FIFO stayed full
  kWaitCopyEngine = 6,  ///< the copy-engine runner (exec/ce.hpp): a peer's signal, the FIFO or a flush
  kWaitCeSync = 7,      ///< the direct copy-engine path's rendezvous: a peer's epoch (exec/ce.hpp, CeSyncArgs)
  kCeCallMismatch = 8   ///< that rendezvous found the peer in another call (tags differ: expected = this rank's, seen = the peer's)
};

/// The record a timed-out kernel leaves in host-mapped memory (written once, `valid` last).
struct ErrorRecord {
  volatile uint32_t valid;
  int32_t rank;
  int32_t tb;
  int32_t slot;
  int32_t prim;   ///< Prim of the slot
  int32_t what;   ///< WaitKind
  int32_t peer;   ///< rank waited on, -1 for a dependency inside the rank
  int32_t mb;     ///< micro-batch
  int32_t dep_tb; ///< for a dependency: the thread block and slot waited on
  uint64_t expected;
  uint64_t seen;
  double waited_s;
};

/// Threads of an interpreter block (executor_kernel.cuh's kMaxThreads bounds it); small LL
/// calls take fewer (plan_lowering.hpp's exec_threads).
constexpr int kExecBlockThreads = 512;

/// Plans up to this size travel inside the kernel's parameters (read through the constant
/// cache) instead of device memory: small-message latency is a chain of dependent loads.
constexpr int kInlineTBs = 8;
/// Plan thread blocks one CUDA block runs at most (ExecArgs::roles; plan_lowering.hpp's RoleGroups).
constexpr int kMaxBlockRoles = 4;
constexpr int kInlineSlots = 16;
/// Connections one plan thread block may use: their states (16 bytes each, per role) live in
/// the launch's dynamic shared memory (executor_kernel.cuh's ConnState), within the 48 KiB a
/// launch gets without opting in (4 roles x 512 x 16 bytes = 32 KiB).
constexpr int kMaxConnsPerTB = 512;
constexpr uint32_t kConnStateBytes = 16;
constexpr int kInlineConns = 8;

/// Everything one launch of the interpreter needs (passed by value).
struct ExecArgs {
  const DevTB* tbs;
  const DevSlot* slots;
  const int32_t* deps;       ///< counter indices (this rank's slot numbers)
  const int32_t* dep_tbs;    ///< for error messages: the thread block of each dep
  const ChannelHandle* conns;
  uint64_t* counters;        ///< one per slot of this rank, persistent
  char* buf[3];              ///< input, output, scratch
  Geometry geo;
  int32_t rank;
  uint8_t model;             ///< Model
  uint8_t protocol;          ///< Protocol
  uint8_t op;                ///< weftRedOp_t (Avg runs as Sum)
  uint8_t dtype;             ///< weftDataType_t
  uint64_t timeout_ns;
  uint32_t* error_claim;     ///< device memory: the first timed-out thread claims it
  ErrorRecord* error;        ///< host-mapped
  volatile uint32_t* abort;  ///< host-mapped: set by weftCommAbort
  int32_t inline_plan;       ///< 1: tbs, slots and conns are the inline copies below
  int32_t net;               ///< 1: some connection crosses the network (ChannelHandle::net)
  int32_t roles;             ///< > 1: plan thread blocks per CUDA block (exec_kernel, RoleGroups)
  int32_t conn_cache;        ///< the most connections one of the rank's thread blocks uses (DevTB::nconns): the
                             ///< launch's dynamic shared memory holds max(roles, 1) x conn_cache ConnStates
  const int16_t* block_tbs;  ///< roles > 1: the thread block of role r of CUDA block b at [b * roles + r], -1 none
  char* trace;               ///< null: untraced; else per-block timestamp regions (ir/trace_record.hpp)
  uint32_t trace_cap;        ///< records per block region
  uint32_t mb_window;        ///< algorithm-level plans: micro-batches per window (InvocationOrder); 0 or 1: one
  uint8_t post_warp;         ///< 1: launched with a posting warp after the 512 movers (exec_kernel<..., true>)
  uint8_t mover_wide;        ///< 1: Simple moves keep 8 loads in flight per input (WEFT_MOVER_WIDE)
  uint8_t warm;              ///< 1: the launch's threads touch every line of these parameters first (WEFT_EXEC_WARM)
  uint8_t ll_kernel;         ///< 1: an LL plan runs the interpreter built for LL alone (WEFT_EXEC_LL_KERNEL)
  uint8_t post_thread;       ///< 1: thread 32 of a block (role) publishes its messages (WEFT_POST_THREAD; invoke_slot)
  DevTB itbs[kInlineTBs];
  DevSlot islots[kInlineSlots];
  ChannelHandle iconns[kInlineConns];
};

}  // namespace weft::exec
