#include "proxy/trace.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cctype>
#include <ctime>

#include "util/config.hpp"
#include "util/log.hpp"

namespace weft::proxy {

namespace {
constexpr const char* kNames[] = {"take",      "put",        "signal_now",  "signal_deferred", "signal_written",
                                  "mark",      "landed",     "flush_begin", "flush_end",       "stage_copy",
                                  "stage_copied", "stage_put", "stage_released", "watch"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(TraceEvent::Count));

/// Letters, digits, '-' and '_' of `s`, the rest as '_': a file name part.
std::string file_part(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? "proxy" : out;
}
}  // namespace

const char* trace_event_name(TraceEvent e) {
  const auto i = static_cast<size_t>(e);
  return i < static_cast<size_t>(TraceEvent::Count) ? kNames[i] : "?";
}

std::unique_ptr<Trace> Trace::from_environment(const std::string& owner) {
  const std::string prefix = config::get_string("WEFT_NET_TRACE");
  if (prefix.empty()) return nullptr;
  return std::make_unique<Trace>(prefix, owner, static_cast<size_t>(config::get_int("WEFT_NET_TRACE_EVENTS")));
}

Trace::Trace(std::string prefix, std::string owner, size_t capacity)
    : prefix_(std::move(prefix)), owner_(file_part(owner)), capacity_(capacity) {
  records_.reserve(std::min<size_t>(capacity_, size_t{1} << 16));
}

Trace::~Trace() {
  if (!written_) write_file();
}

uint64_t Trace::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Trace::add(TraceEvent e, uint32_t channel, uint64_t a, uint64_t b) {
  if (records_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  records_.push_back(Record{now_ns(), e, channel, a, b});
}

void Trace::watch(const uint64_t* word, uint32_t label) {
  watched_.push_back(Watched{word, label, std::atomic_ref<const uint64_t>(*word).load(std::memory_order_acquire)});
}

void Trace::poll_watches() {
  for (Watched& w : watched_) {
    const uint64_t v = std::atomic_ref<const uint64_t>(*w.word).load(std::memory_order_acquire);
    if (v != w.last) {
      w.last = v;
      add(TraceEvent::Watch, w.label, v);
    }
  }
}

std::string Trace::path() const { return prefix_ + "." + owner_ + "." + std::to_string(getpid()) + ".tsv"; }

bool Trace::write_file() {
  written_ = true;
  if (prefix_.empty()) return true;  // a recorder in memory only (tests)
  std::FILE* f = std::fopen(path().c_str(), "w");
  if (f == nullptr) {
    WEFT_LOG(Warn, "NET", "WEFT_NET_TRACE: cannot write " << path());
    return false;
  }
  std::fprintf(f, "# weft network trace of %s: t_ns event channel a b (docs/port-channels.md)\n", owner_.c_str());
  for (const Record& r : records_)
    std::fprintf(f, "%llu\t%s\t%u\t%llu\t%llu\n", static_cast<unsigned long long>(r.t_ns), trace_event_name(r.event),
                 r.channel, static_cast<unsigned long long>(r.a), static_cast<unsigned long long>(r.b));
  if (dropped_ > 0) std::fprintf(f, "# %llu events dropped (WEFT_NET_TRACE_EVENTS)\n", static_cast<unsigned long long>(dropped_));
  const bool ok = std::fclose(f) == 0;
  WEFT_LOG(Info, "NET", "network trace " << path() << ": " << summary());
  return ok;
}

std::string Trace::summary() const {
  uint64_t takes = 0, bytes = 0, held = 0, held_max = 0, deferred = 0, now = 0;
  for (const Record& r : records_) {
    switch (r.event) {
      case TraceEvent::Take: ++takes; break;
      case TraceEvent::Put: bytes += r.a; break;
      case TraceEvent::SignalNow: ++now; break;
      case TraceEvent::SignalWritten:
        ++deferred;
        held += r.b;
        held_max = std::max(held_max, r.b);
        break;
      default: break;
    }
  }
  const double span_s = records_.size() < 2 ? 0 : (records_.back().t_ns - records_.front().t_ns) * 1e-9;
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%zu events%s, %llu triggers, %.1f MiB put in %.3f s (%.2f GB/s), signals: %llu at once, %llu after "
                "their puts landed (held %.1f us on average, %.1f us at most)",
                records_.size(), dropped_ ? " (some dropped)" : "", static_cast<unsigned long long>(takes),
                bytes / 1048576.0, span_s, span_s > 0 ? bytes / span_s * 1e-9 : 0.0,
                static_cast<unsigned long long>(now), static_cast<unsigned long long>(deferred),
                deferred ? held / 1e3 / static_cast<double>(deferred) : 0.0, held_max / 1e3);
  return buf;
}

}  // namespace weft::proxy
