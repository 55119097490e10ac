// part_bench trace's host analysis (bench/part_timeline.cpp): the clock calibration's choice,
// the timeline of an epoch from both ranks' WEFT_PART_TRACE records and the bench's stamps,
// the iteration period, and the per-block steps (the claim's staircase slope).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "part_timeline.hpp"

using namespace partbench;
using weft::part::EpochTrace;
using weft::part::EpochTraceRecord;

namespace {

using C = EpochTrace::Clock;
C::time_point at_ns(int64_t ns) { return C::time_point{std::chrono::duration_cast<C::duration>(std::chrono::nanoseconds(ns))}; }

/// Epoch e's sender record: starts at 100 us x e, its steps `d` us apart.
EpochTraceRecord sender(uint64_t e, bool engine) {
  const int64_t o = static_cast<int64_t>(e) * 100000;
  EpochTraceRecord r;
  r.kind = EpochTraceRecord::kSend;
  r.rank = 0;
  r.peer = 1;
  r.tag = 3;
  r.epoch = e;
  r.t.start_in = at_ns(o);
  r.t.start_out = at_ns(o + 200);
  r.t.prep_in = at_ns(o + 300);
  r.t.ready_seen = at_ns(o + 1000 + static_cast<int64_t>(e) * 100);  // 1.2, 1.3, 1.4 us
  r.t.waited_ready = true;
  r.t.prep_out = at_ns(o + 1500 + static_cast<int64_t>(e) * 100);
  r.t.wait_in = at_ns(o + 6000);
  r.t.wait_out = at_ns(o + 14000);
  if (engine) {
    r.t.has_engine = true;
    r.t.engine.seen = at_ns(o + 9000);
    r.t.engine.post = at_ns(o + 9100);
    r.t.engine.posted = at_ns(o + 10000);
    r.t.engine.landed = at_ns(o + 13000);
    r.t.engine.done = at_ns(o + 13000);
    r.t.engine.batches = 1;
  }
  return r;
}

EpochTraceRecord receiver(uint64_t e) {
  const int64_t o = static_cast<int64_t>(e) * 100000;
  EpochTraceRecord r;
  r.kind = EpochTraceRecord::kRecv;
  r.rank = 1;
  r.peer = 0;
  r.tag = 3;
  r.epoch = e;
  r.t.start_in = at_ns(o - 500);
  r.t.start_out = r.t.prep_in = at_ns(o - 400);
  r.t.prep_out = at_ns(o + 800);
  r.t.wait_in = at_ns(o + 900);
  r.t.wait_out = at_ns(o + 15000);
  return r;
}

const TimelineRow* find(const std::vector<TimelineRow>& rows, const std::string& event) {
  for (const TimelineRow& r : rows)
    if (r.event == event) return &r;
  return nullptr;
}

}  // namespace

TEST(PartTimeline, ClockOffsetTakesTheShortestRoundTrip) {
  int64_t off = 0, unc = 0;
  EXPECT_FALSE(clock_offset({}, &off, &unc));
  std::vector<ClockSample> s = {{1000, 5000, 9000}, {10000, 10800, 60400}, {20000, 19000, 1}, {30000, 32000, 81000}};
  ASSERT_TRUE(clock_offset(s, &off, &unc));
  EXPECT_EQ(off, 60400 - 10400);  // the 800 ns trip, device time at its midpoint
  EXPECT_EQ(unc, 400);
}

TEST(PartTimeline, EveryEventFromTheSendersStartSortedByMean) {
  std::vector<EpochTraceRecord> S = {sender(2, false), sender(3, false), sender(4, false)};
  std::vector<EpochTraceRecord> R = {receiver(2), receiver(3), receiver(4)};
  std::vector<BenchEpoch> B(5);
  for (uint64_t e = 1; e <= 4; ++e) {
    const int64_t o = static_cast<int64_t>(e) * 100000;
    B[e].epoch = e;
    B[e].launch_in = o + 2000;
    B[e].launch_out = o + 5000;
    B[e].kernel_first = o + 7000;
    B[e].kernel_last = o + 12000;
  }
  B[0].epoch = 99;  // no records: ignored
  const std::vector<TimelineRow> rows = build_timeline(S, R, B);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_LE(rows[i - 1].mean_us, rows[i].mean_us) << rows[i].event;
  const TimelineRow* ready = find(rows, "sender: ready seen");
  ASSERT_NE(ready, nullptr);
  EXPECT_DOUBLE_EQ(ready->mean_us, 1.3);
  EXPECT_DOUBLE_EQ(ready->min_us, 1.2);
  EXPECT_DOUBLE_EQ(ready->max_us, 1.4);
  EXPECT_EQ(ready->epochs, 3);
  EXPECT_EQ(ready->rank, 0);
  const TimelineRow* first = find(rows, "receiver: start");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(rows.front().event, "receiver: last epoch's wait returned");  // -85 us: the loop before
  EXPECT_DOUBLE_EQ(first->mean_us, -0.5);
  EXPECT_EQ(first->rank, 1);
  ASSERT_NE(find(rows, "device: last block's pready returned"), nullptr);
  EXPECT_DOUBLE_EQ(find(rows, "device: last block's pready returned")->mean_us, 12.0);
  EXPECT_DOUBLE_EQ(find(rows, "receiver: wait returned (done seen)")->mean_us, 15.0);
  // The loop's ends: only epochs whose neighbour was recorded.
  ASSERT_NE(find(rows, "sender: next start"), nullptr);
  EXPECT_EQ(find(rows, "sender: next start")->epochs, 2);
  EXPECT_DOUBLE_EQ(find(rows, "sender: next start")->mean_us, 100.0);
  ASSERT_NE(find(rows, "receiver: last epoch's wait returned"), nullptr);
  EXPECT_DOUBLE_EQ(find(rows, "receiver: last epoch's wait returned")->mean_us, -85.0);
  EXPECT_EQ(find(rows, "engine: a ready flag seen"), nullptr);  // the kernel path has no engine
  EXPECT_DOUBLE_EQ(mean_period_us(S), 100.0);
  // An epoch without the receiver's record is left out.
  R.pop_back();
  EXPECT_EQ(find(build_timeline(S, R, B), "sender: ready seen")->epochs, 2);
}

TEST(PartTimeline, TheEnginesStepsAreRowsOnItsPath) {
  const std::vector<EpochTraceRecord> S = {sender(2, true), sender(3, true)};
  const std::vector<EpochTraceRecord> R = {receiver(2), receiver(3)};
  const std::vector<TimelineRow> rows = build_timeline(S, R, {});
  for (const char* e : {"engine: a ready flag seen", "engine: first copy submitted", "engine: last submission returned",
                        "engine: every copy landed", "engine: done word stored"})
    ASSERT_NE(find(rows, e), nullptr) << e;
  EXPECT_DOUBLE_EQ(find(rows, "engine: first copy submitted")->mean_us, 9.1);
  EXPECT_EQ(find(rows, "device: first block started"), nullptr);  // no bench stamps given
}

TEST(PartTimeline, ClaimsServedOneAfterAnotherShowAsTheirSlope) {
  // 8 blocks begin pready together; each claim ends 100 ns after the one before.
  const int G = 8;
  std::vector<uint64_t> st(static_cast<size_t>(kStamps) * G);
  for (int b = 0; b < G; ++b) {
    uint64_t* s = &st[static_cast<size_t>(kStamps) * b];
    s[0] = 1000;
    s[1] = 2000 + b;  // pready start order = block order
    s[2] = 3000 + 100 * static_cast<uint64_t>(b);
    s[3] = s[2] + 500;
    s[4] = s[3] + 50;
  }
  std::vector<int> order;
  const Steps r = analyse_blocks(G, st, &order);
  EXPECT_NEAR(r.slope_ns, 100.0, 1e-9);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_DOUBLE_EQ(r.span, (3000 + 700 + 550 - 1000) / 1e3);
  EXPECT_DOUBLE_EQ(r.copy, 0.5);
}

TEST(PartTimeline, TheFloorLineHasAColumnPerStepAndADashWhereNoneWasRecorded) {
  const std::vector<EpochTraceRecord> S = {sender(2, false), sender(3, false)};
  const std::vector<EpochTraceRecord> R = {receiver(2), receiver(3)};
  testing::internal::CaptureStdout();
  print_floor_header();
  print_floor_row(8, "kernel", 8, build_timeline(S, R, {}), mean_period_us(S));
  const std::string out = testing::internal::GetCapturedStdout();
  const size_t nl = out.find('\n', out.find("\nfloor") + 1);
  const std::string header = out.substr(out.find("\nfloor") + 1, nl - out.find("\nfloor") - 1);
  const std::string row = out.substr(nl + 1);
  // floor blocks path threshold r_ready s_ready s_prep launched k_first k_last e_seen e_post e_landed s_done r_done period
  std::vector<std::string> h, v;
  for (auto* dst : {&h, &v}) {
    std::istringstream in(dst == &h ? header : row);
    for (std::string w; in >> w;) dst->push_back(w);
  }
  ASSERT_EQ(h.size(), 16u) << header;
  ASSERT_EQ(v.size(), 16u) << row;
  EXPECT_EQ(v[0], "floor");
  EXPECT_EQ(v[1], "8");
  EXPECT_EQ(v[2], "kernel");
  EXPECT_EQ(v[4], "0.80");   // r_ready
  EXPECT_EQ(v[5], "1.25");   // s_ready: 1.2 and 1.3
  EXPECT_EQ(v[7], "-");      // launched: no bench stamps
  EXPECT_EQ(v[10], "-");     // e_seen: no engine on this path
  EXPECT_EQ(v[13], "14.00"); // s_done
  EXPECT_EQ(v[14], "15.00"); // r_done
  EXPECT_EQ(v[15], "100.00");
}
