// The started epoch of a device parrived (weft/part/common.hpp started_epoch) run on the CPU:
// host threads play the blocks of a grid (each call carries its grid's number, as %gridid does
// on the GPU), std::atomic words the started cell (device memory) and the host's started word.
// What it must keep: one read of the host word per grid however many calls, the epoch of the
// host's last start in every answer, nothing cached before the first start, and a reader that
// is held up, or two grids of one epoch at once, cost time or host reads, never a wrong epoch
// or a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "started_memory.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

uint64_t call(Cell& c, uint64_t grid) {
  HostStartedMemory m{c, grid};
  return started_epoch(m);
}

/// Grid `grid` of `blocks` threads, each calling `calls` times; returns every answer.
std::vector<uint64_t> run_grid(Cell& c, uint64_t grid, uint32_t blocks, uint32_t calls) {
  std::vector<uint64_t> got(size_t{blocks} * calls, ~0ull);
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (uint32_t b = 0; b < blocks; ++b)
    ts.emplace_back([&, b] {
      while (!go.load()) std::this_thread::yield();
      for (uint32_t i = 0; i < calls; ++i) got[size_t{b} * calls + i] = call(c, grid);
    });
  go = true;
  for (auto& t : ts) t.join();
  return got;
}

TEST(PartStarted, OneHostReadPerGridAndTheLastStartsEpoch) {
  // The reader's host read takes 20 ms, so every other block of the grid calls meanwhile.
  Cell c;
  c.read_delay = std::chrono::milliseconds(20);
  for (uint64_t e = 1; e <= 6; ++e) {
    c.started = e;  // the host's start of epoch e, before the epoch's kernel
    const uint64_t grid = 1000 + 7 * e;
    const uint64_t before = c.host_loads.load();
    for (uint64_t g : run_grid(c, grid, 16, 50)) ASSERT_EQ(g, e) << "epoch " << e;
    EXPECT_EQ(c.host_loads.load() - before, 1u) << "epoch " << e << ": the host word read more than once";
    EXPECT_EQ(c.w[kCellPublished].load(), grid);
    EXPECT_EQ(c.w[kCellEpoch].load(), e);
  }
}

TEST(PartStarted, AGridOfTheLastEpochIsNeverAnsweredFromTheCache) {
  // Epoch 1's grid published 1; the host starts epoch 2; the next grid must read 2 although
  // the cell still holds 1 (the answer that would take epoch 1's flags for epoch 2's).
  Cell c;
  c.started = 1;
  EXPECT_EQ(call(c, 5), 1u);
  EXPECT_EQ(call(c, 5), 1u);
  c.started = 2;
  EXPECT_EQ(call(c, 6), 2u);
  EXPECT_EQ(call(c, 6), 2u);
  EXPECT_EQ(c.host_loads.load(), 2u);
}

TEST(PartStarted, BeforeTheFirstStartNothingIsCached) {
  // Not started: every call reads the host word and answers 0 (parrived false); once the
  // host starts, the same grid's next call reads the epoch and caches it.
  Cell c;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(call(c, 9), 0u);
  EXPECT_EQ(c.host_loads.load(), 5u);
  EXPECT_EQ(c.w[kCellPublished].load(), kNoGrid);
  EXPECT_EQ(c.w[kCellReader].load(), kNoGrid) << "the election was not given back";
  c.started = 1;
  EXPECT_EQ(call(c, 9), 1u);
  EXPECT_EQ(call(c, 9), 1u);
  EXPECT_EQ(c.host_loads.load(), 6u);
  // Many blocks before the start: all 0, none waits for a reader that never publishes.
  Cell d;
  d.wait_limit = std::chrono::milliseconds(10000);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t g : run_grid(d, 3, 8, 20)) ASSERT_EQ(g, 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(PartStarted, AHeldUpReaderCostsTimeNotAHang) {
  // The reader's host read takes 200 ms; the other calls give up waiting after 20 ms and
  // read the host word themselves: every answer right, nothing hangs.
  Cell c;
  c.read_delay = std::chrono::milliseconds(200);
  c.wait_limit = std::chrono::milliseconds(20);
  c.started = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t g : run_grid(c, 11, 8, 1)) ASSERT_EQ(g, 3u);
  EXPECT_GT(c.host_loads.load(), 1u);  // the waiters read too
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(PartStarted, TwoGridsOfOneEpochAtOnceAnswerRight) {
  // Two kernels of one epoch call in turn: each takes the cell back from the other (a host
  // read per turn), every answer is the epoch.
  Cell c;
  c.started = 4;
  std::atomic<bool> go{false};
  std::vector<uint64_t> a(2000), b(2000);
  std::thread ta([&] {
    while (!go.load()) std::this_thread::yield();
    for (auto& x : a) x = call(c, 21);
  });
  std::thread tb([&] {
    while (!go.load()) std::this_thread::yield();
    for (auto& x : b) x = call(c, 22);
  });
  go = true;
  ta.join();
  tb.join();
  for (uint64_t x : a) ASSERT_EQ(x, 4u);
  for (uint64_t x : b) ASSERT_EQ(x, 4u);
  EXPECT_LE(c.host_loads.load(), 4000u);
}

TEST(PartStarted, AStaleReadNeverLowersTheCell) {
  // A grid whose host read was made before the host's last start (it misuses parrived: called
  // before start) publishes a lower epoch after a grid of the new epoch published: the cell's
  // epoch stays the new one, and the new grid's calls still answer it.
  Cell c;
  c.started = 7;
  EXPECT_EQ(call(c, 31), 7u);
  HostStartedMemory late{c, 30, 6};  // read 6 before start(7)
  EXPECT_EQ(started_epoch(late), 6u);
  EXPECT_EQ(c.w[kCellEpoch].load(), 7u);
  EXPECT_EQ(call(c, 31), 7u);
  EXPECT_EQ(call(c, 30), 7u);  // grid 30's next call answers from the cell
}

}  // namespace
