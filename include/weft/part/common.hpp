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
