// The claim's slow path (weft/part/common.hpp claim_behind) run on the CPU: host threads play
// a producer kernel's blocks and std::atomic words the control block and the host words. The
// device runs the same template over its own memory operations (detail::DeviceClaimMemory).
// What it must keep: one read of the host words per epoch however many blocks find the cache
// behind (many blocks reading them at once was the kernel-copy path's slowdown in round 3),
// every block of a prepared epoch claims it, every misuse is refused and recorded, and a
// reader that is held up costs time, never a hang or a wrong answer.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "part/resync.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

uint64_t fetch_max(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

/// One request's device state and host words, and what the claims did to them.
struct Words {
  std::atomic<uint64_t> ctl[kCtlWords] = {};
  std::atomic<uint64_t> prepared{0}, started{0};
  std::atomic<uint64_t> host_loads{0}, errors{0};
  std::atomic<uint32_t> first_code{kDevOk};
  std::chrono::milliseconds read_delay{0};  ///< a reader held up this long in its host read
  std::chrono::milliseconds wait_limit{5000};

  void resync(uint64_t completed) {
    const std::array<uint64_t, 3> w = resync_ctl(0, completed);
    for (uint32_t i = 0; i < 3; ++i) ctl[kCtlReader + i] = w[i];
  }
};

/// claim_behind's memory operations over Words (DeviceClaimMemory's, on std::atomic).
struct HostClaimMemory {
  Words& w;
  uint64_t raise_reader(uint64_t e) { return fetch_max(w.ctl[kCtlReader], e); }
  void raise_cache(uint64_t v) { fetch_max(w.ctl[kCtlEpoch], v); }
  void raise_checked(uint64_t e) { fetch_max(w.ctl[kCtlChecked], e); }  // seq_cst: after raise_cache
  uint64_t load_cache() { return w.ctl[kCtlEpoch].load(); }
  uint64_t load_checked() { return w.ctl[kCtlChecked].load(); }
  uint64_t load_prepared() {
    ++w.host_loads;
    if (w.read_delay.count() > 0) std::this_thread::sleep_for(w.read_delay);
    return w.prepared.load();
  }
  uint64_t load_started() {
    ++w.host_loads;
    return w.started.load();
  }
  template <typename Ready>
  bool wait(Ready ready) {
    const auto end = std::chrono::steady_clock::now() + w.wait_limit;
    while (!ready()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::yield();
    }
    return true;
  }
  void record(uint32_t code, uint64_t, uint64_t) {
    uint32_t ok = kDevOk;
    w.first_code.compare_exchange_strong(ok, code);
    ++w.errors;
  }
};

/// detail::claim: the stamp's epoch, the cache, then the slow path when the cache is behind.
uint64_t claim(Words& w, std::vector<std::atomic<uint64_t>>& stamps, uint32_t p) {
  const uint64_t e = stamps[p].fetch_add(1) + 1;
  if (e <= w.ctl[kCtlEpoch].load()) return e;
  HostClaimMemory m{w};
  return claim_behind(m, p, e);
}

/// `blocks` threads, each claiming partitions b, b + blocks, ... once; returns the epochs got.
std::vector<uint64_t> run_kernel(Words& w, std::vector<std::atomic<uint64_t>>& stamps, uint32_t blocks) {
  const uint32_t U = static_cast<uint32_t>(stamps.size());
  std::vector<uint64_t> got(U, ~0ull);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (uint32_t b = 0; b < blocks; ++b)
    ts.emplace_back([&, b] {
      while (!go.load()) std::this_thread::yield();
      for (uint32_t p = b; p < U; p += blocks) got[p] = claim(w, stamps, p);
    });
  go = true;
  for (auto& t : ts) t.join();
  return got;
}

TEST(PartClaim, OneHostReadPerEpochWhateverTheBlocks) {
  // The reader's host read takes 30 ms, so every block finds the cache behind meanwhile.
  Words w;
  w.read_delay = std::chrono::milliseconds(30);
  std::vector<std::atomic<uint64_t>> stamps(512);
  for (uint64_t e = 1; e <= 8; ++e) {
    w.started = e;
    w.prepared = e;  // pbuf_prepare returned
    const uint64_t before = w.host_loads.load();
    const std::vector<uint64_t> got = run_kernel(w, stamps, 32);
    for (uint32_t p = 0; p < got.size(); ++p) ASSERT_EQ(got[p], e) << "partition " << p << " epoch " << e;
    EXPECT_EQ(w.host_loads.load() - before, 1u) << "epoch " << e << ": host words read more than once";
    EXPECT_EQ(w.ctl[kCtlEpoch].load(), e);
    EXPECT_EQ(w.ctl[kCtlChecked].load(), e);
  }
  EXPECT_EQ(w.errors.load(), 0u);
}

TEST(PartClaim, AMisuseIsRefusedByEveryBlockAndNamed) {
  // Started but not prepared: every pready of the epoch is refused, the first error is kept.
  Words w;
  std::vector<std::atomic<uint64_t>> stamps(256);
  w.started = 1;
  std::vector<uint64_t> got = run_kernel(w, stamps, 16);
  for (uint64_t g : got) ASSERT_EQ(g, 0u);
  EXPECT_EQ(w.first_code.load(), kDevNotPrepared);
  EXPECT_EQ(w.errors.load(), 256u);
  // The host's next start resyncs (no epoch completed); the next kernel reads the host once.
  for (auto& s : stamps) s = 0;
  w.resync(0);
  w.first_code = kDevOk;
  w.errors = 0;
  w.prepared = 1;
  const uint64_t before = w.host_loads.load();
  got = run_kernel(w, stamps, 16);
  for (uint64_t g : got) ASSERT_EQ(g, 1u);
  EXPECT_EQ(w.host_loads.load() - before, 1u);
  EXPECT_EQ(w.errors.load(), 0u);
}

TEST(PartClaim, BeforeStartAndTwiceAreNamed) {
  Words w;
  std::vector<std::atomic<uint64_t>> stamps(64);
  std::vector<uint64_t> got = run_kernel(w, stamps, 8);  // before any start
  for (uint64_t g : got) ASSERT_EQ(g, 0u);
  EXPECT_EQ(w.first_code.load(), kDevNotStarted);
  for (auto& s : stamps) s = 0;
  w.resync(0);
  w.first_code = kDevOk;
  w.errors = 0;
  w.started = 1;
  w.prepared = 1;
  got = run_kernel(w, stamps, 8);
  for (uint64_t g : got) ASSERT_EQ(g, 1u);
  got = run_kernel(w, stamps, 8);  // the same epoch again: each a second pready
  for (uint64_t g : got) ASSERT_EQ(g, 0u);
  EXPECT_EQ(w.first_code.load(), kDevTwice);
  EXPECT_EQ(w.errors.load(), 64u);
}

TEST(PartClaim, StaleElectionWordsAfterAMisuseCostOnlyTime) {
  // Without the resync of the election words the next epoch is still claimed right (every
  // block reads the host words itself); with it, once.
  for (bool resync : {false, true}) {
    Words w;
    std::vector<std::atomic<uint64_t>> stamps(128);
    w.started = 1;
    w.prepared = 1;
    run_kernel(w, stamps, 8);
    run_kernel(w, stamps, 8);  // twice in epoch 1: election words at 2
    for (auto& s : stamps) s = 1;  // the host's resync of the stamps (1 completed epoch)
    if (resync) w.resync(1);
    w.started = 2;
    w.prepared = 2;
    w.errors = 0;
    const uint64_t before = w.host_loads.load();
    const std::vector<uint64_t> got = run_kernel(w, stamps, 8);
    for (uint64_t g : got) ASSERT_EQ(g, 2u) << "resync " << resync;
    EXPECT_EQ(w.errors.load(), 0u);
    if (resync) {
      EXPECT_EQ(w.host_loads.load() - before, 1u);
    }
  }
}

TEST(PartClaim, AHeldUpReaderCostsTimeNotAHang) {
  // The reader's host read takes 200 ms; the others give up waiting after 20 ms and read
  // the host words themselves: every partition is still claimed, nothing hangs.
  Words w;
  w.read_delay = std::chrono::milliseconds(200);
  w.wait_limit = std::chrono::milliseconds(20);
  std::vector<std::atomic<uint64_t>> stamps(16);
  w.started = 1;
  w.prepared = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<uint64_t> got = run_kernel(w, stamps, 8);
  for (uint64_t g : got) ASSERT_EQ(g, 1u);
  EXPECT_GT(w.host_loads.load(), 1u);  // the waiters read too
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(PartClaim, ResyncCtlKeepsTheLayout) {
  const std::array<uint64_t, 3> w = resync_ctl(42, 7);
  EXPECT_EQ(w[kCtlReader - kCtlReader], 7u);
  EXPECT_EQ(w[kCtlChecked - kCtlReader], 7u);
  EXPECT_EQ(w[kCtlSent - kCtlReader], 42u);
}

}  // namespace
