// The staged network path without a GPU or a network: the staging pipeline's ordering under
// copies and network completions that finish out of order (fakes of both), the proxy's
// signals held until their channel's puts have landed (acks not held behind data), the
// proxy thread's CPU placement and the env-gated trace.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "proxy/affinity.hpp"
#include "proxy/proxy.hpp"
#include "proxy/staging_pipeline.hpp"
#include "proxy/trace.hpp"
#include "util/error.hpp"

namespace weft::proxy {
namespace {

using device::ProxyTrigger;
using Clock = std::chrono::steady_clock;

/// A network that lands puts late and out of order: a put copies nothing until it lands,
/// and it reads its source only then, so a buffer reused before its put landed shows as
/// wrong data. Tickets are "every put issued before mark()"; landed(t) once all of them
/// have. Each progress() or landed() lands a random few.
class FakeNet : public Endpoint {
 public:
  struct Put {
    char* dst;
    const void* src;
    uint64_t bytes, dst_offset;
    bool landed = false;
  };
  explicit FakeNet(uint32_t seed, bool after_landing = true) : rng_(seed), after_landing_(after_landing) {}
  std::string peer() const override { return "rank 7"; }
  void put(const RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override {
    puts_.push_back(Put{reinterpret_cast<char*>(dst.address) + off, src, bytes, off});
  }
  void write_u64(const RemoteMemory& dst, uint64_t off, uint64_t v) override { write(dst, off, v, false); }
  void write_u64_landed(const RemoteMemory& dst, uint64_t off, uint64_t v) override { write(dst, off, v, true); }
  void flush(double) override {
    for (size_t i = 0; i < puts_.size(); ++i) land(i);
  }
  uint64_t mark(double) override { return puts_.size(); }
  bool landed(uint64_t ticket) override {
    land_some();
    for (uint64_t i = 0; i < ticket; ++i)
      if (!puts_[i].landed) return false;
    return true;
  }
  void progress() override { land_some(); }
  bool signals_after_landing() const override { return after_landing_; }
  bool idle() const override { return landed_ == puts_.size(); }

  /// Called with (address, value, landed variant) as each signal is written.
  std::function<void(uint64_t*, uint64_t, bool)> on_signal;
  std::vector<Put> puts_;
  size_t landed_ = 0;
  size_t out_of_order = 0;  ///< puts that landed while an earlier one had not
  std::atomic<bool> hold{false};  ///< nothing lands while set (but flush)

 private:
  void write(const RemoteMemory& dst, uint64_t off, uint64_t v, bool landed_variant) {
    auto* p = reinterpret_cast<uint64_t*>(dst.address + off);
    if (on_signal) on_signal(p, v, landed_variant);
    std::atomic_ref<uint64_t>(*p).store(v, std::memory_order_release);
  }
  void land(size_t i) {
    Put& p = puts_[i];
    if (p.landed) return;
    std::memcpy(p.dst, p.src, p.bytes);
    p.landed = true;
    ++landed_;
    for (size_t j = 0; j < i; ++j)
      if (!puts_[j].landed) {
        ++out_of_order;
        break;
      }
  }
  void land_some() {
    if (puts_.empty() || hold.load(std::memory_order_acquire)) return;
    std::uniform_int_distribution<size_t> pick(0, puts_.size() - 1);
    for (int n = 0; n < 3; ++n)
      if (rng_() % 3 == 0) land(pick(rng_));
  }
  std::mt19937 rng_;
  bool after_landing_;
};

/// Copies that complete late and out of order; a copy reads its source when it completes.
class FakeCopier : public Copier {
 public:
  explicit FakeCopier(uint32_t seed) : rng_(seed) {}
  uint64_t start(void* dst, const void* src, uint64_t bytes) override {
    copies_.push_back(Copy{static_cast<char*>(dst), src, bytes, false});
    return copies_.size() - 1;
  }
  bool done(uint64_t token) override {
    std::uniform_int_distribution<size_t> pick(0, copies_.size() - 1);
    for (int n = 0; n < 2; ++n)
      if (rng_() % 2 == 0) complete(pick(rng_));
    return copies_[token].done;
  }
  size_t out_of_order = 0;
  size_t completed = 0;

 private:
  struct Copy {
    char* dst;
    const void* src;
    uint64_t bytes;
    bool done;
  };
  void complete(size_t i) {
    Copy& c = copies_[i];
    if (c.done) return;
    std::memcpy(c.dst, c.src, c.bytes);
    c.done = true;
    ++completed;
    for (size_t j = 0; j < i; ++j)
      if (!copies_[j].done) {
        ++out_of_order;
        break;
      }
  }
  std::vector<Copy> copies_;
  std::mt19937 rng_;
};

struct Buffers {
  std::vector<std::vector<char>> storage;
  std::vector<char*> ptrs;
  Buffers(int n, uint64_t bytes) {
    for (int i = 0; i < n; ++i) {
      storage.emplace_back(bytes, 0);
      ptrs.push_back(storage.back().data());
    }
  }
};

TEST(StagingPipeline, ChunksLeaveAndReturnInOrderUnderReorderedCompletions) {
  constexpr uint64_t kChunk = 64 << 10;
  const std::vector<uint64_t> sizes = {(1 << 20) + 5, 300 << 10, (64 << 10) - 1, 200 << 10};
  const std::vector<bool> direct = {false, false, false, true};  // the last: host memory, no copy
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  std::vector<char> src(total), dst(total + 64, static_cast<char>(0xEE));
  std::mt19937 rng(7);
  for (char& c : src) c = static_cast<char>(rng());

  FakeNet net(11);
  FakeCopier copier(13);
  Buffers bufs(4, kChunk);
  StagingPipeline pipe(net, copier, bufs.ptrs, kChunk, 5, "rank 7");
  Trace trace("", "test", 1 << 20);
  pipe.set_trace(&trace);
  const RemoteMemory remote{reinterpret_cast<uint64_t>(dst.data()), dst.size(), nullptr};

  uint64_t off = 0, first_ticket = 0, max_on_wire = 0;
  for (size_t m = 0; m < sizes.size(); ++m) {
    pipe.put(remote, off, src.data() + off, sizes[m], direct[m]);
    if (m == 0) first_ticket = pipe.mark();
    max_on_wire = std::max(max_on_wire, pipe.posted() - pipe.released());
    off += sizes[m];
  }
  EXPECT_FALSE(pipe.landed(pipe.mark()) && net.landed_ < net.puts_.size()) << "landed before its puts did";
  const auto t0 = Clock::now();
  while (!pipe.empty() && std::chrono::duration<double>(Clock::now() - t0).count() < 10) {
    pipe.progress();
    max_on_wire = std::max(max_on_wire, pipe.posted() - pipe.released());
  }
  ASSERT_TRUE(pipe.empty()) << "the pipeline did not drain";
  EXPECT_TRUE(pipe.landed(first_ticket));
  EXPECT_EQ(pipe.released(), pipe.enqueued());
  EXPECT_EQ(pipe.free_buffers(), 4u);

  // Every byte arrived, nothing outside was written.
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), total), 0) << "a chunk arrived wrong: a buffer reused before it landed?";
  for (uint64_t i = total; i < dst.size(); ++i) ASSERT_EQ(dst[i], static_cast<char>(0xEE));
  // Posted to the network strictly in order (chunk offsets ascending, no gap).
  uint64_t expect = 0;
  for (const FakeNet::Put& p : net.puts_) {
    ASSERT_EQ(p.dst_offset, expect) << "a chunk was posted out of order";
    expect += p.bytes;
  }
  EXPECT_EQ(expect, total);
  // Released in order, every one, while the fakes completed out of order.
  uint64_t next_put = 0, next_release = 0;
  for (const Trace::Record& r : trace.records()) {
    if (r.event == TraceEvent::StagePut) ASSERT_EQ(r.a, next_put++);
    if (r.event == TraceEvent::StageReleased) ASSERT_EQ(r.a, next_release++);
  }
  EXPECT_EQ(next_put, pipe.enqueued());
  EXPECT_EQ(next_release, pipe.enqueued() - 1);  // the direct chunk has no buffer to release
  EXPECT_GT(copier.out_of_order, 0u) << "the fake copier never completed out of order: the test proves nothing";
  EXPECT_GT(net.out_of_order, 0u) << "the fake network never landed out of order: the test proves nothing";
  EXPECT_GT(max_on_wire, 1u) << "never more than one chunk on the wire";
}

TEST(StagingPipeline, AStalledNetworkEndsInATimeoutNamingThePeer) {
  class Stuck : public FakeNet {
   public:
    Stuck() : FakeNet(1) {}
    bool landed(uint64_t) override { return false; }
    void progress() override {}
  } net;
  FakeCopier copier(3);
  Buffers bufs(2, 4096);
  StagingPipeline pipe(net, copier, bufs.ptrs, 4096, 0.3, "rank 7");
  std::vector<char> src(5 * 4096), dst(5 * 4096);
  const RemoteMemory remote{reinterpret_cast<uint64_t>(dst.data()), dst.size(), nullptr};
  const auto t0 = Clock::now();
  try {
    pipe.put(remote, 0, src.data(), src.size(), false);
    FAIL() << "five chunks through two buffers that never come back did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("rank 7"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0);
}

/// A proxy over FakeNet with two channels on one connection: data (puts with signals) and
/// acks (signals only), as a NetFifos connection has.
TEST(Proxy, SignalsWaitForTheirPutsButAcksDoNot) {
  constexpr int kN = 300;
  constexpr uint64_t kMsg = 1024;
  auto net = std::make_shared<FakeNet>(5);
  std::vector<char> src(kN * kMsg), dst(kN * kMsg, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13 + 1);
  std::vector<uint64_t> sig(16, 0);
  uint64_t inbound = 0, waited = 0;
  Proxy proxy(ProxyOptions{"proxy of rank 0", 64, 5, host_fifo_memory()});
  const uint32_t s = proxy.add_local_memory(src.data(), src.size());
  const uint32_t d = proxy.add_remote_memory(net, RemoteMemory{reinterpret_cast<uint64_t>(dst.data()), dst.size(), nullptr});
  const uint32_t g = proxy.add_remote_memory(net, RemoteMemory{reinterpret_cast<uint64_t>(sig.data()), 128, nullptr});
  auto data = proxy.make_port_channel(PortChannelSpec{net, s, d, g, 0, &inbound, &waited});
  auto acks = proxy.make_port_channel(PortChannelSpec{net, s, d, g, 64, &inbound, &waited});
  std::atomic<int> early{0}, landed_writes{0};
  net->on_signal = [&](uint64_t* where, uint64_t v, bool landed_variant) {  // on the proxy thread
    if (landed_variant) ++landed_writes;
    if (where == &sig[0])
      for (uint64_t m = 0; m < v; ++m)
        if (std::memcmp(dst.data() + m * kMsg, src.data() + m * kMsg, kMsg) != 0) ++early;
  };
  // Phase 1: nothing lands. Every trigger is taken, the acks leave, the data signals wait.
  net->hold = true;
  proxy.start();
  uint64_t last = 0;
  for (int m = 0; m < kN; ++m) {
    last = proxy.fifo().push(ProxyTrigger::make(device::kTriggerPut | device::kTriggerSignal, data.channel, d, m * kMsg,
                                                s, m * kMsg, kMsg),
                             5);
    if (m % 3 == 0) last = proxy.fifo().push(ProxyTrigger::make(device::kTriggerSignal, acks.channel, 0, 0, 0, 0, 0), 5);
  }
  proxy.fifo().wait_tail(last, 10, proxy.name());
  EXPECT_EQ(std::atomic_ref<uint64_t>(sig[8]).load(), static_cast<uint64_t>((kN + 2) / 3))
      << "acks were held behind the data's puts";
  EXPECT_EQ(std::atomic_ref<uint64_t>(sig[0]).load(), 0u) << "a data signal left before any put landed";
  EXPECT_EQ(proxy.held_signals(), static_cast<uint64_t>(kN)) << "every data signal should be held";
  // Phase 2: puts land, out of order; a flush returns once every held signal has left.
  net->hold = false;
  const uint64_t f = proxy.fifo().push(ProxyTrigger::make(device::kTriggerFlush, data.channel, 0, 0, 0, 0, 0), 5);
  proxy.fifo().wait_tail(f, 10, proxy.name());
  EXPECT_EQ(proxy.held_signals(), 0u) << "a flush returned with signals still held";
  proxy.stop();
  proxy.check();
  EXPECT_EQ(early.load(), 0) << "a data signal was written before its puts landed";
  EXPECT_EQ(std::atomic_ref<uint64_t>(sig[0]).load(), static_cast<uint64_t>(kN));
  EXPECT_EQ(std::atomic_ref<uint64_t>(sig[8]).load(), static_cast<uint64_t>((kN + 2) / 3));
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), src.size()), 0);
  EXPECT_GT(landed_writes.load(), 0);
}

TEST(ProxyPlacement, CpuListsParseAndFormat) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n", "x"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5", "x"), (std::vector<int>{5}));
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  for (const char* bad : {"3-1", "a", "1,", "1-", "-1", "70000"}) {
    try {
      parse_cpu_list(bad, "WEFT_PROXY_CPUS");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("WEFT_PROXY_CPUS"), std::string::npos) << e.what();
    }
  }
}

TEST(ProxyPlacement, CpusNearAGpuComeFromSysfs) {
  char tmpl[] = "/tmp/weft-sysfs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  const std::string dev = root + "/bus/pci/devices/0000:18:00.0";
  ASSERT_EQ(system(("mkdir -p " + dev).c_str()), 0);
  std::ofstream(dev + "/local_cpulist") << "0-3,16\n";
  // CUDA's bus id has 8 domain digits and capitals.
  EXPECT_EQ(cpus_near_pci("00000000:18:00.0", root), (std::vector<int>{0, 1, 2, 3, 16}));
  EXPECT_EQ(cpus_near_pci("0000:18:00.0", root), (std::vector<int>{0, 1, 2, 3, 16}));
  EXPECT_TRUE(cpus_near_pci("0000:19:00.0", root).empty());
  EXPECT_TRUE(cpus_near_pci("", root).empty());
  ASSERT_EQ(system(("rm -rf " + root).c_str()), 0);

  std::string why;
  setenv("WEFT_PROXY_CPUS", "none", 1);
  EXPECT_TRUE(proxy_cpus("0000:18:00.0", &why).empty());
  EXPECT_NE(why.find("none"), std::string::npos);
  setenv("WEFT_PROXY_CPUS", "0", 1);
  EXPECT_EQ(proxy_cpus("", &why), (std::vector<int>{0}));
  unsetenv("WEFT_PROXY_CPUS");
  EXPECT_TRUE(proxy_cpus("", &why).empty());
  EXPECT_NE(why.find("no GPU"), std::string::npos) << why;
}

TEST(ProxyTrace, RecordsEveryStepWhenAskedAndNothingElse) {
  char tmpl[] = "/tmp/weft-trace-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string prefix = std::string(tmpl) + "/t";
  unsetenv("WEFT_NET_TRACE");
  EXPECT_EQ(Trace::from_environment("x"), nullptr) << "a recorder without WEFT_NET_TRACE";
  setenv("WEFT_NET_TRACE", prefix.c_str(), 1);
  std::string path;
  {
    auto conn = std::make_shared<HostEndpoint>("rank 1");
    std::vector<char> src(4096, 1), dst(4096, 0);
    std::vector<uint64_t> sig(8, 0);
    uint64_t inbound = 0, waited = 0;
    Proxy proxy(ProxyOptions{"proxy of rank 0", 16, 5, host_fifo_memory()});
    ASSERT_NE(proxy.trace(), nullptr);
    path = proxy.trace()->path();
    const uint32_t s = proxy.add_local_memory(src.data(), src.size());
    const uint32_t d = proxy.add_remote_memory(conn, RemoteMemory{reinterpret_cast<uint64_t>(dst.data()), dst.size(), nullptr});
    const uint32_t g = proxy.add_remote_memory(conn, RemoteMemory{reinterpret_cast<uint64_t>(sig.data()), 64, nullptr});
    auto ch = proxy.make_port_channel(PortChannelSpec{conn, s, d, g, 0, &inbound, &waited});
    proxy.start();
    for (int i = 0; i < 10; ++i)
      proxy.fifo().push(ProxyTrigger::make(device::kTriggerPut | device::kTriggerSignal, ch.channel, d, 0, s, 0, 256), 5);
    proxy.fifo().wait_tail(proxy.fifo().push(ProxyTrigger::make(device::kTriggerFlush, ch.channel, 0, 0, 0, 0, 0), 5), 5);
  }
  unsetenv("WEFT_NET_TRACE");
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << "no trace file " << path;
  int takes = 0, puts = 0, signals = 0, flushes = 0;
  for (std::string line; std::getline(f, line);) {
    takes += line.find("\ttake\t") != std::string::npos;
    puts += line.find("\tput\t") != std::string::npos;
    signals += line.find("\tsignal_now\t") != std::string::npos;
    flushes += line.find("\tflush_end\t") != std::string::npos;
  }
  EXPECT_EQ(takes, 11);
  EXPECT_EQ(puts, 10);
  EXPECT_EQ(signals, 10);
  EXPECT_EQ(flushes, 1);
  ASSERT_EQ(system(("rm -rf " + std::string(tmpl)).c_str()), 0);
}

}  // namespace
}  // namespace weft::proxy
