// Device side of partitioned collectives (src/part/schedule.hpp says what a schedule is).
// Included by weft/part/device.hpp.
//
// pready_block(u) is called by every thread of a block once the block (or the kernel, for
// the partitions it owns) has written partition u of the collective buffer. It runs
// partition u's schedule step by step in that block: wait for each incoming message's flag
// (bounded), copy or reduce the message from the receive scratch into the chunk, then copy
// the step's chunk into each outgoing neighbour's scratch and raise its flag. The reduction
// is a loop of the block: no extra kernel and no stream synchronization sit in the
// collective, and it is complete for partition u when pready_block returns.
//
// Every rank calls pready_block for every partition of an epoch (a Broadcast's non-roots
// too: there the call receives and forwards). Blocks that wait on peers must be able to run
// together with the peers' blocks of the same partition; a grid larger than the GPU holds at
// once can wait on a block that never starts, which ends at WEFT_TIMEOUT with an error.
#pragma once

#include <cstdint>
#include <type_traits>

#include "weft/device/atomics.hpp"
#include "weft/device/copy.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/memory_channel.hpp"
#include "weft/device/thread_group.hpp"
#include "weft/device/wait.hpp"
#include "weft/part/common.hpp"
#include "weft/weft.h"

namespace weft::part {

constexpr int kMaxStepPeers = 2;

/// One step of a schedule for the device (schedule.hpp's Step with peer indices into
/// PcollDeviceHandle::peers).
struct PcollStep {
  int8_t n_in = 0, n_out = 0;
  uint8_t op = 0;  ///< StepOp: 0 none, 1 copy, 2 reduce
  int16_t recv_chunk = -1, send_chunk = -1;
  int8_t in_peer[kMaxStepPeers] = {}, out_peer[kMaxStepPeers] = {};
  uint16_t in_slot[kMaxStepPeers] = {}, out_slot[kMaxStepPeers] = {};
};

/// One neighbour of the schedule, both directions.
struct PcollPeer {
  /// local: the collective buffer; remote: its scratch for our messages, mapped here.
  device::MemoryChannelDeviceHandle channel;
  uint64_t* remote_flags = nullptr;   ///< its flag block for our messages, mapped here
  const char* local_scratch = nullptr;   ///< our scratch for its messages
  const uint64_t* local_flags = nullptr; ///< our flag block for its messages
  uint32_t slots_out = 0, slots_in = 0;  ///< messages per partition each way
};

struct PcollDeviceHandle {
  char* buf = nullptr;             ///< the collective buffer (in place)
  uint64_t partition_elems = 0;
  uint32_t partitions = 0;
  uint32_t chunks = 1;
  uint32_t nsteps = 0;
  uint32_t elem_bytes = 0;
  int32_t dtype = 0;               ///< weftDataType_t (float32, float64, int32, int64, uint32, uint64)
  int32_t op = 0;                  ///< weftRedOp_t (sum, prod, max, min)
  uint64_t slot_bytes = 0;         ///< bytes of one scratch slot (the largest chunk)
  const PcollStep* steps = nullptr;
  const PcollPeer* peers = nullptr;
  uint64_t* ctl = nullptr;         ///< kCtlEpoch (prepared-epoch cache); kCtlSent: partitions finished; kCtlClaim
  /// The collective's host words (kWord*, host memory mapped here): the prepared and started
  /// epochs, and kWordDone, which the block that finishes an epoch's last partition stores.
  uint64_t* host = nullptr;
  uint64_t* stamps = nullptr;      ///< per partition: its preadies over all epochs (claim)
  uint64_t* finished = nullptr;    ///< per partition: epoch it last finished in; [partitions]: parrived's cache of started
  DeviceErrorRecord* error = nullptr;
  uint64_t timeout_ns = 0;         ///< WEFT_TIMEOUT; 0: none
  const volatile uint32_t* abort = nullptr;

#if WEFT_DEVICE_CODE
  WEFT_DEVICE_INLINE uint64_t chunk_elem(uint32_t c) const { return partition_elems * c / chunks; }

  template <typename T>
  WEFT_DEVICE_INLINE static T apply(int op, T a, T b) {
    switch (op) {
      case weftProd: return a * b;
      case weftMax: return a > b ? a : b;
      case weftMin: return a < b ? a : b;
      default: return a + b;  // weftSum
    }
  }
  /// The block reduces n elements of src (written by a peer: read through L2) into dst.
  template <typename T>
  WEFT_DEVICE_INLINE void reduce_into(char* dst, const char* src, uint64_t n) const {
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) d[i] = apply<T>(op, d[i], __ldcg(s + i));
  }
  /// The block copies n bytes written by a peer (through L2) to dst.
  WEFT_DEVICE_INLINE static void copy_in(char* dst, const char* src, uint64_t n) {
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15u) == 0) {
      const uint64_t nv = n / 16;
      for (uint64_t i = threadIdx.x; i < nv; i += blockDim.x)
        reinterpret_cast<uint4*>(dst)[i] = __ldcg(reinterpret_cast<const uint4*>(src) + i);
      for (uint64_t i = nv * 16 + threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(src + i);
    } else {
      for (uint64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = __ldcg(src + i);
    }
  }
  WEFT_DEVICE_INLINE void reduce_chunk(char* dst, const char* src, uint64_t n) const {
    switch (dtype) {
      case weftInt32: reduce_into<int32_t>(dst, src, n); break;
      case weftUint32: reduce_into<uint32_t>(dst, src, n); break;
      case weftInt64: reduce_into<int64_t>(dst, src, n); break;
      case weftUint64: reduce_into<unsigned long long>(dst, src, n); break;
      case weftFloat64: reduce_into<double>(dst, src, n); break;
      default: reduce_into<float>(dst, src, n); break;  // weftFloat32
    }
  }

  /// Every thread of a block: runs partition u's schedule (see the file comment).
  WEFT_DEVICE_INLINE void pready_block(uint32_t u) const {
    __shared__ uint64_t s_epoch;
    __shared__ int s_failed;
    __syncthreads();
    if (threadIdx.x == 0) {
      if (u >= partitions) {
        detail::record_error(error, ctl + kCtlClaim, kDevOutOfRange, u, 0);
        s_epoch = 0;
      } else {
        s_epoch = detail::claim(stamps, ctl, host, error, u);
      }
      s_failed = 0;
    }
    __syncthreads();
    const uint64_t e = s_epoch;
    if (e == 0) return;
    const device::Deadline d = device::deadline_after(timeout_ns, abort);
    char* part = buf + static_cast<uint64_t>(u) * partition_elems * elem_bytes;
    for (uint32_t si = 0; si < nsteps; ++si) {
      const PcollStep st = steps[si];
      for (int i = 0; i < st.n_in; ++i) {
        const PcollPeer& pe = peers[st.in_peer[i]];
        const uint64_t idx = static_cast<uint64_t>(u) * pe.slots_in + st.in_slot[i];
        if (threadIdx.x == 0) {
          const uint64_t* f = pe.local_flags + kFlagFirst + idx;
          if (device::spin_until([&] { return device::ld_acquire_sys(f) >= e; }, d) != device::WaitResult::Ok) {
            detail::record_error(error, ctl + kCtlClaim, kDevCollTimeout, u, e);
            s_failed = 1;
          }
        }
        __syncthreads();
        if (s_failed) return;
        const uint64_t b = chunk_elem(st.recv_chunk), n = chunk_elem(st.recv_chunk + 1) - b;
        const char* src = pe.local_scratch + idx * slot_bytes;
        if (st.op == 2) reduce_chunk(part + b * elem_bytes, src, n);
        else copy_in(part + b * elem_bytes, src, n * elem_bytes);
        __syncthreads();
      }
      for (int i = 0; i < st.n_out; ++i) {
        const PcollPeer& pe = peers[st.out_peer[i]];
        const uint64_t idx = static_cast<uint64_t>(u) * pe.slots_out + st.out_slot[i];
        const uint64_t b = chunk_elem(st.send_chunk), n = chunk_elem(st.send_chunk + 1) - b;
        device::MemoryChannelDeviceHandle ch = pe.channel;  // put is not const
        ch.put(idx * slot_bytes, (static_cast<uint64_t>(u) * partition_elems + b) * elem_bytes,
                   n * elem_bytes, device::ThreadGroup::block());
        __syncthreads();
        if (threadIdx.x == 0) {
          device::fence_acq_rel_sys();  // the block's copy before the flag
          device::st_relaxed_sys(pe.remote_flags + kFlagFirst + idx, e);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      device::st_release_gpu(finished + u, e);
      // The block that finishes the epoch's last partition has seen every block's result
      // (through the released count) and makes it visible before kWordDone.
      if (completes_epoch(device::atomic_add_release_gpu(ctl + kCtlSent, 1), partitions, e)) {
        device::fence_acq_rel_sys();
        device::st_relaxed_sys(host + kWordDone, e);
      }
    }
  }
  /// Any thread: true once partition u of the current epoch (the host's last start, as for
  /// PrecvDeviceHandle::parrived: a kernel that calls it must finish before the next start)
  /// has finished on this rank.
  /// `started` is read from host memory only when the partition's word is at or above the
  /// device's cache of it (finished[partitions]; arrived_cached, weft/part/common.hpp).
  WEFT_DEVICE_INLINE bool parrived(uint32_t u) const {
    if (u >= partitions) return false;
    const detail::DeviceSeenMemory m{finished + partitions, host};
    return arrived_cached(m, device::ld_acquire_gpu(finished + u));
  }
#endif
};
static_assert(std::is_trivially_copyable_v<PcollDeviceHandle>);

}  // namespace weft::part
