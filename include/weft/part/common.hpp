// Device-visible pieces shared by weft's partitioned point-to-point and collective device
// handles: the error record, the layouts of the control and flag blocks and of a request's
// host words, the claim of a partition and the transport-partition arithmetic.
#pragma once

#include <cstdint>

#include "weft/device/atomics.hpp"
#include "weft/device/macros.hpp"
#include "weft/device/wait.hpp"

namespace weft::part {

/// Written by the device when a call is misused; read by the host (host-mapped memory).
struct DeviceErrorRecord {
  uint32_t valid;      ///< written last
  uint32_t code;       ///< DeviceErrorCode
  uint64_t partition;
  uint64_t epoch;
};

/// Device-side misuse codes, recorded by a device pready into its request's error record.
enum DeviceErrorCode : uint32_t {
  kDevOk = 0,
  kDevOutOfRange = 1,
  kDevTwice = 2,
  kDevNotStarted = 3,
  kDevCollTimeout = 4,  ///< a collective's wait for a neighbour's message timed out
  kDevNotPrepared = 5,  ///< started, but pbuf_prepare has not returned: the receiver may not be ready
};

/// Layout of a receive request's flag block (device memory of the receiver; the sender
/// writes into it through its mapping): [0] the sender's threshold, [1] the largest `started`
/// a device parrived has read from the receiver's host words (arrived_cached; only the
/// receiver's device writes it), then one flag per transport partition holding the epoch it
/// last arrived in.
constexpr uint32_t kFlagThreshold = 0, kFlagStartedSeen = 1, kFlagFirst = 2;
/// Layout of a send request's (or a collective's) control block, device memory:
///   kCtlEpoch    the device's cache of the prepared epoch (never above kWordPrepared: a block
///                that finds its epoch at or below it needs no read of host memory)
///   kCtlReader   the highest epoch a block took on reading the host words for (the claim's
///                election: one reader per epoch, the others wait on device memory)
///   kCtlChecked  the highest epoch whose reader has raised the cache (or found it a misuse)
///   kCtlSent     transport partitions completed by the device since the last resync (the
///                host sets it to transports x completed epochs)
///   kCtlClaim    the error claim (the first device error of the request wins)
/// kCtlReader, kCtlChecked and kCtlSent are consecutive: a resync after a misuse writes them
/// with one copy (part/resync.hpp).
constexpr uint32_t kCtlEpoch = 0, kCtlReader = 1, kCtlChecked = 2, kCtlSent = 3, kCtlClaim = 4, kCtlWords = 5;
/// A request's host words: one 64-byte slot of its rank's shared segment (POSIX shared
/// memory, mapped by every rank of the host and registered with CUDA, so the owner's GPU
/// reads and writes it too). Every word holds an epoch; all grow monotonically.
///   kWordReady     send: the epoch the receiver is ready for (the receiver's host stores it)
///   kWordDone      send: the last epoch whose every partition was delivered (the sender's
///                  GPU, progression engine or host pready stores it; both hosts read it)
///   kWordPrepared  send / collective: the last epoch whose pbuf_prepare returned (the host
///                  stores it before the kernel may pready; the device checks against it)
///   kWordStarted   every request: the last epoch started (receive: what device parrived
///                  compares the flags with; send: names a misuse)
constexpr uint32_t kWordReady = 0, kWordDone = 1, kWordPrepared = 2, kWordStarted = 3, kSlotWords = 8;

// Transport-partition arithmetic, shared by the device pready, the host's counter resync and
// the host unit test (tests/unit/part/test_part_transport.cpp). `threshold` consecutive user
// partitions form one transport partition; the last one holds the remainder. A transport
// partition's counter counts its user partitions' preadies over every epoch, so epoch e
// completes it when the counter reaches transport_size * e.

/// The transport partition of user partition p.
WEFT_HOST_DEVICE_INLINE uint32_t transport_of(uint32_t p, uint32_t threshold) { return p / threshold; }
/// transport_of for a threshold read from a receive request's flag block (kFlagThreshold: the
/// peer writes it, so any 64-bit value; callers have refused 0): one at or above `partitions`
/// is one transport partition, never a value truncated to 32 bits (2^32 would divide by 0).
WEFT_HOST_DEVICE_INLINE uint32_t transport_of_peer(uint32_t p, uint64_t threshold, uint32_t partitions) {
  return threshold >= partitions ? 0 : p / static_cast<uint32_t>(threshold);
}
/// User partitions in transport partition t of `partitions` (threshold, or the remainder).
WEFT_HOST_DEVICE_INLINE uint64_t transport_size(uint32_t partitions, uint32_t threshold, uint32_t t) {
  const uint32_t first = t * threshold;
  return partitions - first < threshold ? partitions - first : threshold;
}
/// True when the pready that found transport partition t's counter at `before` (and added
/// one) is the one that completes t in epoch e: it signals the receiver, exactly once.
WEFT_HOST_DEVICE_INLINE bool completes_transport(unsigned long long before, uint32_t partitions, uint32_t threshold,
                                                 uint32_t t, uint64_t e) {
  return before + 1 == transport_size(partitions, threshold, t) * e;
}
/// True when the transport partition that found the sent counter at `before` is the last of
/// epoch e (`transports` per epoch, counter resynced to transports x completed epochs): it
/// stores e into kWordDone, once per epoch.
WEFT_HOST_DEVICE_INLINE bool completes_epoch(unsigned long long before, uint32_t transports, uint64_t e) {
  return before + 1 == static_cast<uint64_t>(transports) * e;
}

/// parrived's rule, host and device, receive requests and collectives: a partition whose
/// flag holds the epoch it last arrived (or finished) in has arrived in the current epoch
/// once that flag reaches `started`, the epoch of the request's last start. `started` is read
/// at each call, so a call of epoch e that is still polling when the host starts epoch e + 1
/// waits for e + 1's data: every device parrived of an epoch must have returned (its kernel
/// finished) before the next start (docs/partitioned.md, "Epochs back to back").
WEFT_HOST_DEVICE_INLINE bool arrived_in(uint64_t flag, uint64_t started) { return started != 0 && flag >= started; }

/// arrived_in for a device parrived without a read of host memory while it polls (issue 28:
/// `started` lives in host memory, a PCIe round trip per call). `flag` is the partition's
/// flag, loaded first (acquire). `m` gives load_seen() (the flag block's kFlagStartedSeen,
/// device memory), load_started() (the host word, acquire) and raise_seen(s) (atomic max).
/// Since `started` only grows and the cache holds a value it had, a flag below the cache has
/// not arrived in the current epoch: false with no host read. Otherwise the host word is
/// read (a stale cache must not make an old epoch's flag count), the cache raised to it, and
/// arrived_in decides. So an epoch's polls read the host word about once per partition (at
/// the start of the epoch, or where the flag already holds the cached epoch).
template <class Mem>
WEFT_HOST_DEVICE_INLINE bool arrived_cached(Mem& m, uint64_t flag) {
  if (flag == 0 || flag < m.load_seen()) return false;
  const uint64_t started = m.load_started();
  if (started == 0) return false;
  m.raise_seen(started);
  return arrived_in(flag, started);
}

/// A partition's stamp counts its preadies over every epoch (resynced to the completed epochs
/// after a misuse), so the pready that finds it at `stamp` belongs to epoch stamp + 1. That
/// pready may send when its epoch is at most the prepared one; else it is a misuse:
/// DeviceErrorCode of a pready in epoch `e` given the host's prepared and started epochs.
WEFT_HOST_DEVICE_INLINE uint32_t claim_error(uint64_t e, uint64_t prepared, uint64_t started) {
  if (e <= prepared) return kDevOk;
  if (started == 0) return kDevNotStarted;
  if (e <= started) return kDevNotPrepared;
  return kDevTwice;  // a second pready in `started` (or one after it completed)
}
/// The epoch a misuse record names: the epoch the partition was readied twice in, else e.
WEFT_HOST_DEVICE_INLINE uint64_t claim_error_epoch(uint32_t code, uint64_t e) { return code == kDevTwice ? e - 1 : e; }

// The claim's slow path: a pready whose epoch e is above the device's cache of the prepared
// epoch. Host memory is read by one block per epoch: the first to raise kCtlReader to e
// reads kWordPrepared (and kWordStarted only on a misuse), raises the cache, then kCtlChecked;
// the others wait on those two device words (relaxed GPU-scope loads with a growing sleep
// between them). Many blocks reading the same host words with strong system-scope loads at
// once costs about a microsecond per read, one after the other (round 3 on two H200s: the
// kernel-copy path grew by 1.9 us per resident block; docs/partitioned.md, "The claim").
// A waiter reads the host words itself, as the reader does, when the reader found its epoch
// not prepared (a misuse: it records its own error) or after kClaimWaitNs (a reader held up:
// still right, only slower), so nothing here waits without bound and no misuse goes unnamed.
//
// Written once over the memory operations of `M`, so that the CPU test
// (tests/unit/part/test_part_claim.cpp) runs this code with threads as blocks:
//   raise_reader(e) -> old    atomic max on kCtlReader
//   raise_cache(v)            atomic max on kCtlEpoch
//   raise_checked(e)          atomic max on kCtlChecked, released after raise_cache
//   load_cache(), load_checked()   device words (checked acquired)
//   load_prepared(), load_started() the host words (system scope, acquire)
//   wait(ready) -> bool       polls ready() until true (true) or kClaimWaitNs passed (false)
//   record(code, p, epoch)    the request's device error record

/// How long a block waits for its epoch's reader before it reads the host words itself.
constexpr uint64_t kClaimWaitNs = 200000;

/// A read of the host words for a pready of partition p in epoch e: raises the cache to the
/// prepared epoch; returns e, or 0 after recording the misuse.
template <typename M>
WEFT_DEVICE_INLINE uint64_t claim_read(M& m, uint64_t p, uint64_t e) {
  const uint64_t prepared = m.load_prepared();
  m.raise_cache(prepared);
  if (e <= prepared) return e;
  const uint32_t code = claim_error(e, prepared, m.load_started());
  m.record(code, p, claim_error_epoch(code, e));
  return 0;
}

/// The slow path of a pready of partition p in epoch e (above the cache): e, or 0 (misuse).
template <typename M>
WEFT_DEVICE_INLINE uint64_t claim_behind(M& m, uint64_t p, uint64_t e) {
  if (m.raise_reader(e) < e) {  // elected: no block has taken on an epoch >= e
    const uint64_t r = claim_read(m, p, e);
    m.raise_checked(e);  // after the cache: a waiter that sees it sees the cache raised
    return r;
  }
  uint64_t cached = 0;
  const bool answered = m.wait([&] {
    const uint64_t checked = m.load_checked();  // first: what the reader raised before it is seen
    cached = m.load_cache();
    return e <= cached || checked >= e;
  });
  if (answered && e <= cached) return e;
  return claim_read(m, p, e);  // the reader found a misuse, or is late
}

#if WEFT_DEVICE_CODE
namespace detail {
/// One thread: records the first device error of a request (later ones are dropped).
WEFT_DEVICE_INLINE void record_error(DeviceErrorRecord* rec, uint64_t* claim, uint32_t code, uint64_t p, uint64_t e) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(claim), 0ull, 1ull) != 0ull) return;
  rec->code = code;
  rec->partition = p;
  rec->epoch = e;
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(&rec->valid) = 1;
}

/// claim_behind's memory operations on the device: the control block (device memory) and
/// the host words (host memory mapped here).
struct DeviceClaimMemory {
  uint64_t* ctl;
  const uint64_t* host;
  DeviceErrorRecord* error;

  WEFT_DEVICE_INLINE uint64_t raise_reader(uint64_t e) {
    return atomicMax(reinterpret_cast<unsigned long long*>(ctl + kCtlReader), static_cast<unsigned long long>(e));
  }
  WEFT_DEVICE_INLINE void raise_cache(uint64_t v) {
    atomicMax(reinterpret_cast<unsigned long long*>(ctl + kCtlEpoch), static_cast<unsigned long long>(v));
  }
  WEFT_DEVICE_INLINE void raise_checked(uint64_t e) { device::atomic_max_release_gpu(ctl + kCtlChecked, e); }
  WEFT_DEVICE_INLINE uint64_t load_cache() { return device::ld_relaxed_gpu(ctl + kCtlEpoch); }
  WEFT_DEVICE_INLINE uint64_t load_checked() { return device::ld_acquire_gpu(ctl + kCtlChecked); }
  WEFT_DEVICE_INLINE uint64_t load_prepared() { return device::ld_acquire_sys(host + kWordPrepared); }
  WEFT_DEVICE_INLINE uint64_t load_started() { return device::ld_acquire_sys(host + kWordStarted); }
  template <typename Ready>
  WEFT_DEVICE_INLINE bool wait(Ready ready) {
    uint32_t ns = 32;  // the reader's host read takes about a microsecond: sleep up to that
    const auto polled = [&] {
      if (ready()) return true;
      __nanosleep(ns);
      if (ns < 1024) ns *= 2;
      return false;
    };
    return device::spin_until(polled, device::deadline_after(kClaimWaitNs)) == device::WaitResult::Ok;
  }
  WEFT_DEVICE_INLINE void record(uint32_t code, uint64_t p, uint64_t e) {
    record_error(error, ctl + kCtlClaim, code, p, e);
  }
};

/// arrived_cached's memory operations on the device: the cache of `started` (device memory:
/// a receive request's flag word kFlagStartedSeen, a collective's finished[partitions]) and
/// the host words (host memory mapped here).
struct DeviceSeenMemory {
  uint64_t* seen;
  const uint64_t* host;

  WEFT_DEVICE_INLINE uint64_t load_seen() const { return device::ld_relaxed_gpu(seen); }
  WEFT_DEVICE_INLINE uint64_t load_started() const { return device::ld_acquire_sys(host + kWordStarted); }
  WEFT_DEVICE_INLINE void raise_seen(uint64_t s) const {
    atomicMax(reinterpret_cast<unsigned long long*>(seen), static_cast<unsigned long long>(s));
  }
};

/// The claim's slow path, out of line (it costs the caller's hot path no registers).
inline __device__ __noinline__ uint64_t claim_slow(uint64_t* ctl, const uint64_t* host, DeviceErrorRecord* error,
                                                   uint64_t p, uint64_t e) {
  DeviceClaimMemory m{ctl, host, error};
  return claim_behind(m, p, e);
}

/// One thread: claims partition p (already checked to be in range) for the epoch its stamp
/// says; 0 (send nothing) on misuse, else the epoch. The stamp's atomic and the cache's load
/// are both in flight at once; host memory is read only when the cache is behind, by one
/// block per epoch (claim_behind).
WEFT_DEVICE_INLINE uint64_t claim(uint64_t* stamps, uint64_t* ctl, const uint64_t* host, DeviceErrorRecord* error,
                                  uint32_t p) {
  const uint64_t e = atomicAdd(reinterpret_cast<unsigned long long*>(stamps + p), 1ull) + 1;
  const uint64_t cached = device::ld_relaxed_gpu(ctl + kCtlEpoch);
  if (e <= cached) return e;
  return claim_slow(ctl, host, error, p, e);
}
}  // namespace detail
#endif

}  // namespace weft::part
