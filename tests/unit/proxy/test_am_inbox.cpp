// net/am_inbox.hpp: the receiving rules of the UCX transport's active-message mode, without
// a network. A signal takes effect only after every data message its sender sent before it
// has landed, and after the signals sent before it, whatever order lanes and rendezvous
// completions deliver them in (also from several threads at once); addresses outside
// registered memory, misaligned signals, replayed or far-ahead numbers are refused; a peer
// cannot queue signals or early data without bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "net/am_inbox.hpp"

namespace weft::net {
namespace {

uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

TEST(AmInbox, LocatesOnlyInsideRegisteredMemory) {
  std::vector<uint64_t> a(16), b(4);
  AmInbox in(2);
  in.add_memory(addr(a.data()), a.size() * 8);
  in.add_memory(addr(b.data()), b.size() * 8);
  EXPECT_EQ(in.locate(addr(a.data()), 128), reinterpret_cast<char*>(a.data()));
  EXPECT_EQ(in.locate(addr(a.data()) + 120, 8, 8), reinterpret_cast<char*>(a.data()) + 120);
  EXPECT_EQ(in.locate(addr(a.data()) + 128, 0), reinterpret_cast<char*>(a.data()) + 128);  // empty, at the end
  EXPECT_EQ(in.locate(addr(a.data()) + 121, 8), nullptr);                                    // one byte past
  EXPECT_EQ(in.locate(addr(a.data()) + 4, 8, 8), nullptr);                                   // misaligned signal
  EXPECT_EQ(in.locate(addr(a.data()) - 8, 8), nullptr);                                      // before
  EXPECT_EQ(in.locate(addr(a.data()) + 8, ~0ull), nullptr);                                  // wraps
  EXPECT_EQ(in.locate(addr(b.data()), 32), reinterpret_cast<char*>(b.data()));
  EXPECT_EQ(in.locate(addr(a.data()), 129), nullptr);  // spans past the end of a
  EXPECT_EQ(in.locate(0, 8), nullptr);
}

TEST(AmInbox, SignalWaitsForTheDataSentBeforeIt) {
  uint64_t word = 0;
  AmInbox in(2);
  EXPECT_TRUE(in.signal(1, 0, 0, &word, std::vector<uint64_t>{5}.data(), 1));  // no data before it: at once
  EXPECT_EQ(word, 5u);
  uint64_t v = 6;
  EXPECT_TRUE(in.signal(1, 1, 2, &word, &v, 1));  // after 2 data messages, none landed
  EXPECT_EQ(word, 5u);
  EXPECT_EQ(in.waiting(1), 1u);
  EXPECT_TRUE(in.landed(0, 0));  // another peer's data does not count
  EXPECT_TRUE(in.landed(1, 0));
  EXPECT_EQ(word, 5u);
  EXPECT_TRUE(in.landed(1, 1));
  EXPECT_EQ(word, 6u);
  EXPECT_EQ(in.waiting(1), 0u);
}

// Data sent after a signal that lands before data sent before it does not release it: the
// prefix counts, not how many landed.
TEST(AmInbox, DataLandingBeyondAGapReleasesNothing) {
  uint64_t word = 0, v = 1;
  AmInbox in(2);
  ASSERT_TRUE(in.signal(1, 0, 2, &word, &v, 1));  // after data 0 and 1
  EXPECT_TRUE(in.landed(1, 1));
  EXPECT_TRUE(in.landed(1, 2));  // sent after the signal, lands early
  EXPECT_TRUE(in.landed(1, 3));
  EXPECT_EQ(word, 0u);
  EXPECT_EQ(in.prefix(1), 0u);
  EXPECT_EQ(in.early(1), 3u);
  EXPECT_TRUE(in.landed(1, 0));
  EXPECT_EQ(word, 1u);
  EXPECT_EQ(in.prefix(1), 4u);
  EXPECT_EQ(in.early(1), 0u);
}

// Signals that arrive out of order (on different lanes) are written in their sender's
// order, so a counter never goes back.
TEST(AmInbox, SignalsTakeEffectInTheirSendersOrder) {
  uint64_t word = 0;
  AmInbox in(2);
  const uint64_t two = 2, one = 1, three = 3;
  ASSERT_TRUE(in.signal(1, 1, 0, &word, &two, 1));  // the second arrives first: held
  EXPECT_EQ(word, 0u);
  ASSERT_TRUE(in.signal(1, 2, 1, &word, &three, 1));  // the third needs data 0 too
  ASSERT_TRUE(in.signal(1, 0, 0, &word, &one, 1));    // the first: it and the second are written
  EXPECT_EQ(word, 2u);
  EXPECT_EQ(in.waiting(1), 1u);
  ASSERT_TRUE(in.landed(1, 0));
  EXPECT_EQ(word, 3u);
  EXPECT_EQ(in.waiting(1), 0u);
}

namespace {
/// One peer's traffic: `messages` data messages with signals between them (signal v was sent
/// after after_of[v] data messages and writes v + 1).
struct Script {
  uint64_t data = 0;
  std::vector<uint64_t> after_of;
};
Script script(std::mt19937& rng, int steps) {
  Script s;
  for (int i = 0; i < steps; ++i) {
    if (rng() % 3 == 0) s.after_of.push_back(s.data);
    else ++s.data;
  }
  return s;
}
/// The value the counter must hold: signals are written in order, each once its data's
/// prefix has landed and it has arrived.
uint64_t expected(const Script& s, const std::vector<bool>& arrived, uint64_t prefix) {
  uint64_t want = 0;
  for (size_t v = 0; v < s.after_of.size() && arrived[v] && s.after_of[v] <= prefix; ++v) want = v + 1;
  return want;
}
}  // namespace

/// Data messages and signals arriving in random orders, interleaved at random (lanes,
/// rendezvous completions): after every step the counter holds exactly the newest signal
/// whose data and earlier signals are all in, never more, and never goes back.
TEST(AmInbox, ReorderedCompletionsReleaseSignalsInOrder) {
  std::mt19937 rng(29);
  for (int round = 0; round < 200; ++round) {
    AmInbox in(2);
    const Script s = script(rng, 60);
    std::vector<uint64_t> data(s.data), sigs(s.after_of.size());
    for (uint64_t i = 0; i < data.size(); ++i) data[i] = i;
    for (uint64_t i = 0; i < sigs.size(); ++i) sigs[i] = i;
    std::shuffle(data.begin(), data.end(), rng);
    std::shuffle(sigs.begin(), sigs.end(), rng);
    std::vector<bool> landed(s.data, false), arrived(sigs.size(), false);
    uint64_t counter = 0, last = 0, prefix = 0;
    size_t d = 0, g = 0;
    while (d < data.size() || g < sigs.size()) {
      const bool take_data = g == sigs.size() || (d < data.size() && rng() % 2 == 0);
      if (take_data) {
        ASSERT_TRUE(in.landed(0, data[d]));
        landed[data[d++]] = true;
        while (prefix < landed.size() && landed[prefix]) ++prefix;
      } else {
        const uint64_t v = sigs[g++], value = v + 1;
        ASSERT_TRUE(in.signal(0, v, s.after_of[v], &counter, &value, 1));
        arrived[v] = true;
      }
      ASSERT_EQ(in.prefix(0), prefix);
      ASSERT_EQ(counter, expected(s, arrived, prefix)) << "round " << round << ", prefix " << prefix;
      ASSERT_GE(counter, last);
      last = counter;
    }
    EXPECT_EQ(counter, s.after_of.size());
    EXPECT_EQ(in.waiting(0), 0u);
    EXPECT_EQ(in.early(0), 0u);
  }
}

/// Four threads (lanes) land one peer's data and deliver its signals at once: every signal
/// is written, the counter only grows, and no signal is written before its data.
TEST(AmInbox, LanesOnThreadsKeepTheOrder) {
  constexpr int kLanes = 4;
  constexpr uint64_t kData = 4000;
  AmInbox in(2);
  std::vector<uint64_t> flag(kData, 0);  // data i "lands" by setting flag[i]
  uint64_t counter = 0;
  std::atomic<bool> bad{false};
  std::vector<std::thread> lanes;
  for (int l = 0; l < kLanes; ++l)
    lanes.emplace_back([&, l] {
      for (uint64_t i = static_cast<uint64_t>(l); i < kData; i += kLanes) {
        std::atomic_ref<uint64_t>(flag[i]).store(1, std::memory_order_release);
        if (!in.landed(1, i)) bad = true;
        if (i % 8 == 7) {  // signal i / 8 after data 0 .. i
          const uint64_t value = i / 8 + 1;
          if (!in.signal(1, i / 8, i + 1, &counter, &value, 1)) bad = true;
        }
      }
    });
  uint64_t last = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (last < kData / 8 && std::chrono::steady_clock::now() < end) {
    const uint64_t c = std::atomic_ref<uint64_t>(counter).load(std::memory_order_acquire);
    ASSERT_GE(c, last);
    for (uint64_t i = 0; i < c * 8; ++i) ASSERT_EQ(std::atomic_ref<uint64_t>(flag[i]).load(std::memory_order_acquire), 1u);
    last = c;
    if (bad) break;
  }
  for (auto& t : lanes) t.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(counter, kData / 8);
  EXPECT_EQ(in.prefix(1), kData);
}

TEST(AmInbox, WordsOfOneSignalAreWrittenTogether) {
  std::vector<uint64_t> flags(4, 0);
  AmInbox in(3);
  const uint64_t values[3] = {7, 8, 9};
  ASSERT_TRUE(in.signal(2, 0, 1, flags.data() + 1, values, 3));
  EXPECT_EQ(flags, (std::vector<uint64_t>{0, 0, 0, 0}));
  ASSERT_TRUE(in.landed(2, 0));
  EXPECT_EQ(flags, (std::vector<uint64_t>{0, 7, 8, 9}));
}

TEST(AmInbox, APeerCannotQueueSignalsWithoutBound) {
  uint64_t word = 0, v = 1;
  AmInbox in(2);
  for (uint64_t i = 0; i < AmInbox::kMaxWaiting; ++i) ASSERT_TRUE(in.signal(1, i, 1'000'000, &word, &v, 1));
  EXPECT_FALSE(in.signal(1, AmInbox::kMaxWaiting, 1'000'000, &word, &v, 1));
  EXPECT_EQ(in.waiting(1), AmInbox::kMaxWaiting);
  EXPECT_TRUE(in.signal(0, 0, 0, &word, &v, 1));  // other peers are unaffected
  EXPECT_EQ(word, 1u);
}

/// Numbers from the network: replays, numbers far ahead and unknown peers are refused and
/// change nothing.
TEST(AmInbox, ReplayedOrFarNumbersAreRefused) {
  uint64_t word = 0, v = 1;
  AmInbox in(2);
  ASSERT_TRUE(in.landed(1, 0));
  EXPECT_FALSE(in.admissible(1, 0));
  EXPECT_FALSE(in.landed(1, 0));  // landed before (below the prefix)
  ASSERT_TRUE(in.landed(1, 5));
  EXPECT_FALSE(in.admissible(1, 5));
  EXPECT_FALSE(in.landed(1, 5));  // landed before (early)
  EXPECT_TRUE(in.admissible(1, 4));
  EXPECT_FALSE(in.admissible(1, 1 + AmInbox::kWindow));
  EXPECT_FALSE(in.landed(1, 1 + AmInbox::kWindow));
  EXPECT_FALSE(in.landed(1, ~0ull));
  EXPECT_FALSE(in.landed(2, 0));  // no such peer
  EXPECT_FALSE(in.landed(-1, 0));
  EXPECT_EQ(in.prefix(1), 1u);
  EXPECT_EQ(in.early(1), 1u);
  ASSERT_TRUE(in.signal(1, 0, 0, &word, &v, 1));
  EXPECT_FALSE(in.signal(1, 0, 0, &word, &v, 1));  // replayed
  EXPECT_FALSE(in.signal(1, AmInbox::kMaxWaiting + 1, 0, &word, &v, 1));  // far ahead
  EXPECT_FALSE(in.signal(5, 0, 0, &word, &v, 1));
  EXPECT_EQ(in.waiting(1), 0u);
}

TEST(AmInbox, EarlyDataIsBounded) {
  AmInbox in(2);
  for (uint64_t i = 1; i <= AmInbox::kMaxWaiting; ++i) ASSERT_TRUE(in.landed(1, i));
  EXPECT_FALSE(in.landed(1, AmInbox::kMaxWaiting + 1));
  EXPECT_TRUE(in.landed(1, 0));  // the gap closes: everything drains
  EXPECT_EQ(in.prefix(1), AmInbox::kMaxWaiting + 1);
  EXPECT_EQ(in.early(1), 0u);
}

}  // namespace
}  // namespace weft::net
