// Device side of weft's partitioned communication (paper 002): what a user's kernel calls.
//
//   PsendDeviceHandle   pready of a partition at thread, warp or block granularity. The
//                       calling threads copy their partition into the receiver's buffer
//                       (a memory channel's put over NVLink / peer access: the kernel-copy
//                       path), then bump
//                       the counter of its transport partition; the call that completes a
//                       transport partition (threshold user partitions) signals the receiver.
//                       On the progression-engine path (WEFT_PART_PATH=proxy) the threads
//                       copy nothing: the completing call stores the epoch into a flag in
//                       host-mapped memory, and a host thread puts the transport partition
//                       through a port-channel connection, then signals the receiver.
//   PrecvDeviceHandle   parrived: has partition p of this epoch arrived?
//   PcollDeviceHandle   a partitioned collective (AllReduce, Broadcast): pready_block(u) runs
//                       partition u's whole schedule (receive, reduce on the device, forward)
//                       inside the calling block; parrived(u) says it finished.
//
// Misuse on the device (a partition out of range, pready twice in one epoch, pready before
// start) sends nothing and is recorded in the request's error record; the host reports it as
// an error with a message at the next start, pready, test or wait. Every wait is bounded
// (WEFT_TIMEOUT): a peer that never sends ends in an error, not a hang.
//
// Handles are trivially copyable and passed to kernels by value; each stays valid while the
// host object that made it (weft::part::DeviceRequest, weft::part::Collective) lives.
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

namespace weft::part {

struct PsendDeviceHandle {
  /// local: the send buffer; remote: the receive buffer, mapped here (peer access / CUDA IPC).
  /// Only its put is used: the signal is a per-transport-partition flag (below), since
  /// transport partitions complete in any order.
  device::MemoryChannelDeviceHandle channel;
  uint64_t* remote_flags = nullptr;  ///< the receiver's flag block, mapped here
  /// Progression-engine path (non-null): per transport partition, the epoch it was last
  /// readied in, in host-mapped memory; the device copies nothing, it stores the epoch here
  /// and the host's progression engine moves the bytes and signals the receiver.
  uint64_t* ready = nullptr;
  uint64_t* ctl = nullptr;         ///< this request's control block (kCtl*)
  /// This request's host words (kWord*, host memory mapped here): the device reads the
  /// prepared and started epochs from it and, on the kernel-copy path, stores the epoch into
  /// kWordDone once its last transport partition is delivered.
  uint64_t* host = nullptr;
  unsigned long long* counters = nullptr;  ///< per transport partition: user partitions readied, all epochs
  uint64_t* stamps = nullptr;      ///< per user partition: its preadies over all epochs (claim)
  DeviceErrorRecord* error = nullptr;
  uint64_t partition_bytes = 0;
  uint32_t partitions = 0;         ///< user partitions
  uint32_t threshold = 1;          ///< user partitions per transport partition
  uint32_t transports = 0;         ///< transport partitions per epoch

#if WEFT_DEVICE_CODE
  /// One thread: claims partition p for this epoch; 0 (nothing to do) on misuse, else the epoch.
  WEFT_DEVICE_INLINE uint64_t claim(uint32_t p) const {
    if (p >= partitions) {
      detail::record_error(error, ctl + kCtlClaim, kDevOutOfRange, p, 0);
      return 0;
    }
    return detail::claim(stamps, ctl, host, error, p);
  }
  /// One thread, after its group's copy of partition p (ordered before by the group's
  /// barrier): counts p into its transport partition; the last one signals the receiver,
  /// and the epoch's last transport partition stores the epoch into kWordDone.
  ///
  /// Ordering. A system-scope fence is what makes the data visible to the receiver before a
  /// flag, and the fences of a GPU are costly when thousands of blocks issue them, so there
  /// is one per transport partition, not one per partition: a partition that does not
  /// complete its transport partition releases its data at GPU scope through the counter; the
  /// one that completes it acquires them all through the counter, and its system fence orders
  /// every one of them (cumulatively) before the flag.
  WEFT_DEVICE_INLINE void complete(uint32_t p, uint64_t e) const {
    const uint32_t t = transport_of(p, threshold);
    if (transport_size(partitions, threshold, t) > 1 &&
        !completes_transport(device::atomic_add_release_gpu(counters + t, 1), partitions, threshold, t, e))
      return;
    device::fence_acq_rel_sys();  // every partition's data of the transport partition before its flag
    device::st_relaxed_sys((ready != nullptr ? ready : remote_flags + kFlagFirst) + t, e);
    // Released after the flag, so the block that counts the epoch's last one has seen every
    // flag and every byte of the epoch before its fence and kWordDone.
    const unsigned long long before = device::atomic_add_release_gpu(ctl + kCtlSent, 1);
    if (ready == nullptr && completes_epoch(before, transports, e)) {
      device::fence_acq_rel_sys();
      device::st_relaxed_sys(host + kWordDone, e);
    }
  }
  /// Every thread, each for its own partition p (thread granularity).
  WEFT_DEVICE_INLINE void pready_thread(uint32_t p) const {
    const uint64_t e = claim(p);
    if (e == 0) return;
    const uint64_t off = static_cast<uint64_t>(p) * partition_bytes;
    if (ready == nullptr) {
      device::MemoryChannelDeviceHandle ch = channel;  // put is not const
      ch.put(off, off, partition_bytes, device::ThreadGroup{0, 1});
    }
    complete(p, e);
  }
  /// Every thread of a warp, one partition p for the warp (warp granularity).
  WEFT_DEVICE_INLINE void pready_warp(uint32_t p) const {
    __syncwarp();
    const uint32_t lane = threadIdx.x & 31u;
    uint64_t e = lane == 0 ? claim(p) : 0;
    e = __shfl_sync(0xffffffffu, e, 0);
    if (e == 0) return;
    const uint64_t off = static_cast<uint64_t>(p) * partition_bytes;
    if (ready == nullptr) {
      device::MemoryChannelDeviceHandle ch = channel;  // put is not const
      ch.put(off, off, partition_bytes, device::ThreadGroup::warp());
    }
    __syncwarp();
    if (lane == 0) complete(p, e);
  }
  /// Every thread of a block, one partition p for the block (block granularity).
  WEFT_DEVICE_INLINE void pready_block(uint32_t p) const {
    __shared__ uint64_t s_epoch;
    __syncthreads();
    if (threadIdx.x == 0) s_epoch = claim(p);
    __syncthreads();
    const uint64_t e = s_epoch;
    if (e == 0) return;
    const uint64_t off = static_cast<uint64_t>(p) * partition_bytes;
    if (ready == nullptr) {
      device::MemoryChannelDeviceHandle ch = channel;  // put is not const
      ch.put(off, off, partition_bytes, device::ThreadGroup::block());
    }
    __syncthreads();
    if (threadIdx.x == 0) complete(p, e);
  }
#endif
};
static_assert(std::is_trivially_copyable_v<PsendDeviceHandle>);

struct PrecvDeviceHandle {
  const char* buf = nullptr;        ///< the receive buffer
  const uint64_t* flags = nullptr;  ///< this request's flag block (kFlag*)
  /// This request's host words (host memory mapped here): kWordStarted is the current epoch.
  const uint64_t* host = nullptr;
  uint32_t partitions = 0;
  uint64_t partition_bytes = 0;

#if WEFT_DEVICE_CODE
  /// Any thread: true once partition p of the current epoch has arrived (false when p is
  /// out of range). A true result orders the partition's data before the caller's later reads
  /// (read them with ld.cg / volatile loads, or after a __syncthreads for the block). The
  /// current epoch is the one the host's last start began (arrived_in): the kernel that calls
  /// parrived for epoch e must finish before the host starts epoch e + 1.
  WEFT_DEVICE_INLINE bool parrived(uint32_t p) const {
    if (p >= partitions) return false;
    const uint64_t thr = device::ld_acquire_sys(flags + kFlagThreshold);
    if (thr == 0) return false;
    const uint64_t f = device::ld_acquire_sys(flags + kFlagFirst + transport_of_peer(p, thr, partitions));
    const detail::DeviceSeenMemory m{const_cast<uint64_t*>(flags + kFlagStartedSeen), host};
    return arrived_cached(m, f);
  }
#endif
};
static_assert(std::is_trivially_copyable_v<PrecvDeviceHandle>);

}  // namespace weft::part

#include "weft/part/collective_device.hpp"
