// Device-visible pieces shared by weft's partitioned point-to-point and collective device
// handles: the error record and the layouts of the control and flag blocks.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"

namespace weft::part {

/// Written by the device when a call is misused; read by the host (host-mapped memory).
struct DeviceErrorRecord {
  uint32_t valid;      ///< written last
  uint32_t code;       ///< part::DeviceErrorCode (src/part/state.hpp); 4: a collective wait timed out
  uint64_t partition;
  uint64_t epoch;
};

/// Layout of a receive request's flag block (device memory of the receiver; the sender
/// writes into it through its mapping): [0] the sender's threshold, [1] this side's epoch,
/// then one flag per transport partition holding the epoch it last arrived in.
constexpr uint32_t kFlagThreshold = 0, kFlagEpoch = 1, kFlagFirst = 2;
/// Layout of a send request's control block (device memory of the sender): [0] reserved
/// (ready-to-receive lives in shared host memory), [1] this side's epoch, [2] transport
/// partitions completed by the device (all epochs), [3] the error claim.
constexpr uint32_t kCtlReserved = 0, kCtlEpoch = 1, kCtlSent = 2, kCtlClaim = 3, kCtlWords = 4;

// Transport-partition arithmetic, shared by the device pready, the host's counter resync and
// the host unit test (tests/unit/part/test_part_transport.cpp). `threshold` consecutive user
// partitions form one transport partition; the last one holds the remainder. A transport
// partition's counter counts its user partitions' preadies over every epoch, so epoch e
// completes it when the counter reaches transport_size * e.

/// The transport partition of user partition p.
WEFT_HOST_DEVICE_INLINE uint32_t transport_of(uint32_t p, uint32_t threshold) { return p / threshold; }
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
}  // namespace detail
#endif

}  // namespace weft::part
