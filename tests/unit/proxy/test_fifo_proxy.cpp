// The port channels' FIFO and proxy on host memory: the trigger layout, ordering of puts
// and signals, flush by counter, back-pressure of a full FIFO, bounded waits that end in
// clear errors, and triggers the proxy must refuse.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "proxy/fifo.hpp"
#include "proxy/proxy.hpp"
#include "util/error.hpp"

namespace weft::proxy {
namespace {

using device::ProxyTrigger;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t load(const uint64_t& v) { return std::atomic_ref<const uint64_t>(v).load(std::memory_order_acquire); }

TEST(ProxyTrigger, PaperLayoutRoundTrips) {
  ProxyTrigger t = ProxyTrigger::make(device::kTriggerPut | device::kTriggerFlush, 1023, 511, 0xfedcba98u, 7,
                                      0x12345678u, 0xffffffffu);
  EXPECT_EQ(t.size(), 0xffffffffu);
  EXPECT_EQ(t.src_offset(), 0x12345678u);
  EXPECT_EQ(t.dst_offset(), 0xfedcba98u);
  EXPECT_EQ(t.src_mem(), 7u);
  EXPECT_EQ(t.dst_mem(), 511u);
  EXPECT_EQ(t.op(), 5u);
  EXPECT_EQ(t.channel(), 1023u);
  EXPECT_TRUE(t.valid());
  // Bit positions as in paper 003: size | src offset ; dst offset | src mem (9) | dst mem (9) | op (3) | channel (10) | reserved
  ProxyTrigger one = ProxyTrigger::make(2, 1, 1, 0, 1, 0, 0);
  EXPECT_EQ(one.fst, 0u);
  EXPECT_EQ(one.snd, (1ull << 32) | (1ull << 41) | (2ull << 50) | (1ull << 53) | (1ull << 63));
}

/// A proxy with one channel from `src` to `dst` over an in-process endpoint; the signal
/// counter is the first 8 bytes of `sig`.
struct Rig {
  std::vector<char> src, dst;
  std::vector<uint64_t> sig = std::vector<uint64_t>(8, 0);
  uint64_t inbound = 0, waited = 0;
  Proxy proxy;
  device::PortChannelDeviceHandle ch;
  uint32_t src_id = 0, dst_id = 0;

  Rig(std::shared_ptr<Endpoint> conn, size_t bytes, uint64_t depth = 16, double timeout_s = 5)
      : src(bytes), dst(bytes), proxy(ProxyOptions{"proxy of GPU 0", depth, timeout_s, host_fifo_memory()}) {
    src_id = proxy.add_local_memory(src.data(), src.size());
    dst_id = proxy.add_remote_memory(conn, RemoteMemory{reinterpret_cast<uint64_t>(dst.data()), dst.size(), nullptr});
    uint32_t sig_id = proxy.add_remote_memory(conn, RemoteMemory{reinterpret_cast<uint64_t>(sig.data()), 64, nullptr});
    ch = proxy.make_port_channel(PortChannelSpec{conn, src_id, dst_id, sig_id, 0, &inbound, &waited});
  }
  uint64_t post(uint32_t op, uint64_t dst_off, uint64_t src_off, uint64_t bytes, double timeout_s = 5) {
    return proxy.fifo().push(ProxyTrigger::make(op, ch.channel, dst_id, dst_off, src_id, src_off, bytes), timeout_s);
  }
};

TEST(Proxy, PutsAndSignalsLandInOrder) {
  constexpr int kN = 2000;
  Rig rig(std::make_shared<HostEndpoint>("rank 1"), kN * 8, 8);
  for (int i = 0; i < kN; ++i) std::memcpy(rig.src.data() + i * 8, &i, sizeof(int));
  rig.proxy.start();
  std::atomic<bool> bad{false};
  std::thread reader([&] {  // each signal count k means entries 0..k-1 are there
    uint64_t seen = 0;
    auto t0 = Clock::now();
    while (seen < kN && seconds_since(t0) < 20) {
      uint64_t k = load(rig.sig[0]);
      for (; seen < k; ++seen) {
        int v = -1;
        std::memcpy(&v, rig.dst.data() + seen * 8, sizeof(int));
        if (v != static_cast<int>(seen)) bad = true;
      }
    }
    if (seen != kN) bad = true;
  });
  for (int i = 0; i < kN; ++i) rig.post(device::kTriggerPut | device::kTriggerSignal, i * 8, i * 8, 8);
  reader.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(load(rig.sig[0]), static_cast<uint64_t>(kN));
  rig.proxy.check();
}

/// Holds puts back until flush: shows that only a flush trigger guarantees completion.
class DeferredEndpoint : public Endpoint {
 public:
  std::string peer() const override { return "rank 1"; }
  void put(const RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override {
    std::lock_guard<std::mutex> l(m_);
    pending_.push_back({reinterpret_cast<char*>(dst.address) + off, std::vector<char>((const char*)src, (const char*)src + bytes)});
  }
  void write_u64(const RemoteMemory& dst, uint64_t off, uint64_t v) override {
    put(dst, off, &v, sizeof v);
  }
  void flush(double) override {
    std::lock_guard<std::mutex> l(m_);
    for (auto& [p, bytes] : pending_) std::memcpy(p, bytes.data(), bytes.size());
    pending_.clear();
    ++flushes;
  }
  std::atomic<int> flushes{0};

 private:
  std::mutex m_;
  std::vector<std::pair<char*, std::vector<char>>> pending_;
};

TEST(Proxy, FlushByCounterCompletesEveryEarlierPut) {
  auto conn = std::make_shared<DeferredEndpoint>();
  Rig rig(conn, 4096);
  std::memset(rig.src.data(), 0x5a, rig.src.size());
  rig.proxy.start();
  uint64_t last = 0;
  for (int i = 0; i < 4; ++i) last = rig.post(device::kTriggerPut, i * 1024, i * 1024, 1024);
  rig.proxy.fifo().wait_tail(last, 5);
  EXPECT_EQ(rig.dst[0], 0) << "a put without flush is issued, not complete";
  uint64_t f = rig.post(device::kTriggerFlush, 0, 0, 0);
  rig.proxy.fifo().wait_tail(f, 5);  // the counter passing the flush trigger: all landed
  EXPECT_EQ(conn->flushes.load(), 1);
  for (char c : rig.dst) ASSERT_EQ(c, 0x5a);
  // put_with_signal_and_flush: data and signal both there once the counter passes it
  std::memset(rig.src.data(), 0x11, 64);
  uint64_t g = rig.post(device::kTriggerPut | device::kTriggerSignal | device::kTriggerFlush, 0, 0, 64);
  rig.proxy.fifo().wait_tail(g, 5);
  EXPECT_EQ(rig.dst[63], 0x11);
  EXPECT_EQ(load(rig.sig[0]), 1u);
}

TEST(Proxy, FullFifoHoldsProducersBack) {
  Rig rig(std::make_shared<HostEndpoint>("rank 1"), 1024, 4);
  for (int i = 0; i < 4; ++i) rig.post(device::kTriggerSignal, 0, 0, 0);  // fills the FIFO; no proxy yet
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 6; ++i) {
      rig.post(device::kTriggerSignal, 0, 0, 0, 10);
      ++pushed;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(pushed.load(), 0) << "a push into a full FIFO must wait";
  rig.proxy.start();
  producer.join();
  rig.proxy.fifo().wait_tail(9, 5);
  EXPECT_EQ(load(rig.sig[0]), 10u);
}

TEST(Proxy, FullFifoWaitIsBoundedAndSaysSo) {
  Rig rig(std::make_shared<HostEndpoint>("rank 1"), 1024, 2);
  rig.post(device::kTriggerSignal, 0, 0, 0);
  rig.post(device::kTriggerSignal, 0, 0, 0);
  auto t0 = Clock::now();
  try {
    rig.post(device::kTriggerSignal, 0, 0, 0, 0.3);
    FAIL() << "push into a full FIFO with no proxy returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("FIFO of 2 slots full"), std::string::npos) << e.what();
  }
  double s = seconds_since(t0);
  EXPECT_GE(s, 0.25);
  EXPECT_LT(s, 3.0);
}

/// An endpoint whose flush never completes: it waits out its deadline, as a transport does.
class StuckEndpoint : public HostEndpoint {
 public:
  StuckEndpoint() : HostEndpoint("rank 3") {}
  void flush(double timeout_s) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s));
    fail(ErrorCode::Timeout, "flush to rank 3 did not complete within " + std::to_string(timeout_s) + " s");
  }
};

TEST(Proxy, StuckFlushEndsInAnErrorOnBothSides) {
  Rig rig(std::make_shared<StuckEndpoint>(), 1024, 8, /*timeout_s=*/0.3);
  rig.proxy.start();
  uint64_t f = rig.post(device::kTriggerPut | device::kTriggerFlush, 0, 0, 128);
  auto t0 = Clock::now();
  try {
    rig.proxy.fifo().wait_tail(f, 10, rig.proxy.name());
    FAIL() << "flush through a stuck endpoint returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Remote);
    EXPECT_NE(std::string(e.what()).find("proxy of GPU 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 3.0);
  ASSERT_TRUE(rig.proxy.error().has_value());
  EXPECT_NE(rig.proxy.error()->find("rank 3"), std::string::npos) << *rig.proxy.error();
  EXPECT_TRUE(rig.proxy.fifo().error());
  try {
    rig.proxy.check();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
  }
}

TEST(Proxy, WaitOnAStoppedProxyTimesOut) {
  Rig rig(std::make_shared<HostEndpoint>("rank 1"), 1024);
  uint64_t f = rig.post(device::kTriggerFlush, 0, 0, 0);
  auto t0 = Clock::now();
  try {
    rig.proxy.fifo().wait_tail(f, 0.2, rig.proxy.name());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("did not reach trigger 0"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 2.0);
}

struct BadTrigger {
  const char* what;
  uint32_t op, channel, dst_mem;
  uint64_t dst_off;
  uint32_t src_mem;
  uint64_t src_off, size;
  const char* expect;
};

TEST(Proxy, RefusesTriggersOutsideItsTables) {
  const BadTrigger cases[] = {
      {"no op", 0, 0, 1, 0, 0, 0, 8, "no operation bits"},
      {"channel", 1, 5, 1, 0, 0, 0, 8, "channel 5 does not exist"},
      {"src mem is remote", 1, 0, 1, 0, 1, 0, 8, "source memory 1 is not a local memory"},
      {"dst mem unknown", 1, 0, 300, 0, 0, 0, 8, "destination memory 300"},
      {"dst mem is local", 1, 0, 0, 0, 0, 0, 8, "destination memory 0"},
      {"dst overflow", 1, 0, 1, 1000, 0, 0, 100, "destination offset 1000 + 100 bytes exceeds memory 1 (1024 bytes)"},
      {"src overflow", 1, 0, 1, 0, 0, 0xffffff00u, 0x200, "source offset"},
  };
  for (const BadTrigger& c : cases) {
    SCOPED_TRACE(c.what);
    Rig rig(std::make_shared<HostEndpoint>("rank 1"), 1024);
    std::memset(rig.src.data(), 7, rig.src.size());
    rig.proxy.start();
    uint64_t i = rig.proxy.fifo().push(ProxyTrigger::make(c.op, c.channel, c.dst_mem, c.dst_off, c.src_mem, c.src_off, c.size), 5);
    EXPECT_THROW(rig.proxy.fifo().wait_tail(i, 5), Error);
    ASSERT_TRUE(rig.proxy.error().has_value());
    EXPECT_NE(rig.proxy.error()->find(c.expect), std::string::npos) << *rig.proxy.error();
    for (char b : rig.dst) ASSERT_EQ(b, 0) << "a refused trigger wrote memory";
  }
}

TEST(Proxy, RefusesOversizedAndMisplacedRegistrations) {
  Proxy p(ProxyOptions{"proxy", 4, 1, host_fifo_memory()});
  char buf[64];
  EXPECT_THROW(p.add_local_memory(buf, 0), Error);
  EXPECT_THROW(p.add_local_memory(buf, 1ull << 32), Error);
  auto conn = std::make_shared<HostEndpoint>("rank 1");
  EXPECT_THROW(p.add_remote_memory(conn, RemoteMemory{~0ull - 4, 64, nullptr}), Error);
  uint32_t l = p.add_local_memory(buf, sizeof buf);
  uint32_t r = p.add_remote_memory(conn, RemoteMemory{reinterpret_cast<uint64_t>(buf), 64, nullptr});
  uint64_t in = 0, w = 0;
  EXPECT_THROW(p.make_port_channel(PortChannelSpec{conn, r, r, r, 0, &in, &w}), Error);   // src remote
  EXPECT_THROW(p.make_port_channel(PortChannelSpec{conn, l, l, r, 0, &in, &w}), Error);   // dst local
  EXPECT_THROW(p.make_port_channel(PortChannelSpec{conn, l, r, r, 60, &in, &w}), Error);  // signal outside
  EXPECT_NO_THROW(p.make_port_channel(PortChannelSpec{conn, l, r, r, 56, &in, &w}));
  p.start();
  EXPECT_THROW(p.add_local_memory(buf, 8), Error);  // tables are fixed while it runs
  p.stop();
}

TEST(Fifo, RefusesBadDepthAndDevicePush) {
  EXPECT_THROW(Fifo(0), Error);
  EXPECT_THROW(Fifo(65537), Error);
  FifoMemory m = host_fifo_memory();
  m.head_on_host = false;
  Fifo f(4, m);
  EXPECT_THROW(f.push(ProxyTrigger::make(2, 0, 0, 0, 0, 0, 0), 1), Error);
}

}  // namespace
}  // namespace weft::proxy
