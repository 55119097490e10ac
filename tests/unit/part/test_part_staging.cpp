// The progression engine's transfers in flight and its staged mode, on the host (part/engine.hpp).
// A DeferredEndpoint holds every put and signal for a while (or while closed) and lands it
// when the engine polls `landed`, as an asynchronous transport does: a transfer counts as
// delivered only once it has landed, a run of ready transport partitions goes as puts of at
// most kEngineChunkBytes with ONE signal each, and up to kEngineInflight transfers are in
// flight. Staged: the sender's engine copies into a mirror, puts the mirror into the
// receiver's mirror and a signal record into its ring; the receiver's engine copies each
// signalled run into the buffer and raises its flags: every byte and flag is checked, over
// epochs with different thresholds, and hostile signal records fail naming the request.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "part/engine.hpp"
#include "part/progress.hpp"
#include "part/state.hpp"
#include "util/error.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;
using weft::proxy::RemoteMemory;

namespace {

/// Posts everything and lands each operation, in order, once it is `delay_us` old and the
/// engine polls `landed` (none while closed), as an asynchronous transport does.
class DeferredEndpoint : public weft::proxy::Endpoint {
 public:
  using Clock = std::chrono::steady_clock;
  explicit DeferredEndpoint(int delay_us = 200) : delay_(std::chrono::microseconds(delay_us)) {}
  std::string peer() const override { return "rank 1"; }
  void put(const RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override {
    post([=] { std::memcpy(reinterpret_cast<char*>(dst.address) + off, src, bytes); });
    puts.fetch_add(1);
    uint64_t m = max_put.load();
    while (bytes > m && !max_put.compare_exchange_weak(m, bytes)) {
    }
  }
  void write_u64(const RemoteMemory& dst, uint64_t off, uint64_t v) override {
    post([=] { store(dst, off, v); });
    single_signals.fetch_add(1);
  }
  void write_words(const RemoteMemory& dst, uint64_t off, const uint64_t* values, uint64_t n) override {
    post([=] {
      for (uint64_t i = 0; i < n; ++i) store(dst, off + i * 8, values[i]);  // read when it lands
    });
    signals.fetch_add(1);
  }
  void flush(double) override {
    while (!ops_.empty()) run_one();
  }
  uint64_t mark(double) override { return done_ + ops_.size(); }
  bool landed(uint64_t ticket) override {
    const uint64_t in = ops_.size();
    uint64_t m = max_pending.load();
    while (in > m && !max_pending.compare_exchange_weak(m, in)) {
    }
    while (open.load() && done_ < ticket && Clock::now() - ops_.front().first >= delay_) run_one();
    return done_ >= ticket;
  }

  std::atomic<bool> open{true};
  std::atomic<uint64_t> puts{0}, signals{0}, single_signals{0}, max_put{0}, max_pending{0};

 private:
  static void store(const RemoteMemory& dst, uint64_t off, uint64_t v) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(dst.address + off)).store(v, std::memory_order_release);
  }
  void post(std::function<void()> f) { ops_.emplace_back(Clock::now(), std::move(f)); }
  void run_one() {
    ops_.front().second();
    ops_.pop_front();
    ++done_;
  }
  Clock::duration delay_;
  std::deque<std::pair<Clock::time_point, std::function<void()>>> ops_;
  uint64_t done_ = 0;
};

RemoteMemory mem(void* p, uint64_t bytes) { return RemoteMemory{reinterpret_cast<uint64_t>(p), bytes, nullptr}; }
uint64_t load(const uint64_t& w) { return std::atomic_ref<const uint64_t>(w).load(std::memory_order_acquire); }

bool eventually(const std::function<bool()>& f, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!f())
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  return true;
}

ProgressJobDesc describe_job(const char* who, uint32_t u, uint64_t pb) {
  ProgressJobDesc d;
  d.who = who;
  d.partitions = u;
  d.partition_bytes = pb;
  d.send_bytes = d.remote_bytes = u * pb;
  return d;
}

}  // namespace

TEST(PartEngineFlight, LargeRunsGoInChunksWithOneSignalEachAndCountOnlyWhenLanded) {
  ProgressEngine eng(10, "rank 0's engine");
  const uint32_t U = 24;
  const uint64_t pb = 1 << 20;  // 24 MiB: chunks of 4 MiB
  std::vector<char> send(U * pb), recv(U * pb, 0x5a);
  for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<char>(i * 13 + 1);
  std::vector<uint64_t> flags(kFlagFirst + U, 0), ready(U, 0), words(kRecordWords * U, 0);
  ProgressJobDesc d = describe_job("rank 0: psend to rank 1 (tag 3)", U, pb);
  d.remote_flag_words = flags.size();
  auto conn = std::make_shared<DeferredEndpoint>();
  conn->open = false;  // nothing lands yet
  ProgressEngine::Job* job =
      eng.add(d, conn, send.data(), mem(recv.data(), recv.size()), mem(flags.data(), flags.size() * 8), ready.data(),
              words.data(), ProgressEngine::Staging{});
  eng.set_epoch(job, 1, 1);
  eng.exclusive([&] {  // all at once: one run from 0 to U - 1
    for (uint32_t t = 0; t < U; ++t) std::atomic_ref<uint64_t>(ready[t]).store(1);
  });
  ASSERT_TRUE(eventually([&] { return conn->signals.load() == U * pb / kEngineChunkBytes; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(job->completed.load(), 0u) << "counted before landing";
  EXPECT_EQ(load(flags[kFlagFirst]), 0u);
  conn->open = true;
  ASSERT_TRUE(eventually([&] { return job->completed.load() == U; })) << job->completed.load();
  eng.check();
  EXPECT_EQ(conn->puts.load(), U * pb / kEngineChunkBytes);
  EXPECT_EQ(conn->max_put.load(), kEngineChunkBytes);
  EXPECT_EQ(conn->single_signals.load(), 0u);
  for (uint32_t t = 0; t < U; ++t) EXPECT_EQ(load(flags[kFlagFirst + t]), 1u) << t;
  EXPECT_EQ(recv, send);
  eng.remove(job);
}

TEST(PartEngineFlight, DoneWordOnlyOnceEveryTransferOfTheEpochLanded) {
  ProgressEngine eng(10, "rank 0's engine");
  const uint32_t U = 12;
  const uint64_t pb = 64;
  std::vector<char> send(U * pb), recv(U * pb, 0x5a);
  std::vector<uint64_t> flags(kFlagFirst + U, 0), ready(U, 0), words(kRecordWords * U, 0);
  uint64_t done = 0;
  ProgressJobDesc d = describe_job("rank 0: psend to rank 1 (tag 5)", U, pb);
  d.remote_flag_words = flags.size();
  auto conn = std::make_shared<DeferredEndpoint>();
  ProgressEngine::Job* job =
      eng.add(d, conn, send.data(), mem(recv.data(), recv.size()), mem(flags.data(), flags.size() * 8), ready.data(),
              words.data(), ProgressEngine::Staging{}, &done);
  for (uint64_t e = 1; e <= 3; ++e) {
    const uint32_t thr = e == 2 ? 5 : 1, T = transport_partitions(U, thr);
    for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<char>(i * 7 + e);
    conn->open = false;  // nothing lands yet
    eng.set_epoch(job, e, thr);
    const uint64_t signals = conn->signals.load();
    eng.exclusive([&] {
      for (uint32_t t = 0; t < T; ++t) std::atomic_ref<uint64_t>(ready[t]).store(e);
    });
    ASSERT_TRUE(eventually([&] { return conn->signals.load() > signals; }));  // posted, not landed
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(load(done), e - 1) << "epoch " << e << ": done before its transfers landed";
    conn->open = true;
    ASSERT_TRUE(eventually([&] { return load(done) == e; })) << "epoch " << e << ": done is " << load(done);
    for (uint32_t t = 0; t < T; ++t) EXPECT_EQ(load(flags[kFlagFirst + t]), e) << t;
    EXPECT_EQ(recv, send) << "epoch " << e;
  }
  eng.check();
  eng.remove(job);
}

TEST(PartEngineFlight, ManyRequestsAndRunsInFlightAtOnce) {
  ProgressEngine eng(10, "rank 0's engine");
  constexpr int kJobs = 3;
  const uint32_t U = 200;
  const uint64_t pb = 40;
  struct Side {
    std::vector<char> send, recv;
    std::vector<uint64_t> flags, ready, words;
    std::shared_ptr<DeferredEndpoint> conn = std::make_shared<DeferredEndpoint>(300);
    ProgressEngine::Job* job = nullptr;
  };
  std::vector<Side> sides(kJobs);
  std::mt19937 rng(5);
  for (int k = 0; k < kJobs; ++k) {
    Side& s = sides[k];
    s.send.resize(U * pb);
    for (char& c : s.send) c = static_cast<char>(rng());
    s.recv.assign(U * pb, 0);
    s.flags.assign(kFlagFirst + U, 0);
    s.ready.assign(U, 0);
    s.words.assign(kRecordWords * U, 0);
    ProgressJobDesc d = describe_job("psend", U, pb);
    d.remote_flag_words = s.flags.size();
    s.job = eng.add(d, s.conn, s.send.data(), mem(s.recv.data(), s.recv.size()), mem(s.flags.data(), s.flags.size() * 8),
                    s.ready.data(), s.words.data(), ProgressEngine::Staging{});
  }
  uint64_t delivered = 0;
  for (uint64_t e = 1; e <= 3; ++e) {
    const uint32_t thr = e == 1 ? 1 : e == 2 ? 7 : U;
    const uint32_t T = transport_partitions(U, thr);
    for (Side& s : sides) eng.set_epoch(s.job, e, thr);
    // Every other transport partition first (runs of one, each its own transfer), then the rest.
    for (int pass = 0; pass < 2; ++pass)
      for (Side& s : sides) {
        const uint64_t before = s.conn->signals.load();
        uint64_t n = 0;
        for (uint32_t t = static_cast<uint32_t>(pass); t < T; t += 2, ++n) std::atomic_ref<uint64_t>(s.ready[t]).store(e);
        if (pass == 0) {
          ASSERT_TRUE(eventually([&] { return s.conn->signals.load() == before + n; }));
        }
      }
    delivered += T;
    for (Side& s : sides) {
      ASSERT_TRUE(eventually([&] { return s.job->completed.load() == delivered; }))
          << "epoch " << e << ": " << s.job->completed.load();
      for (uint32_t t = 0; t < T; ++t) ASSERT_EQ(load(s.flags[kFlagFirst + t]), e) << t;
      EXPECT_EQ(s.recv, s.send);
      EXPECT_LE(s.conn->signals.load(), s.conn->puts.load());  // one signal per put, never one per partition
    }
  }
  eng.check();
  uint64_t most = 0;
  for (Side& s : sides) most = std::max(most, s.conn->max_pending.load());
  EXPECT_GT(most, 2u) << "never more than one transfer in flight";
  EXPECT_LE(most, 3u * kEngineInflight);  // put + signal per transfer (+ the mark) at most
  for (Side& s : sides) eng.remove(s.job);
}

namespace {

/// A staged pair on the host: the sender's and the receiver's engines, mirrors, ring.
struct StagedPair {
  uint32_t U;
  uint64_t pb;
  std::vector<char> send, send_mirror, recv_mirror, recv;
  std::vector<uint64_t> ready, send_words, ring, recv_words, flags;
  std::shared_ptr<DeferredEndpoint> stage = std::make_shared<DeferredEndpoint>(100), net = std::make_shared<DeferredEndpoint>(300),
                                      unstage = std::make_shared<DeferredEndpoint>(300);
  ProgressEngine sender{10, "rank 0's engine"}, receiver{10, "rank 1's engine"};
  ProgressEngine::Job* job = nullptr;
  ProgressEngine::RecvJob* rjob = nullptr;
  uint64_t recv_done = 0;  // the receive request's done word (its engine stores it)

  StagedPair(uint32_t u, uint64_t bytes)
      : U(u), pb(bytes), send(u * bytes), send_mirror(u * bytes, 0), recv_mirror(u * bytes, 0), recv(u * bytes, 0x5a),
        ready(u, 0), send_words(kRecordWords * u, 0), ring(kRecordWords * u, 0), recv_words(u, 0),
        flags(kFlagFirst + u, 0) {
    ProgressJobDesc d = describe_job("rank 0: psend to rank 1 (tag 4)", U, pb);
    d.staged = true;
    d.remote_flag_words = ring.size();
    job = sender.add(d, net, send.data(), mem(recv_mirror.data(), recv_mirror.size()), mem(ring.data(), ring.size() * 8),
                     ready.data(), send_words.data(), ProgressEngine::Staging{stage, send_mirror.data()});
    ProgressJobDesc r = describe_job("rank 1: precv from rank 0 (tag 4)", U, pb);
    r.staged = true;
    rjob = receiver.add_recv(r, ProgressEngine::Staging{unstage, recv_mirror.data()}, mem(recv.data(), recv.size()),
                             mem(flags.data(), flags.size() * 8), ring.data(), recv_words.data(), &recv_done);
  }
  ~StagedPair() {
    sender.remove(job);
    receiver.remove_recv(rjob);
  }
};

}  // namespace

TEST(PartEngineStaged, EveryByteAndFlagThroughBothMirrors) {
  StagedPair p(37, 24);
  std::mt19937 rng(11);
  uint64_t delivered = 0;
  for (uint64_t e = 1; e <= 4; ++e) {
    const uint32_t thr = e == 1 ? 1 : e == 2 ? 5 : e == 3 ? 37 : 2;
    const uint32_t T = transport_partitions(p.U, thr);
    for (size_t i = 0; i < p.send.size(); ++i) p.send[i] = static_cast<char>(i * 7 + e * 3);
    std::fill(p.recv.begin(), p.recv.end(), 0x5a);
    p.receiver.set_recv_epoch(p.rjob, e);  // ready to receive, then the sender learns it
    EXPECT_EQ(load(p.recv_done), e - 1) << "epoch " << e;
    p.sender.set_epoch(p.job, e, thr);
    std::vector<uint32_t> order(T);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    // Half first: once its flags are in place the receive's done word still holds the last epoch.
    const uint32_t half = T / 2;
    for (uint32_t i = 0; i < half; ++i) std::atomic_ref<uint64_t>(p.ready[order[i]]).store(e, std::memory_order_release);
    ASSERT_TRUE(eventually([&] {
      for (uint32_t i = 0; i < half; ++i)
        if (load(p.flags[kFlagFirst + order[i]]) != e) return false;
      return true;
    })) << "epoch " << e << ": the first half did not arrive";
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(load(p.recv_done), e - 1) << "epoch " << e << ": done with half of it arrived";
    for (uint32_t i = half; i < T; ++i) std::atomic_ref<uint64_t>(p.ready[order[i]]).store(e, std::memory_order_release);
    delivered += T;
    // The receive's done word: stored only once every byte and flag of the epoch is in place.
    ASSERT_TRUE(eventually([&] { return load(p.recv_done) == e; })) << "epoch " << e;
    for (uint32_t t = 0; t < T; ++t) EXPECT_EQ(load(p.flags[kFlagFirst + t]), e) << "epoch " << e << " t " << t;
    EXPECT_EQ(p.recv, p.send) << "epoch " << e << ": done before every byte landed";
    ASSERT_TRUE(eventually([&] {
      for (uint32_t t = 0; t < T; ++t)
        if (load(p.flags[kFlagFirst + t]) != e) return false;
      return p.job->completed.load() == delivered;
    })) << "epoch " << e << ": sender delivered " << p.job->completed.load() << " of " << delivered;
    p.sender.check();
    p.receiver.check();
    EXPECT_EQ(p.recv, p.send) << "epoch " << e << " threshold " << thr;
    EXPECT_TRUE(eventually([&] {
      return std::all_of(p.ring.begin(), p.ring.end(), [](const uint64_t& w) { return load(w) == 0; });
    })) << "the receiver left signal records in its ring";
  }
  EXPECT_LE(p.net->signals.load(), p.net->puts.load());
  EXPECT_EQ(p.net->single_signals.load(), 0u);
}

// part_bench goodput's first row across 2 emulated nodes: one block = ONE partition of 8,192
// bytes, threshold 1. The receiver's ring is then kRecordWords = 2 words, fewer than a direct
// send's flag word kFlagFirst + 0: the staged send must not check that flag word against it.
TEST(PartEngineStaged, OnePartitionWholeBufferGoesThrough) {
  StagedPair p(1, 8192);
  for (uint64_t e = 1; e <= 3; ++e) {
    for (size_t i = 0; i < p.send.size(); ++i) p.send[i] = static_cast<char>(i * 5 + e);
    std::fill(p.recv.begin(), p.recv.end(), 0x5a);
    p.receiver.set_recv_epoch(p.rjob, e);
    p.sender.set_epoch(p.job, e, 1);
    std::atomic_ref<uint64_t>(p.ready[0]).store(e, std::memory_order_release);
    ASSERT_TRUE(eventually([&] {
      p.sender.check();  // throws the engine's error, if any, instead of timing out
      p.receiver.check();
      return load(p.flags[kFlagFirst]) == e && p.job->completed.load() == e;
    })) << "epoch " << e << ": sender delivered " << p.job->completed.load();
    EXPECT_EQ(p.recv, p.send) << "epoch " << e;
  }
}

TEST(PartEngineStaged, AHostileSignalRecordFailsNamingTheReceive) {
  StagedPair p(8, 16);
  p.receiver.set_recv_epoch(p.rjob, 1);
  // Transport partitions 6..9 of 8 (threshold 1): not a run of this request.
  p.receiver.exclusive([&] {
    p.ring[0] = (uint64_t{6} << 32) | 4;
    p.ring[1] = 1;
  });
  std::string msg;
  ASSERT_TRUE(eventually([&] {
    try {
      p.receiver.check();
      return false;
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.code(), weft::ErrorCode::Remote);
      msg = e.what();
      return true;
    }
  }));
  EXPECT_NE(msg.find("rank 1's engine: rank 1: precv from rank 0 (tag 4)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("transport partitions 6..10 with threshold 1"), std::string::npos) << msg;
  EXPECT_EQ(std::count(p.recv.begin(), p.recv.end(), 0x5a), static_cast<long>(p.recv.size()));  // nothing copied
  EXPECT_EQ(load(p.flags[kFlagFirst]), 0u);
}

TEST(PartEngineStaged, SignalRecordsRoundTripAndRefuseWhatIsNotARun) {
  ProgressJobDesc d = describe_job("rank 1: precv from rank 0 (tag 2)", 10, 8);
  uint64_t rec[kRecordWords];
  encode_arrival(TransportRun{3, 1, 0, 0}, 3, rec);  // threshold 3: transport partition 3 is user partition 9 only
  bool complete = false;
  uint32_t thr = 0;
  TransportRun r = decode_arrival(d, rec, 0, &complete, &thr);
  ASSERT_TRUE(complete);
  EXPECT_EQ(thr, 3u);
  EXPECT_EQ(r.first, 3u);
  EXPECT_EQ(r.count, 1u);
  EXPECT_EQ(r.offset, 72u);
  EXPECT_EQ(r.bytes, 8u);
  encode_arrival(TransportRun{0, 4, 0, 0}, 3, rec);
  r = decode_arrival(d, rec, 0, &complete, &thr);
  EXPECT_EQ(r.bytes, 80u);
  const uint64_t half[kRecordWords] = {(uint64_t{1} << 32) | 1, 0};  // the threshold word has not landed
  decode_arrival(d, half, 0, &complete, &thr);
  EXPECT_FALSE(complete);
  auto refuses = [&](uint64_t w0, uint64_t w1, uint64_t arrived) {
    const uint64_t bad[kRecordWords] = {w0, w1};
    try {
      decode_arrival(d, bad, arrived, &complete, &thr);
      return false;
    } catch (const weft::Error& e) {
      return e.code() == weft::ErrorCode::Remote && std::string(e.what()).find("precv from rank 0") != std::string::npos;
    }
  };
  EXPECT_TRUE(refuses(uint64_t{2} << 32 | 0, 1, 0));             // an empty run
  EXPECT_TRUE(refuses(uint64_t{9} << 32 | 2, 1, 0));             // past the last transport partition
  EXPECT_TRUE(refuses(uint64_t{0} << 32 | 1, 11, 0));            // threshold above the partitions
  EXPECT_TRUE(refuses(uint64_t{0} << 32 | 4, 3, 1));             // more than every transport partition this epoch
  EXPECT_TRUE(refuses(uint64_t{0xffffffffu} << 32 | 0xffffffffu, 1, 0));
}
