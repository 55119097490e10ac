// Host-side waiting of partitioned requests (CUDA-free, unit tested): a bounded deadline and
// the pacing of a poll loop. A poll loop spins on the CPU's pause instruction for its first
// kSpinPolls polls (an epoch's signal usually comes within microseconds), then yields the
// core between polls; it never sleeps, and it checks its deadline every 64 polls.
#pragma once

#include <chrono>
#include <cstdint>
#include <thread>

namespace weft::part {

/// A bounded host wait: WEFT_TIMEOUT's rule (config::wait_seconds) from construction.
class HostDeadline {
 public:
  explicit HostDeadline(double seconds);
  bool passed() const { return std::chrono::steady_clock::now() > end_; }
  double seconds() const { return seconds_; }

 private:
  std::chrono::steady_clock::time_point end_;
  double seconds_;
};

/// One pause of a spin loop (x86 pause, Arm yield; nothing elsewhere).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class Poller {
 public:
  static constexpr uint64_t kSpinPolls = 4096;
  explicit Poller(double timeout_s) : deadline_(timeout_s) {}
  /// After a poll that found nothing: pauses (spin, then yield). False once the deadline has
  /// passed (checked every 64 polls).
  bool next() {
    ++polls_;
    if (polls_ < kSpinPolls) cpu_relax();
    else std::this_thread::yield();
    return (polls_ & 63u) != 0 || !deadline_.passed();
  }
  uint64_t polls() const { return polls_; }
  double seconds() const { return deadline_.seconds(); }

 private:
  HostDeadline deadline_;
  uint64_t polls_ = 0;
};

}  // namespace weft::part
