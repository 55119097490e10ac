// The per-epoch host state of partitioned requests without a GPU: the claim of a partition
// (weft/part/common.hpp: a stamp counting preadies, checked against the prepared and started
// epochs), the epoch's completion (the sent counter that stores kWordDone once per epoch), the
// resync after a misuse (part/resync.hpp), the host poll loop (part/poll.hpp) and
// WEFT_PART_TRACE's line (part/trace.hpp). The simulations follow the device code's steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "part/poll.hpp"
#include "part/resync.hpp"
#include "part/trace.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

/// A send request's device state as PsendDeviceHandle::claim / complete change it, and the
/// host words they read and write.
struct Device {
  uint32_t partitions, threshold, transports;
  std::vector<uint64_t> stamps, counters;
  uint64_t sent = 0, cache = 0;            // kCtlSent, kCtlEpoch
  uint64_t prepared = 0, started = 0, done = 0;  // kWordPrepared, kWordStarted, kWordDone
  uint32_t last_error = kDevOk, done_stores = 0;

  Device(uint32_t u, uint32_t thr)
      : partitions(u), threshold(thr), transports(transport_partitions(u, thr)), stamps(u, 0),
        counters(transport_partitions(u, thr), 0) {}

  /// detail::claim then complete; returns whether anything was sent.
  bool pready(uint32_t p) {
    const uint64_t e = stamps[p]++ + 1;
    if (e > cache) {
      const uint32_t code = claim_error(e, prepared, started);
      if (code != kDevOk) {
        last_error = code;
        return false;
      }
      cache = std::max(cache, prepared);
    }
    const uint32_t t = transport_of(p, threshold);
    if (transport_size(partitions, threshold, t) > 1 && !completes_transport(counters[t]++, partitions, threshold, t, e))
      return true;
    if (completes_epoch(sent++, transports, e)) {
      EXPECT_LT(done, e) << "kWordDone stored twice in epoch " << e;
      done = e;
      ++done_stores;
    }
    return true;
  }
  void resync(uint64_t completed) {
    stamps = resync_stamps(partitions, completed);
    counters = resync_transport_counters(partitions, threshold, completed);
    sent = resync_sent(partitions, threshold, completed);
  }
};

std::vector<uint32_t> shuffled(uint32_t n, std::mt19937& rng) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

}  // namespace

TEST(PartEpoch, ClaimErrorNamesTheMisuse) {
  EXPECT_EQ(claim_error(3, 3, 3), kDevOk);
  EXPECT_EQ(claim_error(2, 3, 3), kDevOk);
  EXPECT_EQ(claim_error(1, 0, 0), kDevNotStarted);
  EXPECT_EQ(claim_error(4, 3, 4), kDevNotPrepared);
  EXPECT_EQ(claim_error(4, 3, 3), kDevTwice);
  EXPECT_EQ(claim_error_epoch(kDevTwice, 4), 3u);
  EXPECT_EQ(claim_error_epoch(kDevNotPrepared, 4), 4u);
}

TEST(PartEpoch, DoneOncePerEpochAtItsLastTransportPartition) {
  std::mt19937 rng(11);
  for (uint32_t u : {1u, 7u, 64u, 1000u})
    for (uint32_t thr : {1u, 3u, u}) {
      if (thr > u) continue;
      Device dev(u, thr);
      for (uint64_t e = 1; e <= 30; ++e) {
        dev.started = e;
        dev.prepared = e;
        const std::vector<uint32_t> order = shuffled(u, rng);
        for (size_t i = 0; i < order.size(); ++i) {
          EXPECT_EQ(dev.done, e - 1) << u << "/" << thr << " epoch " << e << ": done before its last partition";
          ASSERT_TRUE(dev.pready(order[i]));
        }
        ASSERT_EQ(dev.done, e) << u << " partitions, threshold " << thr;
        ASSERT_EQ(dev.last_error, kDevOk);
      }
      EXPECT_EQ(dev.done_stores, 30u);
      EXPECT_EQ(dev.stamps, resync_stamps(u, 30));
      // Counters of transport partitions of one partition are never used (no aggregation).
      const std::vector<uint64_t> want = resync_transport_counters(u, thr, 30);
      for (uint32_t t = 0; t < dev.transports; ++t)
        if (transport_size(u, thr, t) > 1) {
          EXPECT_EQ(dev.counters[t], want[t]) << t;
        }
      EXPECT_EQ(dev.sent, resync_sent(u, thr, 30));
    }
}

TEST(PartEpoch, MisusesSendNothingAndResyncRestoresTheCounts) {
  Device dev(4, 2);
  // Before any start.
  EXPECT_FALSE(dev.pready(0));
  EXPECT_EQ(dev.last_error, kDevNotStarted);
  dev.resync(0);
  // Epoch 1 started, not prepared: refused; once prepared, every partition goes.
  dev.started = 1;
  EXPECT_FALSE(dev.pready(1));
  EXPECT_EQ(dev.last_error, kDevNotPrepared);
  dev.resync(0);
  dev.last_error = kDevOk;
  dev.prepared = 1;
  for (uint32_t p = 0; p < 4; ++p) EXPECT_TRUE(dev.pready(p));
  EXPECT_EQ(dev.done, 1u);
  // Epoch 2: partition 3 twice, the second refused; done still comes from the valid ones.
  dev.started = dev.prepared = 2;
  for (uint32_t p : {3u, 0u, 1u}) EXPECT_TRUE(dev.pready(p));
  EXPECT_FALSE(dev.pready(3));
  EXPECT_EQ(dev.last_error, kDevTwice);
  EXPECT_TRUE(dev.pready(2));
  EXPECT_EQ(dev.done, 2u);
  // The host saw the error: the next start resyncs, and epoch 3 runs as if nothing happened.
  dev.resync(2);
  dev.last_error = kDevOk;
  dev.started = dev.prepared = 3;
  for (uint32_t p : {2u, 1u, 3u, 0u}) EXPECT_TRUE(dev.pready(p));
  EXPECT_EQ(dev.done, 3u);
  EXPECT_EQ(dev.last_error, kDevOk);
  // A pready after the epoch completed and before the next start is the epoch's second.
  EXPECT_FALSE(dev.pready(1));
  EXPECT_EQ(dev.last_error, kDevTwice);
}

TEST(PartEpoch, AnEpochThatMissedPartitionsCompletesNothingLater) {
  Device dev(6, 1);
  dev.started = dev.prepared = 1;
  for (uint32_t p = 0; p < 5; ++p) dev.pready(p);  // partition 5 never readied
  EXPECT_EQ(dev.done, 0u);
  // The host ends the epoch with its error (timeout); resync at the next start.
  dev.resync(1);
  dev.started = dev.prepared = 2;
  for (uint32_t p = 0; p < 6; ++p) EXPECT_TRUE(dev.pready(p));
  EXPECT_EQ(dev.done, 2u);
}

TEST(PartEpoch, PollerSpinsThenYieldsAndEndsAtItsDeadline) {
  Poller quick(0.05);
  const auto t0 = std::chrono::steady_clock::now();
  while (quick.next()) {
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.05);
  EXPECT_LT(s, 5.0);
  EXPECT_GT(quick.polls(), Poller::kSpinPolls);
  EXPECT_EQ(quick.seconds(), 0.05);
  Poller once(10);
  EXPECT_TRUE(once.next());
  EXPECT_EQ(once.polls(), 1u);
}

TEST(PartEpoch, TraceLineNamesEveryPhase) {
  EXPECT_FALSE(trace_wanted(0, 2));
  EXPECT_FALSE(trace_wanted(1, 1));
  EXPECT_TRUE(trace_wanted(1, 2));
  EXPECT_FALSE(trace_wanted(1, 3));
  EXPECT_TRUE(trace_wanted(3, 4));
  using C = EpochTrace::Clock;
  const C::time_point t0 = C::now();
  auto at = [&](double us) { return t0 + std::chrono::duration_cast<C::duration>(std::chrono::duration<double, std::micro>(us)); };
  EpochTrace t;
  t.start_in = at(10);
  t.start_out = at(10.5);
  t.prep_in = at(11);
  t.ready_seen = at(12.5);
  t.waited_ready = true;
  t.prep_out = at(13);
  t.wait_in = at(17);
  t.wait_out = at(25);
  t.polls = 42;
  const std::string line = format_epoch_trace("rank 0: psend to rank 1 (tag 4)", 2, t, at(9));
  for (const char* part : {"rank 0: psend to rank 1 (tag 4): epoch 2", "start 0.5 us", "pbuf_prepare 2.0 us",
                           "ready-to-receive after 1.5 us", "caller 4.0 us", "wait 8.0 us (42 polls)",
                           "epoch 15.0 us", "since the last epoch's end 1.0 us"})
    EXPECT_NE(line.find(part), std::string::npos) << part << " not in: " << line;
  t.waited_ready = false;
  EXPECT_EQ(format_epoch_trace("x", 2, t, at(9)).find("ready-to-receive"), std::string::npos);
  // "at": start's entry on the steady clock, so the lines of two ranks line up.
  char at_text[64];
  std::snprintf(at_text, sizeof at_text, "; at %.3f us",
                std::chrono::duration<double, std::micro>(t.start_in.time_since_epoch()).count());
  EXPECT_NE(line.find(at_text), std::string::npos) << at_text << " not in: " << line;
  EXPECT_EQ(line.find("engine"), std::string::npos) << line;
}

TEST(PartEpoch, TraceLineGivesTheEngineStepsFromStart) {
  using C = EpochTrace::Clock;
  const C::time_point t0 = C::now();
  auto at = [&](double us) { return t0 + std::chrono::duration_cast<C::duration>(std::chrono::duration<double, std::micro>(us)); };
  EpochTrace t;
  t.start_in = at(0);
  t.start_out = t.prep_in = t.prep_out = at(1);
  t.wait_in = at(2);
  t.wait_out = at(20);
  t.has_engine = true;
  t.engine.seen = at(6);
  t.engine.post = at(6.5);
  t.engine.posted = at(8.25);
  t.engine.batches = 2;
  t.engine.landed = at(15);
  // done not recorded (the stream stored the done word before the engine saw the copies land)
  const std::string line = format_epoch_trace("rank 0: psend to rank 1 (tag 4)", 3, t, at(0));
  for (const char* part : {"; engine: ready seen +6.0 us", "copies submitted +6.5 us..+8.2 us (2 batches)",
                           "landed +15.0 us", "done stored -"})
    EXPECT_NE(line.find(part), std::string::npos) << part << " not in: " << line;
}

namespace {
std::vector<EpochTraceRecord> g_records;
void keep_record(const EpochTraceRecord& r) { g_records.push_back(r); }
}  // namespace

TEST(PartEpoch, ASinkTakesTheRecordsInsteadOfTheLines) {
  EpochTraceRecord r;
  r.kind = EpochTraceRecord::kRecv;
  r.rank = 1;
  r.peer = 0;
  r.tag = 7;
  r.epoch = 4;
  r.t.polls = 9;
  g_records.clear();
  set_epoch_trace_sink(keep_record);
  testing::internal::CaptureStderr();
  emit_epoch_trace("rank 1: precv from rank 0 (tag 7)", r);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ASSERT_EQ(g_records.size(), 1u);
  EXPECT_EQ(g_records[0].kind, EpochTraceRecord::kRecv);
  EXPECT_EQ(g_records[0].rank, 1);
  EXPECT_EQ(g_records[0].tag, 7);
  EXPECT_EQ(g_records[0].epoch, 4u);
  EXPECT_EQ(g_records[0].t.polls, 9u);
  set_epoch_trace_sink(nullptr);  // back to the line on stderr
  testing::internal::CaptureStderr();
  emit_epoch_trace("rank 1: precv from rank 0 (tag 7)", r);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("weft part trace: rank 1: precv from rank 0 (tag 7): epoch 4:"), std::string::npos) << err;
  EXPECT_EQ(g_records.size(), 1u);
}

TEST(PartEpoch, EngineStampsKeepTheFirstTimeOfEachStepUntilReset) {
  EngineStamps s;
  EXPECT_EQ(s.snapshot().seen, EngineEpochTrace::Clock::time_point{});
  EngineStamps::mark_once(s.seen, 1000);
  EngineStamps::mark_once(s.seen, 2000);
  s.batches.store(3);
  const EngineEpochTrace t = s.snapshot();
  EXPECT_EQ(t.seen.time_since_epoch(), std::chrono::nanoseconds(1000));
  EXPECT_EQ(t.post, EngineEpochTrace::Clock::time_point{});
  EXPECT_EQ(t.batches, 3u);
  s.reset();
  EXPECT_EQ(s.snapshot().seen, EngineEpochTrace::Clock::time_point{});
  EXPECT_EQ(s.snapshot().batches, 0u);
}

TEST(PartEpoch, HostWordSlotsAreCacheLinesOfDistinctWords) {
  EXPECT_EQ(kSlotWords * sizeof(uint64_t), 64u);
  const uint32_t w[] = {kWordReady, kWordDone, kWordPrepared, kWordStarted};
  for (uint32_t a : w) {
    EXPECT_LT(a, kSlotWords);
    EXPECT_EQ(std::count(std::begin(w), std::end(w), a), 1);
  }
}
