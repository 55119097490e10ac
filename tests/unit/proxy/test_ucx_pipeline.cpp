// The pipelined network path over real UCX on loopback, between forked rank processes: a
// multi-chunk message staged through a ring of buffers (a host copier stands in for the copy
// engine, completing late) with many chunks on the wire at once, signals after landing,
// every byte checked; and UCX that cannot reach a peer (a device that does not exist, two
// ranks on devices that do not meet) ending in errors that name the UCX variables to fix.
// Skipped where libucp.so.0 (or UCX's headers at build time) is absent.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "net/ucx_transport.hpp"
#include "proxy/proxy.hpp"
#include "proxy/staging_pipeline.hpp"
#include "proxy/ucx_ranks.hpp"
#include "bootstrap/bootstrap.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;
using device::ProxyTrigger;
using ucxtest::exited_ok;
using ucxtest::fork_ranks;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// A copy engine stand-in: a copy completes (memcpy) on the third query of any copy after it
/// started, so several are in flight and they finish while chunks are on the wire.
class LateCopier : public proxy::Copier {
 public:
  uint64_t start(void* dst, const void* src, uint64_t bytes) override {
    copies_.push_back(Copy{static_cast<char*>(dst), src, bytes, 0, false});
    return base_ + copies_.size() - 1;
  }
  bool done(uint64_t token) override {
    for (Copy& c : copies_)
      if (!c.done && ++c.queries >= 3) {
        std::memcpy(c.dst, c.src, c.bytes);
        c.done = true;
      }
    const bool d = copies_.at(token - base_).done;
    while (!copies_.empty() && copies_.front().done && token - base_ > 0) {  // forget old ones
      copies_.pop_front();
      ++base_;
    }
    return d;
  }

 private:
  struct Copy {
    char* dst;
    const void* src;
    uint64_t bytes;
    int queries;
    bool done;
  };
  std::deque<Copy> copies_;
  uint64_t base_ = 0;
};

char byte_at(uint64_t i) { return static_cast<char>((i * 2654435761u) >> 13); }

/// Rank 0 sends kMessages messages of kBytes, each one put with signal of the whole message
/// through a StagedEndpoint (chunks of 256 KiB, 8 buffers) over UCX, then flushes; rank 1
/// waits for the last signal and checks every byte.
int staged_rank(const UniqueId& id, int r) {
  constexpr uint64_t kBytes = (8 << 20) + 123, kMessages = 3;
  auto boot = Bootstrap::join(id, r, 2, 10);
  Bootstrap* b = boot.get();
  auto ucx = std::make_unique<net::UcxTransport>(r, 2, [b](void* d, size_t n) { b->allgather(d, n, 10); }, 10);
  std::vector<char> buf(kBytes * kMessages + 64, r == 0 ? 0 : static_cast<char>(0x5A));
  std::vector<uint64_t> sig(8, 0);
  auto mem = ucx->register_memory(buf.data(), buf.size());
  auto sigs = ucx->register_memory(sig.data(), 64);
  const int peer = 1 - r;
  std::vector<std::vector<char>> storage(8, std::vector<char>(256 << 10));
  std::vector<char*> buffers;
  for (auto& s : storage) buffers.push_back(s.data());
  auto staged = std::make_shared<proxy::StagedEndpoint>(ucx->endpoint(peer), std::make_unique<LateCopier>(),
                                                          buffers, 256 << 10, 10.0, [](const void*) { return true; });
  uint64_t inbound = 0, waited = 0;
  proxy::Proxy px(proxy::ProxyOptions{"proxy of rank " + std::to_string(r), 64, 10, proxy::host_fifo_memory()});
  const uint32_t src = px.add_local_memory(buf.data(), buf.size());
  const uint32_t dst = px.add_remote_memory(staged, mem[static_cast<size_t>(peer)]);
  const uint32_t s = px.add_remote_memory(staged, sigs[static_cast<size_t>(peer)]);
  auto ch = px.make_port_channel(proxy::PortChannelSpec{staged, src, dst, s, 0, &inbound, &waited});
  px.start();
  int status = 0;
  if (r == 0) {
    for (uint64_t i = 0; i < kBytes * kMessages; ++i) buf[i] = byte_at(i);
    for (uint64_t m = 0; m < kMessages; ++m)
      px.fifo().push(ProxyTrigger::make(device::kTriggerPut | device::kTriggerSignal, ch.channel, dst, m * kBytes, src,
                                        m * kBytes, kBytes),
                     10);
    px.fifo().wait_tail(px.fifo().push(ProxyTrigger::make(device::kTriggerFlush, ch.channel, 0, 0, 0, 0, 0), 10), 20);
    const proxy::StagingPipeline& p = staged->pipeline();
    std::printf("rank 0: %llu chunks, at most %llu on the wire at once, %llu posted while the next one's copy ran\n",
                static_cast<unsigned long long>(p.enqueued()), static_cast<unsigned long long>(p.max_on_wire()),
                static_cast<unsigned long long>(p.overlapped_copies()));
    if (p.enqueued() != kMessages * ((kBytes + (256 << 10) - 1) / (256 << 10))) status = 3;
    if (p.max_on_wire() < 2 || p.overlapped_copies() < 1) status = 4;
  } else {
    const auto t0 = Clock::now();
    while (std::atomic_ref<uint64_t>(sig[0]).load(std::memory_order_acquire) < kMessages && since(t0) < 30) {
      px.check();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < kBytes * kMessages; ++i) wrong += buf[i] != byte_at(i);
    for (uint64_t i = kBytes * kMessages; i < buf.size(); ++i) wrong += buf[i] != static_cast<char>(0x5A);
    std::printf("rank 1: %llu signals, %llu bytes wrong\n",
                static_cast<unsigned long long>(std::atomic_ref<uint64_t>(sig[0]).load()),
                static_cast<unsigned long long>(wrong));
    status = std::atomic_ref<uint64_t>(sig[0]).load() == kMessages && wrong == 0 ? 0 : 5;
  }
  boot->barrier(20);
  px.stop();
  boot->barrier(10);
  return status;
}

TEST(UcxPipeline, StagedMultiChunkMessagesWithManyInFlight) {
  SKIP_WITHOUT_UCX();
  UniqueId id = start_bootstrap_root(net::resolve("127.0.0.1", 0), 0, 20);
  auto st = fork_ranks(2, [&](int r) { return staged_rank(id, r); }, 90);
  EXPECT_TRUE(exited_ok(st[0])) << "the sender's pipeline (see its line above)";
  EXPECT_TRUE(exited_ok(st[1])) << "the receiver's check (see its line above)";
}

TEST(UcxErrors, ADeviceThatDoesNotExistIsNamed) {
  SKIP_WITHOUT_UCX();
  auto st = fork_ranks(1, [](int) {
    setenv("UCX_NET_DEVICES", "weft_no_such_dev0", 1);
    try {
      net::UcxTransport t(0, 1, [](void*, size_t) {}, 5);
      std::printf("UCX started with UCX_NET_DEVICES=weft_no_such_dev0\n");
      return 3;
    } catch (const Error& e) {
      std::printf("%s\n", e.what());
      const std::string w = e.what();
      return w.find("UCX_NET_DEVICES='weft_no_such_dev0'") != std::string::npos &&
                     w.find("UCX_TLS='tcp'") != std::string::npos && w.find("rank 0") != std::string::npos
                 ? 0
                 : 4;
    }
  });
  EXPECT_TRUE(exited_ok(st[0])) << "no error naming UCX_NET_DEVICES and UCX_TLS (its line above)";
}

/// An IPv4 interface other than loopback that is up, or "".
std::string other_interface() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string out;
  for (ifaddrs* a = list; a != nullptr && out.empty(); a = a->ifa_next)
    if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET && (a->ifa_flags & IFF_UP) &&
        !(a->ifa_flags & IFF_LOOPBACK))
      out = a->ifa_name;
  freeifaddrs(list);
  return out;
}

TEST(UcxErrors, RanksOnDevicesThatDoNotMeetAreNamed) {
  SKIP_WITHOUT_UCX();
  const std::string other = other_interface();
  if (other.empty()) GTEST_SKIP() << "no network interface besides loopback";
  UniqueId id = start_bootstrap_root(net::resolve("127.0.0.1", 0), 0, 20);
  auto st = fork_ranks(2, [&](int r) {
    // Rank 0 on loopback, rank 1 on the other interface: UCX over TCP cannot connect them.
    setenv("UCX_NET_DEVICES", r == 0 ? "lo" : other.c_str(), 1);
    auto boot = Bootstrap::join(id, r, 2, 10);
    Bootstrap* b = boot.get();
    try {
      net::UcxTransport t(r, 2, [b](void* d, size_t n) { b->allgather(d, n, 10); }, 5);
      std::printf("rank %d: UCX connected lo and %s\n", r, other.c_str());
      return 3;
    } catch (const Error& e) {
      std::printf("rank %d: %s\n", r, e.what());
      const std::string w = e.what();
      return w.find("cannot reach rank " + std::to_string(1 - r)) != std::string::npos &&
                     w.find("UCX_NET_DEVICES=") != std::string::npos
                 ? 0
                 : 4;
    }
  });
  EXPECT_TRUE(exited_ok(st[0])) << "rank 0's error does not name the peer and UCX_NET_DEVICES (its line above)";
  EXPECT_TRUE(exited_ok(st[1])) << "rank 1's error does not name the peer and UCX_NET_DEVICES (its line above)";
}

}  // namespace
}  // namespace weft
