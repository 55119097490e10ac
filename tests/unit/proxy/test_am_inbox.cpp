// net/am_inbox.hpp: the receiving rules of the UCX transport's active-message mode, without
// a network. A signal takes effect only after the data its sender sent before it has landed,
// whatever order rendezvous completions come in; addresses outside registered memory, and
// misaligned signals, are refused; a peer cannot queue signals without bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
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
  EXPECT_TRUE(in.signal(1, 0, &word, std::vector<uint64_t>{5}.data(), 1));  // no data before it: at once
  EXPECT_EQ(word, 5u);
  uint64_t v = 6;
  EXPECT_TRUE(in.signal(1, 2, &word, &v, 1));  // after 2 data messages, none landed
  EXPECT_EQ(word, 5u);
  EXPECT_EQ(in.waiting(1), 1u);
  in.landed(0);  // another peer's data does not count
  in.landed(1);
  EXPECT_EQ(word, 5u);
  in.landed(1);
  EXPECT_EQ(word, 6u);
  EXPECT_EQ(in.waiting(1), 0u);
}

/// Many messages whose rendezvous completions land in a random order, signals between them:
/// every signal is written exactly when the data before it is complete, never earlier, and
/// the counter never goes back.
TEST(AmInbox, ReorderedCompletionsReleaseSignalsInOrder) {
  std::mt19937 rng(29);
  for (int round = 0; round < 50; ++round) {
    AmInbox in(2);
    uint64_t counter = 0;
    uint64_t sent = 0;
    std::vector<uint64_t> after_of;  // signal value v was sent after after_of[v - 1] data messages
    for (int i = 0; i < 40; ++i) {
      if (rng() % 3 == 0) {
        const uint64_t v = after_of.size() + 1;
        after_of.push_back(sent);
        ASSERT_TRUE(in.signal(0, sent, &counter, &v, 1));
      } else {
        ++sent;
      }
    }
    std::vector<int> order(sent);
    std::shuffle(order.begin(), order.end(), rng);  // which message completes is irrelevant: counts are
    uint64_t landed = 0, last = counter;
    for (size_t i = 0; i < order.size(); ++i) {
      in.landed(0);
      ++landed;
      // The newest signal whose data has all landed is the value written.
      uint64_t want = 0;
      for (size_t v = 0; v < after_of.size(); ++v)
        if (after_of[v] <= landed) want = v + 1;
      ASSERT_EQ(counter, want) << "round " << round << ", after " << landed << " landed";
      ASSERT_GE(counter, last);
      last = counter;
    }
    EXPECT_EQ(in.waiting(0), 0u);
  }
}

TEST(AmInbox, WordsOfOneSignalAreWrittenTogether) {
  std::vector<uint64_t> flags(4, 0);
  AmInbox in(3);
  const uint64_t values[3] = {7, 8, 9};
  ASSERT_TRUE(in.signal(2, 1, flags.data() + 1, values, 3));
  EXPECT_EQ(flags, (std::vector<uint64_t>{0, 0, 0, 0}));
  in.landed(2);
  EXPECT_EQ(flags, (std::vector<uint64_t>{0, 7, 8, 9}));
}

TEST(AmInbox, APeerCannotQueueSignalsWithoutBound) {
  uint64_t word = 0, v = 1;
  AmInbox in(2);
  for (size_t i = 0; i < AmInbox::kMaxWaiting; ++i) ASSERT_TRUE(in.signal(1, 1'000'000, &word, &v, 1));
  EXPECT_FALSE(in.signal(1, 1'000'000, &word, &v, 1));
  EXPECT_EQ(in.waiting(1), AmInbox::kMaxWaiting);
  EXPECT_TRUE(in.signal(0, 0, &word, &v, 1));  // other peers are unaffected
  EXPECT_EQ(word, 1u);
}

}  // namespace
}  // namespace weft::net
