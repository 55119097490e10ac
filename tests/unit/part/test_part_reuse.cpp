// Epochs back to back on one request pair, without a GPU: the loop of the reuse GPU test
// (tests/gpu/part_tests.cu) on the kernel-copy path's epoch protocol. A sender and a receiver
// host thread exchange their host words (ready, prepared, started, done) as src/part/request.cpp
// does; two fake streams (worker threads that run queued tasks in order) stand in for the
// sender's producing kernel and the receiver's checking kernel. The device steps are
// weft/part/common.hpp's: the claim (claim_error against prepared and started), the
// transport counters, completes_epoch storing done, and parrived's rule (arrived_cached: the
// receiver's started word read only when the flag is at or above the cache of it).
//
// The receiver's checking kernel of epoch e may still be polling parrived when the host
// moves on. In the order the GPU test had on 2026-11-28 (start e + 1, then wait for the
// checking stream) such a kernel compares its partitions with e + 1, which cannot arrive
// before this side is ready for e + 1, which waits for the kernel: a hang until the kernel's
// own deadline (60 s on the GPU, the round's 120 s step ran out). The order the GPU test has
// now (the checking kernel finished, then start) completes every epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "part/poll.hpp"
#include "part/state.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;

namespace {

/// A stream: a worker thread that runs launched tasks one at a time, in order.
class Stream {
 public:
  Stream() : thread_([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void launch(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    cv_.notify_all();
  }
  /// Waits until every launched task has run (false after `seconds`).
  bool sync(double seconds) {
    host_waits_.store(true);
    std::unique_lock<std::mutex> lock(mu_);
    const bool ok = cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return queue_.empty() && !busy_; });
    host_waits_.store(false);
    return ok;
  }
  /// True while the host is inside sync (a lagging task waits for it).
  bool host_waits() const { return host_waits_.load(); }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      task();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::atomic<bool> host_waits_{false};
  std::thread thread_;
};

uint64_t value(uint64_t e, uint32_t p) { return (e << 32) ^ (p * 0x9e3779b9ull) ^ 0x5555; }
constexpr uint64_t kPoison = 0xA5A5A5A5A5A5A5A5ull;

/// Both sides of one send/receive pair: the words in shared host memory, the receiver's flag
/// block and buffer (the sender writes them through its mapping), the sender's device state.
struct Pair {
  uint32_t partitions, threshold, transports;
  std::atomic<uint64_t> ready{0}, done{0}, prepared{0}, started_send{0}, started_recv{0}, flag_threshold{0};
  std::atomic<uint64_t> seen{0}, started_reads{0}, polls{0};  // parrived's cache, its host reads, its calls
  std::unique_ptr<std::atomic<uint64_t>[]> flags, data;
  std::vector<uint64_t> stamps, counters;  // the producer's alone
  uint64_t sent = 0, cache = 0, done_stores = 0, errors = 0;
  std::atomic<uint64_t> checked{0}, wrong{0}, stalled{0};  // the checking kernel's counts
  Pair(uint32_t u, uint32_t thr)
      : partitions(u), threshold(thr), transports(transport_partitions(u, thr)),
        flags(new std::atomic<uint64_t>[transport_partitions(u, thr)]), data(new std::atomic<uint64_t>[u]),
        stamps(u, 0), counters(transport_partitions(u, thr), 0) {
    for (uint32_t t = 0; t < transports; ++t) flags[t] = 0;
    for (uint32_t p = 0; p < u; ++p) data[p] = 0;
  }

  /// The producing kernel of epoch e: writes each partition (in `order`), then its device pready.
  void produce(uint64_t e, const std::vector<uint32_t>& order) {
    for (uint32_t p : order) {
      data[p].store(value(e, p), std::memory_order_relaxed);
      const uint64_t pe = ++stamps[p];  // detail::claim
      if (pe > cache) {
        if (claim_error(pe, prepared.load(std::memory_order_acquire), started_send.load()) != kDevOk) {
          ++errors;
          continue;
        }
        cache = std::max(cache, prepared.load());
      }
      const uint32_t t = transport_of(p, threshold);  // PsendDeviceHandle::complete
      if (transport_size(partitions, threshold, t) > 1 && !completes_transport(counters[t]++, partitions, threshold, t, pe))
        continue;
      flags[t].store(pe, std::memory_order_release);
      if (completes_epoch(sent++, transports, pe)) {
        done.store(pe, std::memory_order_release);
        ++done_stores;
      }
    }
  }
  /// PrecvDeviceHandle::parrived: the flag, then arrived_cached with `seen` as the flag
  /// block's kFlagStartedSeen (raised by atomic max) and started_recv as the host word.
  bool parrived(uint32_t p) {
    polls.fetch_add(1, std::memory_order_relaxed);
    const uint64_t thr = flag_threshold.load(std::memory_order_acquire);
    if (thr == 0) return false;
    const uint64_t f = flags[transport_of_peer(p, thr, partitions)].load(std::memory_order_acquire);
    struct Mem {
      Pair& q;
      uint64_t load_seen() const { return q.seen.load(std::memory_order_relaxed); }
      uint64_t load_started() const {
        q.started_reads.fetch_add(1, std::memory_order_relaxed);
        return q.started_recv.load(std::memory_order_acquire);
      }
      void raise_seen(uint64_t s) const {
        uint64_t old = q.seen.load();
        while (old < s && !q.seen.compare_exchange_weak(old, s)) {
        }
      }
    } m{*this};
    return arrived_cached(m, f);
  }
  /// The checking kernel of epoch e: waits (up to `poll_s`) for each partition, then checks it.
  /// A `lagging` one first waits for the host to wait for its stream (a kernel that is still
  /// running when the host goes on).
  void check(uint64_t e, double poll_s, bool lagging, const Stream& stream) {
    for (HostDeadline d(10.0); lagging && !stream.host_waits() && !d.passed();) std::this_thread::yield();
    for (uint32_t p = 0; p < partitions; ++p) {
      Poller poll(poll_s);
      bool ok = true;
      while (ok && !parrived(p)) ok = poll.next();
      if (!ok) {
        uint64_t zero = 0;
        stalled.compare_exchange_strong(zero, e);
        return;
      }
      if (data[p].load(std::memory_order_relaxed) != value(e, p)) wrong.fetch_add(1);
      checked.fetch_add(1);
    }
  }
};

/// A host wait on `word` reaching e (request.cpp's await_ready and test); false at the deadline.
bool await(const std::atomic<uint64_t>& word, uint64_t e, double seconds) {
  Poller poll(seconds);
  while (word.load(std::memory_order_acquire) < e)
    if (!poll.next()) return false;
  return true;
}

struct Outcome {
  uint64_t epochs_done = 0;  ///< epochs both hosts completed
  bool send_timeout = false, recv_timeout = false;
};

/// `epochs` epochs of the reuse test's loop. The receiver's checking kernel lags on every
/// `lag_every`-th epoch (0: never). start_first: the receiver starts the next epoch before it
/// waits for its checking stream (the order that hung on the GPU); else after.
Outcome run_epochs(Pair& pair, uint64_t epochs, bool start_first, uint32_t lag_every, double poll_s, uint32_t seed) {
  constexpr double kWaitS = 20;
  Outcome out;
  Stream producer, checker;
  std::atomic<bool> send_failed{false};
  std::thread sender([&] {
    std::mt19937 rng(seed);
    std::vector<uint32_t> order(pair.partitions);
    std::iota(order.begin(), order.end(), 0u);
    for (uint64_t e = 1; e <= epochs; ++e) {
      pair.started_send.store(e, std::memory_order_release);                        // start
      if (!await(pair.ready, e, kWaitS)) return send_failed.store(true);             // pbuf_prepare
      if (e == 1) pair.flag_threshold.store(pair.threshold, std::memory_order_release);
      pair.prepared.store(e, std::memory_order_release);
      std::shuffle(order.begin(), order.end(), rng);
      producer.launch([&pair, e, order] { pair.produce(e, order); });
      if (!await(pair.done, e, kWaitS)) return send_failed.store(true);              // wait
    }
  });
  for (uint64_t e = 1; e <= epochs; ++e) {
    auto poison_and_sync = [&] {
      checker.launch([&pair] {
        for (uint32_t p = 0; p < pair.partitions; ++p) pair.data[p].store(kPoison, std::memory_order_relaxed);
      });
      return checker.sync(kWaitS);
    };
    if (!start_first && !poison_and_sync()) break;
    pair.started_recv.store(e, std::memory_order_release);  // start
    if (start_first && !poison_and_sync()) break;
    pair.ready.store(e, std::memory_order_release);  // pbuf_prepare: ready-to-receive
    const bool lagging = lag_every != 0 && e % lag_every == 0;
    checker.launch([&pair, &checker, e, poll_s, lagging] { pair.check(e, poll_s, lagging, checker); });
    if (!await(pair.done, e, kWaitS)) {  // wait
      out.recv_timeout = true;
      break;
    }
    out.epochs_done = e;
  }
  checker.sync(kWaitS);
  if (out.recv_timeout || out.epochs_done < epochs) pair.ready.store(~0ull >> 1);  // let a waiting sender finish
  sender.join();
  producer.sync(kWaitS);
  out.send_timeout = send_failed.load();
  return out;
}

}  // namespace

TEST(PartReuse, ManyEpochsBackToBackEveryElementRight) {
  for (uint32_t thr : {1u, 3u, 48u}) {
    Pair pair(48, thr);
    const uint64_t epochs = 600;
    // Every third epoch's checking kernel is still polling when the host goes on.
    const Outcome r = run_epochs(pair, epochs, false, 3, 10.0, 7 + thr);
    ASSERT_FALSE(r.send_timeout || r.recv_timeout) << "threshold " << thr << ": a host wait timed out after epoch "
                                                   << r.epochs_done;
    EXPECT_EQ(r.epochs_done, epochs);
    EXPECT_EQ(pair.stalled.load(), 0u) << "threshold " << thr << ": the check of this epoch never saw its partitions";
    EXPECT_EQ(pair.checked.load(), epochs * 48) << "threshold " << thr;
    EXPECT_EQ(pair.wrong.load(), 0u) << "threshold " << thr;
    EXPECT_EQ(pair.done_stores, epochs) << "threshold " << thr << ": done stored once per epoch";
    EXPECT_EQ(pair.seen.load(), epochs) << "threshold " << thr << ": parrived's cache is not the last start's epoch";
    EXPECT_LE(pair.started_reads.load(), pair.polls.load()) << "threshold " << thr;
    EXPECT_EQ(pair.errors, 0u) << "threshold " << thr << ": a pready was refused";
    EXPECT_EQ(pair.done.load(), epochs);
  }
}

TEST(PartReuse, ACheckStillPollingAtTheNextStartWaitsForTheNextEpoch) {
  // The order that hung the GPU test: the first lagging check (epoch 1) compares its flags
  // with epoch 2, which the sender cannot send until this side is ready for it, which waits
  // for the check. It ends only at its own deadline, having seen nothing.
  Pair pair(48, 1);
  const Outcome r = run_epochs(pair, 4, true, 1, 0.2, 3);
  EXPECT_EQ(pair.stalled.load(), 1u) << "the check of epoch 1 saw its partitions after the start of epoch 2";
  EXPECT_EQ(pair.checked.load() % 48, 0u);
  EXPECT_LT(pair.checked.load(), 4u * 48);
  // Unblocked by the deadline, the hosts still complete every epoch (the data was right).
  EXPECT_FALSE(r.send_timeout || r.recv_timeout);
  EXPECT_EQ(r.epochs_done, 4u);
  EXPECT_EQ(pair.wrong.load(), 0u);
}

TEST(PartReuse, ArrivedInComparesWithTheStartedEpoch) {
  EXPECT_FALSE(arrived_in(5, 0));  // never started
  EXPECT_TRUE(arrived_in(3, 3));
  EXPECT_TRUE(arrived_in(4, 3));   // a flag ahead (the next epoch's sender raced on): arrived
  EXPECT_FALSE(arrived_in(3, 4));  // last epoch's flag after the next start
}
