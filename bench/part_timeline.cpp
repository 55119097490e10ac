#include "part_timeline.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>
#include <numeric>

namespace partbench {

using weft::part::EpochTrace;
using weft::part::EpochTraceRecord;

bool clock_offset(const std::vector<ClockSample>& samples, int64_t* offset_ns, int64_t* uncertainty_ns) {
  const ClockSample* best = nullptr;
  for (const ClockSample& s : samples)
    if (s.host_after >= s.host_before && (!best || s.host_after - s.host_before < best->host_after - best->host_before))
      best = &s;
  if (!best) return false;
  const int64_t mid = best->host_before + (best->host_after - best->host_before) / 2;
  *offset_ns = static_cast<int64_t>(best->device) - mid;
  *uncertainty_ns = (best->host_after - best->host_before + 1) / 2;
  return true;
}

namespace {

int64_t ns(EpochTrace::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// The events of the timeline, in the order they are first listed (then sorted by mean).
enum Event : int {
  kRecvPrevWaitOut, kRecvStart, kRecvReady, kSendStart, kSendStartOut, kSendPrepIn, kSendReadySeen, kSendPrepared,
  kLaunchIn, kLaunchOut, kSendWaitIn, kKernelFirst, kKernelLast, kEngineSeen, kEnginePost, kEnginePosted,
  kEngineLanded, kEngineDone, kSendWaitOut, kRecvWaitIn, kRecvWaitOut, kSendNextStart, kEvents
};

struct EventName {
  const char* name;
  int rank;
};
constexpr EventName kNames[kEvents] = {
    {"receiver: last epoch's wait returned", 1},
    {"receiver: start", 1},
    {"receiver: ready stored (pbuf_prepare returned)", 1},
    {"sender: start", 0},
    {"sender: start returned", 0},
    {"sender: pbuf_prepare entered", 0},
    {"sender: ready seen", 0},
    {"sender: prepared stored (pbuf_prepare returned)", 0},
    {"sender: kernel launch called", 0},
    {"sender: kernel launch returned", 0},
    {"sender: wait entered", 0},
    {"device: first block started", 0},
    {"device: last block's pready returned", 0},
    {"engine: a ready flag seen", 0},
    {"engine: first copy submitted", 0},
    {"engine: last submission returned", 0},
    {"engine: every copy landed", 0},
    {"engine: done word stored", 0},
    {"sender: wait returned (done seen)", 0},
    {"receiver: wait entered", 1},
    {"receiver: wait returned (done seen)", 1},
    {"sender: next start", 0},
};

struct Acc {
  double sum = 0, lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  int n = 0;
  void add(int64_t at_ns, int64_t origin_ns) {
    if (at_ns == 0) return;  // not recorded
    const double us = static_cast<double>(at_ns - origin_ns) / 1e3;
    sum += us;
    lo = std::min(lo, us);
    hi = std::max(hi, us);
    ++n;
  }
};

template <class T>
std::map<uint64_t, const T*> by_epoch(const std::vector<T>& v) {
  std::map<uint64_t, const T*> m;
  for (const T& x : v) m[x.epoch] = &x;
  return m;
}

void add_engine(Acc* acc, const EpochTrace& t, int64_t origin) {
  if (!t.has_engine) return;
  acc[kEngineSeen].add(ns(t.engine.seen), origin);
  acc[kEnginePost].add(ns(t.engine.post), origin);
  acc[kEnginePosted].add(ns(t.engine.posted), origin);
  acc[kEngineLanded].add(ns(t.engine.landed), origin);
  acc[kEngineDone].add(ns(t.engine.done), origin);
}

}  // namespace

std::vector<TimelineRow> build_timeline(const std::vector<EpochTraceRecord>& sender,
                                        const std::vector<EpochTraceRecord>& receiver,
                                        const std::vector<BenchEpoch>& bench) {
  const auto S = by_epoch(sender), R = by_epoch(receiver);
  const auto B = by_epoch(bench);
  Acc acc[kEvents];
  for (const auto& [e, s] : S) {
    const auto r = R.find(e);
    if (r == R.end()) continue;
    const EpochTrace& st = s->t;
    const EpochTrace& rt = r->second->t;
    const int64_t o = ns(st.start_in);
    if (const auto rp = R.find(e - 1); rp != R.end()) acc[kRecvPrevWaitOut].add(ns(rp->second->t.wait_out), o);
    acc[kRecvStart].add(ns(rt.start_in), o);
    acc[kRecvReady].add(ns(rt.prep_out), o);
    acc[kSendStart].add(o, o);
    acc[kSendStartOut].add(ns(st.start_out), o);
    acc[kSendPrepIn].add(ns(st.prep_in), o);
    if (st.waited_ready) acc[kSendReadySeen].add(ns(st.ready_seen), o);
    acc[kSendPrepared].add(ns(st.prep_out), o);
    if (const auto b = B.find(e); b != B.end()) {
      acc[kLaunchIn].add(b->second->launch_in, o);
      acc[kLaunchOut].add(b->second->launch_out, o);
      acc[kKernelFirst].add(b->second->kernel_first, o);
      acc[kKernelLast].add(b->second->kernel_last, o);
    }
    acc[kSendWaitIn].add(ns(st.wait_in), o);
    add_engine(acc, st, o);
    acc[kSendWaitOut].add(ns(st.wait_out), o);
    acc[kRecvWaitIn].add(ns(rt.wait_in), o);
    acc[kRecvWaitOut].add(ns(rt.wait_out), o);
    if (const auto sn = S.find(e + 1); sn != S.end()) acc[kSendNextStart].add(ns(sn->second->t.start_in), o);
  }
  std::vector<TimelineRow> rows;
  for (int i = 0; i < kEvents; ++i) {
    if (acc[i].n == 0) continue;
    rows.push_back(TimelineRow{kNames[i].name, kNames[i].rank, acc[i].sum / acc[i].n, acc[i].lo, acc[i].hi, acc[i].n});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TimelineRow& a, const TimelineRow& b) { return a.mean_us < b.mean_us; });
  return rows;
}

double mean_period_us(const std::vector<EpochTraceRecord>& sender) {
  const auto S = by_epoch(sender);
  double sum = 0;
  int n = 0;
  for (const auto& [e, s] : S)
    if (const auto next = S.find(e + 1); next != S.end()) {
      sum += static_cast<double>(ns(next->second->t.start_in) - ns(s->t.start_in)) / 1e3;
      ++n;
    }
  return n ? sum / n : 0;
}

void print_timeline(const std::vector<TimelineRow>& rows) {
  std::printf("#   %-48s %4s %9s %9s %9s %8s %6s   (us from the sender's start of the same epoch)\n", "event", "rank",
              "mean", "min", "max", "gap", "epochs");
  double prev = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TimelineRow& r = rows[i];
    std::printf("#   %-48s %4d %9.2f %9.2f %9.2f %8.2f %6d\n", r.event.c_str(), r.rank, r.mean_us, r.min_us, r.max_us,
                i == 0 ? 0.0 : r.mean_us - prev, r.epochs);
    prev = r.mean_us;
  }
}

namespace {
/// The floor line's columns: (header, event).
constexpr std::pair<const char*, int> kFloorColumns[] = {
    {"r_ready", kRecvReady},      {"s_ready", kSendReadySeen}, {"s_prep", kSendPrepared}, {"launched", kLaunchOut},
    {"k_first", kKernelFirst},    {"k_last", kKernelLast},     {"e_seen", kEngineSeen},   {"e_post", kEnginePost},
    {"e_landed", kEngineLanded},  {"s_done", kSendWaitOut},    {"r_done", kRecvWaitOut},
};
}  // namespace

void print_floor_header() {
  std::printf("# floor lines: blocks, path, threshold, then the mean us from the sender's start of an epoch of: r_ready "
              "receiver stored ready-to-receive, s_ready sender saw it, s_prep sender stored prepared, launched kernel "
              "launch returned, k_first first block started, k_last last block's pready returned, e_seen engine saw a "
              "ready flag, e_post its first copy submitted, e_landed every copy landed, s_done / r_done sender's / "
              "receiver's wait returned; period: start to next start\n");
  std::printf("%-5s %6s %6s %9s", "floor", "blocks", "path", "threshold");
  for (const auto& c : kFloorColumns) std::printf(" %8s", c.first);
  std::printf(" %9s\n", "period");
}

void print_floor_row(int blocks, const char* path, int threshold, const std::vector<TimelineRow>& rows, double period_us) {
  std::printf("%-5s %6d %6s %9d", "floor", blocks, path, threshold);
  for (const auto& c : kFloorColumns) {
    const TimelineRow* hit = nullptr;
    for (const TimelineRow& r : rows)
      if (r.event == kNames[c.second].name) hit = &r;
    if (hit) std::printf(" %8.2f", hit->mean_us);
    else std::printf(" %8s", "-");
  }
  std::printf(" %9.2f\n", period_us);
}

Steps analyse_blocks(int G, const std::vector<uint64_t>& st, std::vector<int>* order) {
  Steps r;
  uint64_t first = ~0ull, last = 0;
  for (int b = 0; b < G; ++b) {
    const uint64_t* s = &st[static_cast<size_t>(kStamps) * b];
    first = std::min(first, s[0]);
    last = std::max(last, s[4]);
    r.add += (s[1] - s[0]) / 1e3;
    r.claim += (s[2] - s[1]) / 1e3;
    r.claim_max = std::max(r.claim_max, (s[2] - s[1]) / 1e3);
    r.copy += (s[3] - s[2]) / 1e3;
    r.done += (s[4] - s[3]) / 1e3;
    r.pready += (s[4] - s[1]) / 1e3;
    r.pready_max = std::max(r.pready_max, (s[4] - s[1]) / 1e3);
  }
  r.span = (last - first) / 1e3;
  for (double* m : {&r.add, &r.claim, &r.copy, &r.done, &r.pready}) *m /= G;
  order->resize(G);
  std::iota(order->begin(), order->end(), 0);
  std::stable_sort(order->begin(), order->end(), [&](int x, int y) {
    return st[kStamps * static_cast<size_t>(x) + 1] < st[kStamps * static_cast<size_t>(y) + 1];
  });
  if (G > 1) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < G; ++i) {
      const double y = static_cast<double>(st[kStamps * static_cast<size_t>((*order)[i]) + 2] - first);
      sx += i;
      sy += y;
      sxx += static_cast<double>(i) * i;
      sxy += i * y;
    }
    r.slope_ns = (G * sxy - sx * sy) / (G * sxx - sx * sx);
  }
  return r;
}

void print_blocks(int G, const std::vector<uint64_t>& st, const std::vector<int>& order, int rows) {
  const uint64_t t0 = st[kStamps * static_cast<size_t>(order[0]) + 1];
  const int n = rows <= 0 || rows >= G ? G : rows;
  std::printf("#   %6s %6s %10s %10s %10s %10s   (us from the earliest pready start)\n", "order", "block", "start",
              "claimed", "copied", "end");
  for (int j = 0; j < n; ++j) {
    const int i = n == 1 ? 0 : static_cast<int>(static_cast<int64_t>(j) * (G - 1) / (n - 1));
    const uint64_t* s = &st[kStamps * static_cast<size_t>(order[i])];
    std::printf("#   %6d %6d %10.2f %10.2f %10.2f %10.2f\n", i, order[i], (s[1] - t0) / 1e3, (s[2] - t0) / 1e3,
                (s[3] - t0) / 1e3, (s[4] - t0) / 1e3);
  }
}

}  // namespace partbench
