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
using Clock = EpochTrace::Clock;

double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

/// " +X.X us" from `origin`, or " -" when `t` was not recorded.
std::string since(Clock::time_point origin, Clock::time_point t) {
  if (t == Clock::time_point{}) return " -";
  char b[32];
  std::snprintf(b, sizeof b, " %+.1f us", us(origin, t));
  return b;
}

Clock::time_point from_ns(int64_t ns) {
  return ns == 0 ? Clock::time_point{} : Clock::time_point{std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns))};
}

std::atomic<EpochTraceSink> g_sink{nullptr};
}  // namespace

void EngineStamps::reset() {
  for (std::atomic<int64_t>* a : {&seen, &post, &posted, &landed, &done}) a->store(0, std::memory_order_relaxed);
  batches.store(0, std::memory_order_relaxed);
}

EngineEpochTrace EngineStamps::snapshot() const {
  EngineEpochTrace t;
  t.seen = from_ns(seen.load(std::memory_order_relaxed));
  t.post = from_ns(post.load(std::memory_order_relaxed));
  t.posted = from_ns(posted.load(std::memory_order_relaxed));
  t.landed = from_ns(landed.load(std::memory_order_relaxed));
  t.done = from_ns(done.load(std::memory_order_relaxed));
  t.batches = batches.load(std::memory_order_relaxed);
  return t;
}

std::string format_epoch_trace(const std::string& who, uint64_t epoch, const EpochTrace& t, Clock::time_point prev_end) {
  char ready[64] = "";
  if (t.waited_ready) std::snprintf(ready, sizeof ready, " (ready-to-receive after %.1f us)", us(t.prep_in, t.ready_seen));
  char line[512];
  std::snprintf(line, sizeof line,
                "weft part trace: %s: epoch %llu: start %.1f us, pbuf_prepare %.1f us%s, caller %.1f us, wait %.1f us "
                "(%llu polls), epoch %.1f us, since the last epoch's end %.1f us; at %.3f us",
                who.c_str(), static_cast<unsigned long long>(epoch), us(t.start_in, t.start_out),
                us(t.prep_in, t.prep_out), ready, us(t.prep_out, t.wait_in), us(t.wait_in, t.wait_out),
                static_cast<unsigned long long>(t.polls), us(t.start_in, t.wait_out), us(prev_end, t.start_in),
                std::chrono::duration<double, std::micro>(t.start_in.time_since_epoch()).count());
  std::string s = line;
  if (t.has_engine) {
    const EngineEpochTrace& g = t.engine;
    s += "; engine: ready seen" + since(t.start_in, g.seen) + ", copies submitted" + since(t.start_in, g.post) + ".." +
         since(t.start_in, g.posted).substr(1) + " (" + std::to_string(g.batches) + " batches), landed" +
         since(t.start_in, g.landed) + ", done stored" + since(t.start_in, g.done);
  }
  return s;
}

void set_epoch_trace_sink(EpochTraceSink sink) { g_sink.store(sink, std::memory_order_release); }

void emit_epoch_trace(const std::string& who, const EpochTraceRecord& r) {
  if (EpochTraceSink sink = g_sink.load(std::memory_order_acquire)) {
    sink(r);
    return;
  }
  std::fprintf(stderr, "%s\n", format_epoch_trace(who, r.epoch, r.t, r.prev_end).c_str());
}

}  // namespace weft::part
