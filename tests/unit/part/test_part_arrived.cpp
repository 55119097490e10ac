// A device parrived's cache of `started` (weft/part/common.hpp arrived_cached, the flag
// block's kFlagStartedSeen): over many epochs, against a host word that the "host" raises at
// each start, its answer must equal arrived_in's with the host word read every time, and
// its polls must read the host word about once per partition per epoch, not once per call.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "weft/part/common.hpp"

using namespace weft::part;

namespace {
struct FakeMem {
  uint64_t seen = 0;     // kFlagStartedSeen (device memory)
  uint64_t started = 0;  // kWordStarted (host memory)
  int host_reads = 0;
  uint64_t load_seen() const { return seen; }
  uint64_t load_started() {
    ++host_reads;
    return started;
  }
  void raise_seen(uint64_t s) { seen = s > seen ? s : seen; }
};
}  // namespace

TEST(PartArrived, CachedAnswerEqualsTheHostWordsAndPollsStayOnTheDevice) {
  constexpr int kPartitions = 16, kPolls = 50;
  FakeMem m;
  std::vector<uint64_t> flag(kPartitions, 0);
  std::mt19937 rng(11);
  EXPECT_FALSE(arrived_cached(m, 0));  // never arrived: no host read at all
  EXPECT_EQ(m.host_reads, 0);
  for (uint64_t e = 1; e <= 300; ++e) {
    m.started = e;  // start
    const int before = m.host_reads;
    // Polls before any partition of e arrived, some flags still at e - 1 (the stale cache case).
    for (int i = 0; i < kPolls; ++i) {
      const int p = static_cast<int>(rng() % kPartitions);
      EXPECT_EQ(arrived_cached(m, flag[p]), arrived_in(flag[p], m.started)) << "epoch " << e;
      EXPECT_FALSE(arrived_cached(m, flag[p])) << "epoch " << e << " partition " << p;
    }
    // The first poll read the host word (cache e - 1 and a flag at e - 1); the rest did not.
    EXPECT_EQ(m.host_reads - before, e == 1 ? 0 : 1) << "epoch " << e;
    EXPECT_EQ(m.seen, e == 1 ? 0u : e) << "epoch " << e;
    // Partitions arrive in a random order; each poll agrees with the host word.
    std::vector<int> order(kPartitions);
    for (int p = 0; p < kPartitions; ++p) order[p] = p;
    std::shuffle(order.begin(), order.end(), rng);
    for (int p : order) {
      flag[p] = e;
      for (int q = 0; q < kPartitions; ++q)
        ASSERT_EQ(arrived_cached(m, flag[q]), arrived_in(flag[q], m.started)) << "epoch " << e << " partition " << q;
    }
    EXPECT_EQ(m.seen, e);
  }
}

TEST(PartArrived, AStaleCacheNeverCountsTheLastEpochsFlag) {
  FakeMem m;
  m.started = 4;
  EXPECT_TRUE(arrived_cached(m, 4));
  EXPECT_EQ(m.seen, 4u);
  m.started = 5;                       // the next start; the cache still says 4
  EXPECT_FALSE(arrived_cached(m, 4));  // the flag of epoch 4 is not epoch 5's
  EXPECT_EQ(m.seen, 5u);
  const int reads = m.host_reads;
  EXPECT_FALSE(arrived_cached(m, 4));  // now below the cache: no host read
  EXPECT_EQ(m.host_reads, reads);
  EXPECT_TRUE(arrived_cached(m, 5));
  FakeMem fresh;
  EXPECT_FALSE(arrived_cached(fresh, 3));
}
