// The network path's rate on the host, no GPU (issue 29): two rank processes on this host
// (loopback) move host memory through weft's UCX transport, and the table says how many
// GB/s each direction carried, per message size and messages in flight.
//
//   net_bench transport [--sizes 64K,512K,2M] [--inflight 1,4,16,64] [--mib 256] [--bidir]
//       UcxTransport::put of one message after another, at most `inflight` not yet landed
//       (mark/landed tickets, as the proxy's held signals use them), then a flush: what one
//       endpoint carries. --bidir: both ranks send at once (an AllReduce's traffic).
//   net_bench fifos [--sizes 512K] [--inflight 4] [--conns 1,8,32] [--mib 256]
//       The communicator's network FIFOs (net/net_fifos.hpp) with host threads in the kernels'
//       place: each rank sends full slots on every connection to the other and acks what it
//       receives, through its proxy (triggers, puts, held signals, acks): the collectives' path
//       without the GPU. `inflight` is the FIFO depth.
//
// UCX_TLS defaults to tcp here (the emulated nodes' path); UCX_* variables pass through, so
// `UCX_TCP_TX_SEG_SIZE=512k net_bench transport` compares UCX's settings. Prints a table and
// asserts nothing (the tests check the data: tests/unit/proxy/test_ucx_transport.cpp).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/socket.hpp"
#include "net/net_fifos.hpp"
#include "net/node_layout.hpp"
#include "net/ucx_transport.hpp"
#include "proxy/endpoint.hpp"
#include "proxy/proxy.hpp"
#include "util/config.hpp"
#include "util/error.hpp"

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string mode = "transport";
  std::vector<uint64_t> sizes{64 << 10, 512 << 10, 2 << 20};
  std::vector<uint64_t> inflight{1, 4, 16, 64};
  std::vector<uint64_t> conns{1, 8, 32};
  uint64_t mib = 256;
  bool bidir = false;
};

uint64_t parse_size(const std::string& s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) weft::fail(weft::ErrorCode::InvalidArgument, "net_bench: '" + s + "' is not a size");
  switch (*end) {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    case '\0': return v;
    default: weft::fail(weft::ErrorCode::InvalidArgument, "net_bench: '" + s + "' is not a size (N, NK, NM, NG)");
  }
}

std::vector<uint64_t> parse_list(const std::string& s) {
  std::vector<uint64_t> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(parse_size(item));
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  int i = 1;
  if (i < argc && argv[i][0] != '-') o.mode = argv[i++];
  if (o.mode == "fifos") o.sizes = {512 << 10}, o.inflight = {4};
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) weft::fail(weft::ErrorCode::InvalidArgument, "net_bench: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") o.sizes = parse_list(next());
    else if (a == "--inflight") o.inflight = parse_list(next());
    else if (a == "--conns") o.conns = parse_list(next());
    else if (a == "--mib") o.mib = parse_size(next());
    else if (a == "--bidir") o.bidir = true;
    else weft::fail(weft::ErrorCode::InvalidArgument, "net_bench: unknown argument '" + a + "'");
  }
  if (o.mode != "transport" && o.mode != "fifos")
    weft::fail(weft::ErrorCode::InvalidArgument, "net_bench: mode '" + o.mode + "': expected transport or fifos");
  return o;
}

std::string size_name(uint64_t b) {
  if (b >= (1 << 20) && b % (1 << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1 << 10) && b % (1 << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

/// Spins on `done`, driving `ep`, at most `max_s`.
template <typename F>
void spin(weft::proxy::Endpoint& ep, F done, double max_s, const char* what) {
  const auto t0 = Clock::now();
  while (!done()) {
    ep.progress();
    if (since(t0) > max_s) weft::fail(weft::ErrorCode::Timeout, std::string("net_bench: ") + what + " after " + std::to_string(max_s) + " s");
  }
}

/// One rank of `transport`: returns the seconds per (size, inflight) row as rank 0 measured.
int run_transport(weft::Bootstrap& boot, const Options& o) {
  const int rank = boot.rank(), peer = 1 - rank;
  weft::Bootstrap* b = &boot;
  weft::net::UcxTransport ucx(rank, 2, [b](void* d, size_t n) { b->allgather(d, n, 30); }, 30);
  const uint64_t max_s = *std::max_element(o.sizes.begin(), o.sizes.end());
  const uint64_t max_d = *std::max_element(o.inflight.begin(), o.inflight.end());
  std::vector<char> src(max_s * max_d, static_cast<char>(rank + 1)), dst(max_s * max_d, 0);
  std::vector<uint64_t> flags(8, 0);
  const auto dmem = ucx.register_memory(dst.data(), dst.size());
  ucx.register_memory(src.data(), src.size());
  const auto fmem = ucx.register_memory(flags.data(), flags.size() * 8);
  std::shared_ptr<weft::proxy::Endpoint> ep = ucx.endpoint(peer);
  const bool sends = rank == 0 || o.bidir;
  uint64_t row = 0;
  for (uint64_t s : o.sizes)
    for (uint64_t d : o.inflight) {
      ++row;
      const uint64_t n = std::max<uint64_t>(1, (o.mib << 20) / s);
      boot.barrier(30);
      const auto t0 = Clock::now();
      if (sends) {
        std::vector<uint64_t> ticket(d, 0);
        for (uint64_t i = 0; i < n; ++i) {
          const uint64_t slot = i % d;
          if (i >= d) spin(*ep, [&] { return ep->landed(ticket[slot]); }, 60, "a put did not land");
          ep->put(dmem[static_cast<size_t>(peer)], slot * s, src.data() + slot * s, s);
          ticket[slot] = ep->mark(60);
        }
        ep->flush(60);
        ep->write_u64_landed(fmem[static_cast<size_t>(peer)], 0, row);
        ep->flush(60);
      }
      const double sec = since(t0);
      auto flag = [&](int i) { return std::atomic_ref<uint64_t>(flags[static_cast<size_t>(i)]).load(std::memory_order_acquire); };
      // Wait for the peer's last message (bidir), then leave together, progressing until both
      // know the other is done: UCX's puts over TCP are active messages that the target's
      // progress completes, so neither may stop progressing while the other flushes.
      if (rank == 1 || o.bidir) spin(*ep, [&] { return flag(0) >= row; }, 60, "the peer's last message did not come");
      ep->write_u64_landed(fmem[static_cast<size_t>(peer)], 8, row);
      const uint64_t mine = ep->mark(60);
      spin(*ep, [&] { return flag(1) >= row && ep->landed(mine); }, 60, "the peer did not finish");
      for (const auto t1 = Clock::now(); since(t1) < 0.05;) ep->progress();
      const double rate = static_cast<double>(n * s) / sec / 1e9;
      boot.barrier(30);
      if (rank == 0)
        std::printf("| transport%s | %s | %llu | %llu | %.3f | %.2f |\n", o.bidir ? " bidir" : "", size_name(s).c_str(),
                    static_cast<unsigned long long>(d), static_cast<unsigned long long>(n), sec, rate);
      std::fflush(stdout);
    }
  boot.barrier(30);
  return 0;
}

/// One rank of `fifos`: the host "kernel" sends `messages` full slots on each connection and
/// receives as many, acking each; returns the seconds it took.
double fifo_exchange(weft::NetFifos& f, int peer, uint64_t messages, std::atomic<bool>& failed) {
  const weft::NetLayout& l = f.layout();
  struct End {
    weft::device::MemoryChannelDeviceHandle h;
    uint64_t pos = 0;
  };
  std::vector<std::unique_ptr<End>> sends, recvs;
  for (int k = 0; k < l.connections; ++k) {
    sends.push_back(std::make_unique<End>());
    sends.back()->h = f.send_end(peer, k, &sends.back()->pos).device_handle();
    recvs.push_back(std::make_unique<End>());
    recvs.back()->h = f.recv_end(peer, k, &recvs.back()->pos).device_handle();
  }
  auto load = [](const uint64_t* p) {
    return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(p)).load(std::memory_order_acquire);
  };
  using weft::device::ProxyTrigger;
  const auto t0 = Clock::now();
  for (bool more = true; more;) {
    more = false;
    if (failed.load()) weft::fail(weft::ErrorCode::Remote, "net_bench: the proxy failed");
    if (since(t0) > 120) weft::fail(weft::ErrorCode::Timeout, "net_bench: the exchange took over 120 s");
    for (auto& e : sends) {
      if (e->pos >= messages) continue;
      more = true;
      if (load(e->h.semaphore.inbound) + e->h.depth < e->pos + 1) continue;  // no credit yet
      const uint64_t off = (e->pos % e->h.depth) * e->h.slot_bytes;
      const weft::device::NetFifoDeviceHandle& net = *e->h.net;
      f.proxy().fifo().push(ProxyTrigger::make(weft::device::kTriggerPut | weft::device::kTriggerSignal, net.port.channel,
                                               net.port.dst_mem, net.dst_base + off, net.port.src_mem, net.src_base + off,
                                               e->h.slot_bytes),
                            30);
      ++e->pos;
    }
    for (auto& e : recvs) {
      if (e->pos >= messages) continue;
      more = true;
      if (load(e->h.semaphore.inbound) < e->pos + 1) continue;  // not landed yet
      f.proxy().fifo().push(ProxyTrigger::make(weft::device::kTriggerSignal, e->h.net->port.channel, 0, 0, 0, 0, 0), 30);
      ++e->pos;
    }
    if (more) std::this_thread::yield();
  }
  return since(t0);
}

int run_fifos(const weft::UniqueId& id, int rank, const Options& o) {
  for (uint64_t s : o.sizes)
    for (uint64_t d : o.inflight)
      for (uint64_t k : o.conns) {
        auto boot = weft::Bootstrap::join(id, rank, 2, 30);
        weft::NetLayout l;
        l.connections = static_cast<int32_t>(k);
        l.depth = static_cast<uint32_t>(d);
        l.slot_bytes = static_cast<uint32_t>(s);
        l.node_of_rank = {0, 1};
        weft::NetFifoMemory m = weft::host_net_fifo_memory();
        std::atomic<bool> failed{false};
        weft::NetFifos f(*boot, m, l, 30, [&](const std::string& why) {
          std::printf("rank %d: proxy failed: %s\n", rank, why.c_str());
          failed = true;
        });
        const uint64_t messages = std::max<uint64_t>(1, (o.mib << 20) / (s * k));
        boot->barrier(30);
        const double sec = fifo_exchange(f, 1 - rank, messages, failed);
        boot->barrier(30);
        f.drain(10);
        boot->barrier(30);
        f.close();
        if (rank == 0)
          std::printf("| fifos bidir | %s | depth %llu, %llu conns | %llu | %.3f | %.2f |\n", size_name(s).c_str(),
                      static_cast<unsigned long long>(d), static_cast<unsigned long long>(k),
                      static_cast<unsigned long long>(messages * k), sec,
                      static_cast<double>(messages * k * s) / sec / 1e9);
        std::fflush(stdout);
      }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  setenv("UCX_TLS", std::getenv("UCX_TLS") != nullptr ? std::getenv("UCX_TLS") : "tcp", 1);
  std::printf("# net_bench %s: 2 rank processes on loopback, UCX_TLS=%s%s%s\n", o.mode.c_str(), std::getenv("UCX_TLS"),
              std::getenv("UCX_TCP_TX_SEG_SIZE") ? ", UCX_TCP_TX_SEG_SIZE=" : "",
              std::getenv("UCX_TCP_TX_SEG_SIZE") ? std::getenv("UCX_TCP_TX_SEG_SIZE") : "");
  // The data path as configured (not ucx_describe(): no UCX context before the fork).
  std::printf("# WEFT_NET_PROTO=%s WEFT_NET_LANES=%lld WEFT_NET_LANE_SPLIT=%d WEFT_NET_STRIPE_BYTES=%lld\n",
              weft::config::get_string("WEFT_NET_PROTO").c_str(), static_cast<long long>(weft::config::get_int("WEFT_NET_LANES")),
              weft::config::get_bool("WEFT_NET_LANE_SPLIT") ? 1 : 0,
              static_cast<long long>(weft::config::get_int("WEFT_NET_STRIPE_BYTES")));
  std::printf("| mode | message | in flight | messages | s | GB/s each way |\n| --- | --- | --- | --- | --- | --- |\n");
  std::fflush(stdout);
  // The fifos mode joins one bootstrap per row: a root per row, started here before forking.
  const size_t rows = o.mode == "fifos" ? o.sizes.size() * o.inflight.size() * o.conns.size() : 1;
  std::vector<weft::UniqueId> ids;
  for (size_t i = 0; i < rows; ++i)
    ids.push_back(weft::start_bootstrap_root(weft::net::resolve("127.0.0.1", 0), 0, 600));
  std::vector<pid_t> pids;
  for (int r = 0; r < 2; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 2;
      try {
        if (o.mode == "transport") {
          auto boot = weft::Bootstrap::join(ids[0], r, 2, 30);
          rc = run_transport(*boot, o);
        } else {
          rc = 0;
          for (size_t i = 0; i < rows && rc == 0; ++i) {
            Options one = o;
            one.sizes = {o.sizes[i / (o.inflight.size() * o.conns.size())]};
            one.inflight = {o.inflight[(i / o.conns.size()) % o.inflight.size()]};
            one.conns = {o.conns[i % o.conns.size()]};
            rc = run_fifos(ids[i], r, one);
          }
        }
      } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) worst = 1;
  }
  return worst;
}
