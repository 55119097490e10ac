// The transport-partition arithmetic of the device pready (weft/part/common.hpp), run on the
// host: a sender's counters and a receiver's flags simulated over several epochs with the
// partitions readied in random orders, as the device's atomics would see them. Each
// transport partition must signal exactly once per epoch, at its last user partition, and
// the sent count must reach what the host's wait expects (transport partitions per epoch).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "part/state.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

/// A send request's device state (counters, sent) and its receiver's flags, driven by pready.
struct Sim {
  uint32_t partitions, threshold;
  std::vector<unsigned long long> counters;
  std::vector<uint64_t> flags;  ///< per transport partition: the epoch it last arrived in
  uint64_t sent = 0;
  uint32_t signals_this_epoch = 0;

  Sim(uint32_t u, uint32_t thr)
      : partitions(u), threshold(thr), counters(transport_partitions(u, thr), 0), flags(transport_partitions(u, thr), 0) {}

  /// PsendDeviceHandle::complete, one pready of user partition p in epoch e.
  void pready(uint32_t p, uint64_t e) {
    const uint32_t t = transport_of(p, threshold);
    ASSERT_LT(t, counters.size());
    if (completes_transport(counters[t]++, partitions, threshold, t, e)) {
      EXPECT_LT(flags[t], e) << "transport partition " << t << " signalled twice in epoch " << e;
      flags[t] = e;
      ++sent;
      ++signals_this_epoch;
    }
  }
  /// PrecvDeviceHandle::parrived.
  bool parrived(uint32_t p, uint64_t e) const { return flags[transport_of(p, threshold)] >= e; }
  /// DeviceRequestImpl::resync_counters.
  void resync(uint64_t completed) {
    for (uint32_t t = 0; t < counters.size(); ++t) counters[t] = transport_size(partitions, threshold, t) * completed;
  }
};

}  // namespace

TEST(PartTransport, SizesCoverEveryPartitionOnce) {
  for (uint32_t u : {1u, 2u, 5u, 24u, 192u, 6144u, 6145u})
    for (uint32_t thr : {1u, 3u, 4u, 32u, u}) {
      if (thr > u) continue;
      const uint32_t T = transport_partitions(u, thr);
      uint64_t total = 0;
      for (uint32_t t = 0; t < T; ++t) {
        const uint64_t n = transport_size(u, thr, t);
        EXPECT_GE(n, 1u) << u << " partitions, threshold " << thr << ", transport " << t;
        EXPECT_LE(n, thr);
        total += n;
      }
      EXPECT_EQ(total, u) << u << " partitions, threshold " << thr;
      EXPECT_EQ(transport_of(u - 1, thr), T - 1);
      EXPECT_EQ(transport_of(0, thr), 0u);
    }
}

TEST(PartTransport, EachTransportSignalsOncePerEpochAtItsLastPartition) {
  std::mt19937 rng(15);
  // The GPU test's cases (6144 threads at thread, warp, block granularity; thresholds 1, 4,
  // all) and odd remainders.
  const std::pair<uint32_t, uint32_t> cases[] = {{6144, 1}, {6144, 4}, {6144, 6144}, {192, 1}, {192, 4},
                                                 {192, 192}, {24, 1},   {24, 4},      {24, 24},  {10, 4},
                                                 {7, 3},     {5, 1},    {1, 1}};
  for (auto [u, thr] : cases) {
    Sim s(u, thr);
    const uint32_t T = transport_partitions(u, thr);
    std::vector<uint32_t> order(u);
    std::iota(order.begin(), order.end(), 0u);
    for (uint64_t e = 1; e <= 3; ++e) {
      s.signals_this_epoch = 0;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<uint32_t> left(T);
      for (uint32_t t = 0; t < T; ++t) left[t] = static_cast<uint32_t>(transport_size(u, thr, t));
      for (uint32_t p : order) {
        const uint32_t t = transport_of(p, thr);
        EXPECT_FALSE(s.parrived(p, e)) << u << "/" << thr << ": partition " << p << " arrived early in epoch " << e;
        s.pready(p, e);
        --left[t];
        EXPECT_EQ(s.parrived(p, e), left[t] == 0) << u << "/" << thr << ": partition " << p << ", epoch " << e;
      }
      EXPECT_EQ(s.signals_this_epoch, T) << u << "/" << thr << " epoch " << e;
      // The host's wait: sent (all epochs) against transport partitions per prepared epoch.
      EXPECT_EQ(s.sent, T * e) << u << "/" << thr << " epoch " << e;
      for (uint32_t p = 0; p < u; ++p) ASSERT_TRUE(s.parrived(p, e));
    }
  }
}

TEST(PartTransport, ResyncAfterAnEpochThatMissedPartitions) {
  // Epoch 2 ends in a device error with partitions 0 and 9 never readied; the host resyncs the
  // counters to 2 completed epochs, and epoch 3 completes every transport partition again.
  Sim s(10, 4);
  for (uint32_t p = 0; p < 10; ++p) s.pready(p, 1);
  EXPECT_EQ(s.sent, 3u);
  for (uint32_t p = 1; p < 9; ++p) s.pready(p, 2);
  EXPECT_EQ(s.sent, 4u);  // only the middle transport partition completed
  s.resync(2);
  const uint64_t before = s.sent;
  for (uint32_t p = 10; p-- > 0;) s.pready(p, 3);
  EXPECT_EQ(s.sent - before, 3u);
  for (uint32_t p = 0; p < 10; ++p) EXPECT_TRUE(s.parrived(p, 3));
}

TEST(PartTransport, FlagWordsATestAcrossNodesReads) {
  // Before a threshold is seen: the header alone (nothing can be complete).
  EXPECT_EQ(flag_words_to_read(100, 0), kFlagFirst);
  // The header and one flag per transport partition of the threshold.
  for (uint64_t thr : {1u, 3u, 7u, 50u, 99u, 100u})
    EXPECT_EQ(flag_words_to_read(100, thr), kFlagFirst + transport_partitions(100, static_cast<uint32_t>(thr)))
        << "threshold " << thr;
  // A threshold above the partitions (the peer's word: hostile) is one transport partition,
  // however large, never a value truncated to 32 bits (2^32 would read as 0: no partitions).
  EXPECT_EQ(flag_words_to_read(100, 101), kFlagFirst + 1);
  EXPECT_EQ(flag_words_to_read(100, uint64_t{1} << 32), kFlagFirst + 1);
  EXPECT_EQ(flag_words_to_read(100, ~uint64_t{0}), kFlagFirst + 1);
  EXPECT_EQ(flag_words_to_read(1u << 20, 1), kFlagFirst + (1u << 20));
}

TEST(PartTransport, TransportOfAPeersThreshold) {
  // The flag block's threshold is the peer's word: within 1..partitions it maps as
  // transport_of does; at or above the partitions (2^32 and 2^32 + 3 included, which 32 bits
  // would read as 0 and 3) every partition is in transport partition 0.
  for (uint32_t p : {0u, 5u, 99u}) {
    for (uint64_t thr : {1u, 3u, 7u, 99u})
      EXPECT_EQ(transport_of_peer(p, thr, 100), transport_of(p, static_cast<uint32_t>(thr)));
    for (uint64_t thr : {uint64_t{100}, uint64_t{101}, uint64_t{1} << 32, (uint64_t{1} << 32) + 3, ~uint64_t{0}})
      EXPECT_EQ(transport_of_peer(p, thr, 100), 0u) << "partition " << p << " threshold " << thr;
  }
}
