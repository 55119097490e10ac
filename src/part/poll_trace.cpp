#include <cstdio>

#include "part/poll.hpp"
#include "part/trace.hpp"
#include "util/config.hpp"

namespace weft::part {

HostDeadline::HostDeadline(double seconds)
    : end_(std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(config::wait_seconds(seconds)))),
      seconds_(seconds) {}

namespace {
double us(EpochTrace::Clock::time_point a, EpochTrace::Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
}  // namespace

std::string format_epoch_trace(const std::string& who, uint64_t epoch, const EpochTrace& t,
                               EpochTrace::Clock::time_point prev_end) {
  char ready[64] = "";
  if (t.waited_ready) std::snprintf(ready, sizeof ready, " (ready-to-receive after %.1f us)", us(t.prep_in, t.ready_seen));
  char line[512];
  std::snprintf(line, sizeof line,
                "weft part trace: %s: epoch %llu: start %.1f us, pbuf_prepare %.1f us%s, caller %.1f us, wait %.1f us "
                "(%llu polls), epoch %.1f us, since the last epoch's end %.1f us",
                who.c_str(), static_cast<unsigned long long>(epoch), us(t.start_in, t.start_out),
                us(t.prep_in, t.prep_out), ready, us(t.prep_out, t.wait_in), us(t.wait_in, t.wait_out),
                static_cast<unsigned long long>(t.polls), us(t.start_in, t.wait_out), us(prev_end, t.start_in));
  return line;
}

}  // namespace weft::part
