// Bounded waiting on the device. Every spin in weft's device code goes through spin_until:
// it re-checks its condition, and every few hundred iterations the deadline (WEFT_TIMEOUT,
// read through %globaltimer) and an abort flag the host may set. It never spins forever.
#pragma once

#include <cstdint>

#include "weft/device/atomics.hpp"
#include "weft/device/macros.hpp"

namespace weft::device {

/// How a bounded wait ended.
enum class WaitResult : int { Ok = 0, Timeout = 1, Aborted = 2 };

/// A deadline and the flags that cut waits short. Trivially copyable; pass by value.
/// `abort` may point to host-mapped memory (weftCommAbort sets it) and `error` to device
/// memory (set when any thread block of the rank has failed); either may be null.
struct Deadline {
  uint64_t end_ns = ~0ull;
  const volatile uint32_t* abort = nullptr;
  const volatile uint32_t* error = nullptr;
};

#if WEFT_DEVICE_CODE
/// A deadline `timeout_ns` from now (0: none).
WEFT_DEVICE_INLINE Deadline deadline_after(uint64_t timeout_ns, const volatile uint32_t* abort = nullptr,
                                          const volatile uint32_t* error = nullptr) {
  Deadline d;
  d.end_ns = timeout_ns == 0 ? ~0ull : globaltimer() + timeout_ns;
  d.abort = abort;
  d.error = error;
  return d;
}

/// One check of the deadline and the error flag, and of the host's abort flag when
/// `with_abort` (it may live in host memory: a read crosses PCIe, so loops read it rarely).
WEFT_DEVICE_INLINE WaitResult check_deadline(const Deadline& d, bool with_abort = true) {
  if (d.error != nullptr && *d.error != 0) return WaitResult::Aborted;
  if (with_abort && d.abort != nullptr && *d.abort != 0) return WaitResult::Aborted;
  if (globaltimer() > d.end_ns) return WaitResult::Timeout;
  return WaitResult::Ok;
}

/// Spins until `ready()` returns true, the deadline passes, or an abort flag is set.
/// Called by any number of threads, each waiting on its own condition.
template <typename Ready>
WEFT_DEVICE_INLINE WaitResult spin_until(Ready ready, const Deadline& d) {
  uint32_t spins = 0;
  while (!ready()) {
    if ((++spins & 255u) == 0) {
      WaitResult r = check_deadline(d, (spins & 65535u) == 0);
      if (r != WaitResult::Ok) return r;
    }
  }
  return WaitResult::Ok;
}
#endif

}  // namespace weft::device
