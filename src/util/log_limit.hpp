// A rate limit for log lines that an outsider can cause at will (a refused bootstrap
// connection: anyone who reaches the port can make one). Within each interval the first
// `burst` lines are printed one by one; the others are counted, and once the interval is
// over one line says how many were left out. When the limiter is destroyed, a last line
// gives the total, if any were left out. So a flood of connections costs a few lines a
// second instead of one line per connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "util/log.hpp"

namespace weft::log {

class Limiter {
 public:
  /// `prefix` starts the count lines; `events` names what is counted ("connections
  /// refused or dropped").
  Limiter(std::string subsys, std::string prefix, std::string events, int burst = 5, double interval_s = 1.0);
  ~Limiter();
  Limiter(const Limiter&) = delete;
  Limiter& operator=(const Limiter&) = delete;

  /// Prints `line` at `level`, or counts it when this interval's burst is spent. A level
  /// that is not enabled is neither printed nor counted.
  void note(Level level, const std::string& line);
  /// Prints the count of an interval that has ended with lines left out (note calls it too;
  /// call it while idle so the count comes out on time).
  void tick();

  int64_t total() const { return total_; }        ///< lines noted (enabled levels)
  int64_t left_out() const { return left_out_; }  ///< of them, not printed one by one

 private:
  using Clock = std::chrono::steady_clock;
  void flush_interval(Clock::time_point now);

  std::string subsys_, prefix_, events_;
  int burst_;
  Clock::duration interval_;
  Clock::time_point start_;
  int printed_ = 0;           ///< lines printed in this interval
  int64_t suppressed_ = 0;    ///< lines left out in this interval
  Level suppressed_level_ = Level::Trace;  ///< the most severe of them
  int64_t total_ = 0, left_out_ = 0;
  Level worst_ = Level::Trace;
};

}  // namespace weft::log
