// The progression engine's batches (part/engine.hpp, issue 28): the runs one pass posts go
// to the endpoint as one put_many, one write_words_many and one mark, and the pass that takes
// an epoch's last transport partition queues the done word behind the epoch's copies
// (write_mapped_word), once per epoch. A deferred endpoint holds every operation until the
// test releases them, as a stream holds them until the copy engines run them: so the test
// sees what was posted, in which order, and that nothing (done word included) lands early.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "part/engine.hpp"
#include "part/state.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;
using weft::proxy::Endpoint;
using weft::proxy::RemoteMemory;

namespace {

class DeferredEndpoint : public weft::proxy::HostEndpoint {
 public:
  DeferredEndpoint() : HostEndpoint("rank 1") {}
  void put(const RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override {
    queue([=] { std::memcpy(reinterpret_cast<char*>(dst.address) + off, src, bytes); });
  }
  void write_u64(const RemoteMemory& dst, uint64_t off, uint64_t value) override {
    queue([=] { store(dst.address + off, value); });
  }
  void put_many(const RemoteMemory& dst, const Put* p, size_t n) override {
    note("P" + std::to_string(n));
    HostEndpoint::put_many(dst, p, n);
  }
  void write_words_many(const RemoteMemory& dst, const Words* w, size_t n) override {
    uint64_t words = 0;
    for (size_t i = 0; i < n; ++i) words += w[i].n;
    note("W" + std::to_string(words));
    HostEndpoint::write_words_many(dst, w, n);
  }
  bool write_mapped_word(uint64_t address, uint64_t value) override {
    note("D" + std::to_string(value));
    queue([=] { store(address, value); });
    return true;
  }
  uint64_t mark(double) override {
    note("M");
    std::lock_guard<std::mutex> lock(mu_);
    return ops_.size();
  }
  bool landed(uint64_t ticket) override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ >= ticket;
  }
  /// Runs everything queued so far (the copy engines catch up).
  void release() {
    std::lock_guard<std::mutex> lock(mu_);
    for (; done_ < ops_.size(); ++done_) ops_[done_]();
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  size_t marks() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const std::string& s : log_) n += s == "M";
    return n;
  }

 private:
  static void store(uint64_t address, uint64_t value) {
    std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(address)).store(value, std::memory_order_release);
  }
  void queue(std::function<void()> f) {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back(std::move(f));
  }
  void note(std::string s) {
    std::lock_guard<std::mutex> lock(mu_);
    log_.push_back(std::move(s));
  }
  std::mutex mu_;
  std::vector<std::function<void()>> ops_;
  size_t done_ = 0;
  std::vector<std::string> log_;
};

template <class F>
bool eventually(F f) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!f())
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  return true;
}

uint64_t load(const uint64_t& w) { return std::atomic_ref<const uint64_t>(w).load(std::memory_order_acquire); }

}  // namespace

TEST(PartEngineBatch, APassGoesAsOneBatchAndTheDoneWordQueuesBehindTheEpochsCopies) {
  constexpr uint32_t U = 64;
  constexpr uint64_t pb = 32;
  std::vector<char> send(U * pb), recv(U * pb, 0x5a);
  std::vector<uint64_t> flags(kFlagFirst + U, 0), ready(U, 0), words(kRecordWords * U, 0);
  uint64_t done = 0;
  ProgressJobDesc d;
  d.who = "rank 0: psend to rank 1 (tag 3)";
  d.partitions = U;
  d.partition_bytes = pb;
  d.send_bytes = d.remote_bytes = U * pb;
  d.remote_flag_words = kFlagFirst + U;
  ProgressEngine eng(10, "rank 0's engine");
  auto ep = std::make_shared<DeferredEndpoint>();
  const RemoteMemory b{reinterpret_cast<uint64_t>(recv.data()), recv.size(), nullptr};
  const RemoteMemory f{reinterpret_cast<uint64_t>(flags.data()), flags.size() * 8, nullptr};
  ProgressEngine::Job* job = eng.add(d, ep, send.data(), b, f, ready.data(), words.data(), ProgressEngine::Staging{},
                                     &done, reinterpret_cast<uint64_t>(&done));
  auto mark = [&](uint32_t t, uint64_t e) { std::atomic_ref<uint64_t>(ready[t]).store(e, std::memory_order_release); };
  auto flag = [&](uint32_t t) { return std::atomic_ref<uint64_t>(flags[kFlagFirst + t]).load(); };

  std::iota(send.begin(), send.end(), 1);
  eng.set_epoch(job, 1, 1);
  // The even transport partitions: 32 runs of one, found in one pass, posted as one batch.
  eng.exclusive([&] {
    for (uint32_t t = 0; t < U; t += 2) mark(t, 1);
  });
  ASSERT_TRUE(eventually([&] { return ep->marks() == 1; }));
  EXPECT_EQ(ep->log(), (std::vector<std::string>{"P32", "W32", "M"}));
  EXPECT_EQ(job->completed.load(), 0u) << "counted before it landed";
  EXPECT_EQ(flag(0), 0u) << "a flag landed before the copies ran";
  ep->release();
  ASSERT_TRUE(eventually([&] { return job->completed.load() == 32; }));
  EXPECT_EQ(load(done), 0u) << "done with half the epoch delivered";
  // The odd ones complete the epoch: their batch carries the done word, after their flags.
  eng.exclusive([&] {
    for (uint32_t t = 1; t < U; t += 2) mark(t, 1);
  });
  ASSERT_TRUE(eventually([&] { return ep->marks() == 2; }));
  EXPECT_EQ(ep->log(), (std::vector<std::string>{"P32", "W32", "M", "P32", "W32", "D1", "M"}));
  EXPECT_EQ(load(done), 0u) << "the done word landed before the epoch's copies";
  ep->release();
  ASSERT_TRUE(eventually([&] { return load(done) == 1 && job->completed.load() == U; }));
  EXPECT_EQ(recv, send);
  for (uint32_t t = 0; t < U; ++t) EXPECT_EQ(flag(t), 1u) << "transport partition " << t;

  // Epoch 2, threshold 4, all ready between two passes: one run, one put, 16 flag words, the
  // done word once.
  std::iota(send.begin(), send.end(), 9);
  eng.set_epoch(job, 2, 4);
  eng.exclusive([&] {
    for (uint32_t t = 0; t < U / 4; ++t) mark(t, 2);
  });
  ASSERT_TRUE(eventually([&] { return ep->marks() == 3; }));
  const std::vector<std::string> log = ep->log();
  EXPECT_EQ(std::vector<std::string>(log.begin() + 7, log.end()), (std::vector<std::string>{"P1", "W16", "D2", "M"}));
  ep->release();
  ASSERT_TRUE(eventually([&] { return load(done) == 2 && job->completed.load() == U + U / 4; }));
  EXPECT_EQ(recv, send);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(ep->marks(), 3u) << "posted again after the epoch was delivered";
  eng.check();
  eng.remove(job);
}

TEST(PartEngineBatch, StagedRunsAreCutSmallerThanDirectOnes) {
  EXPECT_EQ(engine_chunk_bytes(false), kEngineChunkBytes);
  EXPECT_EQ(engine_chunk_bytes(true), kEngineStagedChunkBytes);
  EXPECT_LT(kEngineStagedChunkBytes, kEngineChunkBytes);
  EXPECT_EQ(engine_eager_bytes(false), kEngineEagerBytes);
  EXPECT_LE(engine_eager_bytes(true), engine_chunk_bytes(true)) << "a staged piece could never be posted eagerly";
}
