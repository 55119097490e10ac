// The progression engine (part/engine.hpp) on the host, over HostEndpoint: a "device"
// (this thread) marks transport partitions ready in any order; the engine must put every
// byte of each into the receiver's buffer and raise its flag with the epoch, count it once,
// wait for the receiver's readiness (a flag one epoch ahead), deliver what was readied when
// an epoch ends early, and fail, naming the request, on a flag from a future epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "part/engine.hpp"
#include "part/state.hpp"
#include "util/error.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

struct Pair {
  uint32_t partitions;
  uint64_t pb;
  std::vector<char> send, recv;
  std::vector<uint64_t> flags, ready, words;
  ProgressJobDesc desc;

  Pair(uint32_t u, uint64_t bytes)
      : partitions(u), pb(bytes), send(u * bytes), recv(u * bytes, 0x5a), flags(kFlagFirst + u, 0), ready(u, 0),
        words(kRecordWords * u, 0) {
    desc.who = "rank 0: psend to rank 1 (tag 9)";
    desc.partitions = u;
    desc.threshold = 1;
    desc.partition_bytes = bytes;
    desc.send_bytes = desc.remote_bytes = u * bytes;
    desc.remote_flag_words = kFlagFirst + u;
  }
  ProgressEngine::Job* add(ProgressEngine& eng) {
    weft::proxy::RemoteMemory b{reinterpret_cast<uint64_t>(recv.data()), recv.size(), nullptr};
    weft::proxy::RemoteMemory f{reinterpret_cast<uint64_t>(flags.data()), flags.size() * 8, nullptr};
    return eng.add(desc, std::make_shared<weft::proxy::HostEndpoint>("rank 1"), send.data(), b, f, ready.data(),
                   words.data(), ProgressEngine::Staging{});
  }
  void mark(uint32_t t, uint64_t e) { std::atomic_ref<uint64_t>(ready[t]).store(e, std::memory_order_release); }
  uint64_t flag(uint32_t t) { return std::atomic_ref<uint64_t>(flags[kFlagFirst + t]).load(std::memory_order_acquire); }
};

/// Waits (at most 10 s) until `job` has delivered `n` transport partitions.
bool wait_completed(ProgressEngine::Job* job, uint64_t n) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (job->completed.load() < n)
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  return true;
}

}  // namespace

TEST(PartEngine, DeliversEveryByteAndFlagOncePerEpoch) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(10, 24);
  ProgressEngine::Job* job = p.add(eng);
  std::mt19937 rng(7);
  uint64_t delivered = 0;
  for (uint64_t e = 1; e <= 4; ++e) {
    const uint32_t thr = e == 1 ? 1 : e == 2 ? 3 : e == 3 ? 10 : 4;
    const uint32_t T = transport_partitions(p.partitions, thr);
    for (size_t i = 0; i < p.send.size(); ++i) p.send[i] = static_cast<char>(i * 31 + e);
    std::fill(p.recv.begin(), p.recv.end(), 0x5a);
    eng.set_epoch(job, e, thr);
    std::vector<uint32_t> order(T);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t t : order) p.mark(t, e);
    delivered += T;
    ASSERT_TRUE(wait_completed(job, delivered)) << "epoch " << e << ": " << job->completed.load() << " of " << delivered;
    eng.check();
    for (uint32_t t = 0; t < T; ++t) EXPECT_EQ(p.flag(t), e) << "transport partition " << t;
    EXPECT_EQ(p.recv, p.send) << "epoch " << e << " threshold " << thr;
  }
  // Counted once: nothing more arrives while the flags stay.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(job->completed.load(), delivered);
  eng.remove(job);
}

TEST(PartEngine, WaitsForTheReceiverThenDelivers) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(4, 8);
  std::iota(p.send.begin(), p.send.end(), 1);
  ProgressEngine::Job* job = p.add(eng);
  eng.set_epoch(job, 1, 1);
  for (uint32_t t = 0; t < 4; ++t) p.mark(t, 1);
  ASSERT_TRUE(wait_completed(job, 4));
  // Epoch 2 readied on the device before this side saw the receiver ready: held back.
  p.mark(0, 2);
  p.mark(3, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(job->completed.load(), 4u);
  EXPECT_EQ(p.flag(0), 1u);
  eng.set_epoch(job, 2, 1);
  ASSERT_TRUE(wait_completed(job, 6));
  EXPECT_EQ(p.flag(0), 2u);
  EXPECT_EQ(p.flag(1), 1u);
  EXPECT_EQ(p.flag(3), 2u);
  eng.check();
}

TEST(PartEngine, FinishEpochDeliversWhatWasReadiedThenPauses) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(6, 16);
  std::iota(p.send.begin(), p.send.end(), 3);
  ProgressEngine::Job* job = p.add(eng);
  eng.set_epoch(job, 1, 2);
  eng.exclusive([&] {  // the engine thread may or may not deliver them before finish_epoch
    p.mark(0, 1);
    p.mark(2, 1);
  });
  eng.finish_epoch(job);
  EXPECT_EQ(job->completed.load(), 2u);  // on return, not later
  EXPECT_EQ(p.flag(0), 1u);
  EXPECT_EQ(p.flag(2), 1u);
  EXPECT_TRUE(std::equal(p.send.begin(), p.send.begin() + 32, p.recv.begin()));
  EXPECT_TRUE(std::equal(p.send.begin() + 64, p.send.end(), p.recv.begin() + 64));
  p.mark(1, 1);  // after the epoch ended: not sent
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(job->completed.load(), 2u);
  EXPECT_EQ(p.flag(1), 0u);
  eng.check();
}

TEST(PartEngine, FutureEpochFailsNamingTheRequest) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(4, 8);
  ProgressEngine::Job* job = p.add(eng);
  eng.set_epoch(job, 1, 1);
  p.mark(2, 5);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string msg;
  while (msg.empty() && std::chrono::steady_clock::now() < end) {
    try {
      eng.check();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    } catch (const weft::Error& e) {
      EXPECT_EQ(e.code(), weft::ErrorCode::Internal);
      msg = e.what();
    }
  }
  EXPECT_NE(msg.find("rank 0's engine: rank 0: psend to rank 1 (tag 9)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("epoch 5 while the request is in epoch 1"), std::string::npos) << msg;
  EXPECT_EQ(p.flag(2), 0u);  // nothing moved
  EXPECT_EQ(std::count(p.recv.begin(), p.recv.end(), 0x5a), static_cast<long>(p.recv.size()));
}

TEST(PartEngine, RefusesAReceiverTooSmall) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(4, 8);
  p.desc.remote_bytes = 31;
  try {
    p.add(eng);
    ADD_FAILURE() << "accepted";
  } catch (const weft::Error& e) {
    EXPECT_EQ(e.code(), weft::ErrorCode::Remote);
    EXPECT_NE(std::string(e.what()).find("psend to rank 1"), std::string::npos) << e.what();
  }
}

TEST(PartEngine, ParksOnlyWhenNothingCanArriveAndWakesForTheNextEpoch) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(3, 8);
  std::iota(p.send.begin(), p.send.end(), 5);
  ProgressEngine::Job* job = p.add(eng);
  eng.set_epoch(job, 1, 1);
  for (uint32_t t = 0; t < 3; ++t) p.mark(t, 1);
  ASSERT_TRUE(wait_completed(job, 3));
  // Epoch 1 is delivered: nothing can arrive, the thread parks once idle long enough.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  eng.set_epoch(job, 2, 1);  // wakes it
  p.mark(1, 2);
  ASSERT_TRUE(wait_completed(job, 4));
  // Epoch 2 still has partitions to come: the thread keeps polling however long they take.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  p.mark(0, 2);
  p.mark(2, 2);
  ASSERT_TRUE(wait_completed(job, 6));
  EXPECT_EQ(p.recv, p.send);
  for (uint32_t t = 0; t < 3; ++t) EXPECT_EQ(p.flag(t), 2u) << t;
  eng.check();
  eng.remove(job);
}

// Coalescing (issue 28): short runs wait while the ready count grows, at most kEngineHoldNs
// after it last grew; a pass that finds the rest of the epoch ready posts it at once.
TEST(PartEngine, RunHoldPostsOnlyAfterTheReadyCountStopsGrowing) {
  RunHold h;
  EXPECT_FALSE(h.post(3, 1000));                      // first sight: the clock starts
  EXPECT_FALSE(h.post(3, 1000 + kEngineHoldNs - 1));  // unchanged, not yet long enough
  EXPECT_FALSE(h.post(5, 1000 + kEngineHoldNs));      // grew: the clock starts again
  EXPECT_FALSE(h.post(5, 1000 + 2 * kEngineHoldNs - 1));
  EXPECT_TRUE(h.post(5, 1000 + 2 * kEngineHoldNs));
  h.reset();  // a new epoch
  EXPECT_FALSE(h.post(5, 1000 + 3 * kEngineHoldNs));
}

namespace {
struct CountingEndpoint : weft::proxy::HostEndpoint {
  std::atomic<int> puts{0};
  CountingEndpoint() : HostEndpoint("rank 1") {}
  void put(const weft::proxy::RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override {
    ++puts;
    HostEndpoint::put(dst, off, src, bytes);
  }
};
}  // namespace

TEST(PartEngine, ShortRunsReadiedInAnyOrderGoAsFewTransfers) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(64, 32);
  std::iota(p.send.begin(), p.send.end(), 7);
  auto ep = std::make_shared<CountingEndpoint>();
  weft::proxy::RemoteMemory b{reinterpret_cast<uint64_t>(p.recv.data()), p.recv.size(), nullptr};
  weft::proxy::RemoteMemory f{reinterpret_cast<uint64_t>(p.flags.data()), p.flags.size() * 8, nullptr};
  ProgressEngine::Job* job =
      eng.add(p.desc, ep, p.send.data(), b, f, p.ready.data(), p.words.data(), ProgressEngine::Staging{});
  std::vector<uint32_t> order(64);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  for (uint64_t e = 1; e <= 3; ++e) {
    eng.set_epoch(job, e, 1);
    // Every transport partition readied between two passes, in a random order: one run.
    eng.exclusive([&] {
      for (uint32_t t : order) p.mark(t, e);
    });
    ASSERT_TRUE(wait_completed(job, 64 * e)) << "epoch " << e;
    EXPECT_EQ(ep->puts.load(), static_cast<int>(e)) << "epoch " << e;
    for (uint32_t t = 0; t < 64; ++t) EXPECT_EQ(p.flag(t), e) << t;
    EXPECT_EQ(p.recv, p.send);
  }
  // Only the even ones: held runs still go (after the hold), nothing waits for the rest.
  eng.set_epoch(job, 4, 1);
  eng.exclusive([&] {
    for (uint32_t t = 0; t < 64; t += 2) p.mark(t, 4);
  });
  ASSERT_TRUE(wait_completed(job, 64 * 3 + 32));
  for (uint32_t t = 0; t < 64; ++t) EXPECT_EQ(p.flag(t), t % 2 == 0 ? 4u : 3u) << t;
  for (uint32_t t = 1; t < 64; t += 2) p.mark(t, 4);
  ASSERT_TRUE(wait_completed(job, 64 * 4));
  EXPECT_EQ(p.recv, p.send);
  eng.check();
}

TEST(PartEngine, ANewThresholdIsCheckedInPlaceAndARefusedOneLeavesTheJob) {
  // set_epoch checks a new threshold in the job's own description (no copy per epoch): one
  // outside 1..partitions is refused naming it, and the job keeps its last threshold and
  // epoch, so the next epoch with a good threshold delivers every byte and flag.
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(10, 24);
  ProgressEngine::Job* job = p.add(eng);
  for (size_t i = 0; i < p.send.size(); ++i) p.send[i] = static_cast<char>(i * 13 + 1);
  eng.set_epoch(job, 1, 2);
  for (uint32_t t = 0; t < 5; ++t) p.mark(t, 1);
  ASSERT_TRUE(wait_completed(job, 5));
  for (uint32_t bad : {0u, 11u}) {
    try {
      eng.set_epoch(job, 2, bad);
      ADD_FAILURE() << "threshold " << bad << " was accepted";
    } catch (const weft::Error& e) {
      EXPECT_NE(std::string(e.what()).find("threshold " + std::to_string(bad) + " outside 1..10"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(job->desc.threshold, 2u) << "after threshold " << bad;
    EXPECT_EQ(job->epoch, 1u) << "after threshold " << bad;
  }
  for (size_t i = 0; i < p.send.size(); ++i) p.send[i] = static_cast<char>(i * 7 + 2);
  std::fill(p.recv.begin(), p.recv.end(), 0x5a);
  eng.set_epoch(job, 2, 5);
  EXPECT_EQ(job->desc.threshold, 5u);
  for (uint32_t t = 0; t < 2; ++t) p.mark(t, 2);
  ASSERT_TRUE(wait_completed(job, 7)) << job->completed.load() << " of 7";
  eng.check();
  for (uint32_t t = 0; t < 2; ++t) EXPECT_EQ(p.flag(t), 2u) << "transport partition " << t;
  EXPECT_EQ(p.recv, p.send);
  eng.remove(job);
}

TEST(PartEngine, TracedEpochsRecordEachStepInOrderBeforeTheDoneWord) {
  ProgressEngine eng(10, "rank 0's engine");
  Pair p(8, 32);
  std::iota(p.send.begin(), p.send.end(), 5);
  uint64_t done_word = 0;
  weft::proxy::RemoteMemory b{reinterpret_cast<uint64_t>(p.recv.data()), p.recv.size(), nullptr};
  weft::proxy::RemoteMemory f{reinterpret_cast<uint64_t>(p.flags.data()), p.flags.size() * 8, nullptr};
  ProgressEngine::Job* job = eng.add(p.desc, std::make_shared<weft::proxy::HostEndpoint>("rank 1"), p.send.data(), b, f,
                                     p.ready.data(), p.words.data(), ProgressEngine::Staging{}, &done_word, 0);
  using C = EngineEpochTrace::Clock;
  // Not traced: nothing recorded.
  eng.set_epoch(job, 1, 2);
  for (uint32_t t = 0; t < 4; ++t) p.mark(t, 1);
  ASSERT_TRUE(wait_completed(job, 4));
  EXPECT_EQ(ProgressEngine::trace_of(job).seen, C::time_point{});
  EXPECT_EQ(ProgressEngine::trace_of(job).batches, 0u);
  eng.trace(job);
  uint64_t delivered = 4;
  for (uint64_t e = 2; e <= 4; ++e) {
    const C::time_point before = C::now();
    eng.set_epoch(job, e, 2);
    EXPECT_EQ(ProgressEngine::trace_of(job).seen, C::time_point{}) << "reset at set_epoch, epoch " << e;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const C::time_point marked = C::now();
    for (uint32_t t : {3u, 0u, 2u, 1u}) p.mark(t, e);
    delivered += 4;
    // The done word is stored after the stamps: once it holds e, every step is there.
    const auto end = C::now() + std::chrono::seconds(10);
    while (std::atomic_ref<uint64_t>(done_word).load(std::memory_order_acquire) < e) {
      ASSERT_LT(C::now(), end) << "epoch " << e << " not done";
      std::this_thread::yield();
    }
    const EngineEpochTrace t = ProgressEngine::trace_of(job);
    EXPECT_GE(t.seen, marked) << "epoch " << e << ": seen before the device marked anything";
    EXPECT_LE(t.seen, t.post);
    EXPECT_LE(t.post, t.posted);
    EXPECT_LE(t.posted, t.landed);
    EXPECT_LE(t.landed, t.done);
    EXPECT_NE(t.done, C::time_point{});
    EXPECT_GE(t.batches, 1u);
    EXPECT_LE(t.batches, 4u);
    EXPECT_GT(t.seen, before);
    ASSERT_TRUE(wait_completed(job, delivered));
    EXPECT_EQ(p.recv, p.send);
  }
  eng.check();
  eng.remove(job);
}
