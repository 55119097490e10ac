#include "util/log_limit.hpp"

#include <algorithm>

#include "util/text.hpp"

namespace weft::log {

Limiter::Limiter(std::string subsys, std::string prefix, std::string events, int burst, double interval_s)
    : subsys_(std::move(subsys)),
      prefix_(std::move(prefix)),
      events_(std::move(events)),
      burst_(std::max(1, burst)),
      interval_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s))),
      start_(Clock::now()) {}

Limiter::~Limiter() {
  flush_interval(Clock::now());
  if (left_out_ > 0 && enabled(worst_, subsys_))
    write(worst_, subsys_,
          text::format("%s: %lld %s in all (%lld of them not logged one by one)", prefix_.c_str(),
                       static_cast<long long>(total_), events_.c_str(), static_cast<long long>(left_out_)));
}

void Limiter::flush_interval(Clock::time_point now) {
  if (suppressed_ > 0 && enabled(suppressed_level_, subsys_)) {
    const double seconds = std::chrono::duration<double>(now - start_).count();
    write(suppressed_level_, subsys_,
          text::format("%s: %lld more %s in the last %.1f s, not logged one by one", prefix_.c_str(),
                       static_cast<long long>(suppressed_), events_.c_str(), seconds));
  }
  start_ = now;
  printed_ = 0;
  suppressed_ = 0;
  suppressed_level_ = Level::Trace;
}

void Limiter::tick() {
  const auto now = Clock::now();
  if (now - start_ >= interval_) flush_interval(now);
}

void Limiter::note(Level level, const std::string& line) {
  if (!enabled(level, subsys_)) return;
  tick();
  ++total_;
  worst_ = std::max(worst_, level);
  if (printed_ < burst_) {
    ++printed_;
    write(level, subsys_, line);
    return;
  }
  ++suppressed_;
  ++left_out_;
  suppressed_level_ = std::max(suppressed_level_, level);
}

}  // namespace weft::log
