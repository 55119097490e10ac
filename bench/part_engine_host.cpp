// The partitioned progression engine's own cost on this CPU (issue 28 item 3), without a GPU:
// the engine (src/part/engine.hpp) over HostEndpoint (memcpy puts, stores for signals), one
// send request of U partitions of B bytes, threshold ceil(U / 32) as part_bench's prox column.
// Per epoch: set_epoch (what pbuf_prepare adds on the proxy path; it takes the engine's lock
// while the engine thread polls), then every transport partition marked ready at once, then
// this thread polls the done word until the engine stores the epoch. Prints, per U, the mean
// and the largest of both in microseconds over N epochs (after 10 not counted).
//
// Usage: part_engine_host [--grids 1,8,64,256,4096] [--bytes 8] [--epochs 2000]
// Exit status 1 when an epoch is not delivered within 10 s or a byte or flag is wrong.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "part/engine.hpp"
#include "part/poll.hpp"
#include "part/state.hpp"
#include "weft/part/common.hpp"

using namespace weft::part;
using Clock = std::chrono::steady_clock;

namespace {

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

bool run_grid(uint32_t U, uint64_t pb, int epochs) {
  std::vector<char> send(U * pb), recv(U * pb);
  std::vector<uint64_t> flags(kFlagFirst + U, 0), ready(U, 0), words(kRecordWords * U, 0);
  uint64_t done = 0;
  ProgressJobDesc d;
  d.who = "rank 0: psend to rank 1 (bench)";
  d.partitions = U;
  d.partition_bytes = pb;
  d.send_bytes = d.remote_bytes = U * pb;
  d.remote_flag_words = kFlagFirst + U;
  const uint32_t thr = (U + 31) / 32;
  const uint32_t T = transport_partitions(U, thr);
  ProgressEngine eng(10, "bench engine");
  const weft::proxy::RemoteMemory b{reinterpret_cast<uint64_t>(recv.data()), recv.size(), nullptr};
  const weft::proxy::RemoteMemory f{reinterpret_cast<uint64_t>(flags.data()), flags.size() * 8, nullptr};
  ProgressEngine::Job* job = eng.add(d, std::make_shared<weft::proxy::HostEndpoint>("rank 1"), send.data(), b, f,
                                     ready.data(), words.data(), ProgressEngine::Staging{}, &done);
  double set_sum = 0, set_max = 0, del_sum = 0, del_max = 0;
  for (int e = 1; e <= epochs + 10; ++e) {
    std::memset(send.data(), e & 0xff, send.size());
    const auto t0 = Clock::now();
    eng.set_epoch(job, static_cast<uint64_t>(e), thr);
    const auto t1 = Clock::now();
    for (uint32_t t = 0; t < T; ++t) __atomic_store_n(&ready[t], static_cast<uint64_t>(e), __ATOMIC_RELEASE);
    Poller poll(10);  // as a request's wait polls its done word
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != static_cast<uint64_t>(e))
      if (!poll.next()) {
        std::fprintf(stderr, "part_engine_host: %u partitions: epoch %d not delivered within 10 s\n", U, e);
        return false;
      }
    const auto t2 = Clock::now();
    eng.check();
    if (recv != send || flags[kFlagFirst + T - 1] != static_cast<uint64_t>(e)) {
      std::fprintf(stderr, "part_engine_host: %u partitions: epoch %d delivered wrong bytes or flags\n", U, e);
      return false;
    }
    if (e <= 10) continue;
    set_sum += us(t1 - t0);
    set_max = std::max(set_max, us(t1 - t0));
    del_sum += us(t2 - t1);
    del_max = std::max(del_max, us(t2 - t1));
  }
  std::printf("%8u %8u %10llu %12.2f %12.2f %14.2f %14.2f\n", U, T, static_cast<unsigned long long>(U * pb),
              set_sum / epochs, set_max, del_sum / epochs, del_max);
  eng.remove(job);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string grids = "1,8,64,256,4096";
  uint64_t pb = 8;
  int epochs = 2000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--grids") grids = argv[i + 1];
    else if (a == "--bytes") pb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--epochs") epochs = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "part_engine_host: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  if (pb == 0 || epochs <= 0) {
    std::fprintf(stderr, "part_engine_host: --bytes and --epochs must be positive\n");
    return 2;
  }
  std::printf("# progression engine over HostEndpoint, %llu B per partition, threshold ceil(U/32), %d epochs\n",
              static_cast<unsigned long long>(pb), epochs);
  std::printf("%8s %8s %10s %12s %12s %14s %14s\n", "U", "T", "bytes", "set_epoch_us", "set_max_us", "ready_done_us",
              "ready_done_max");
  std::stringstream ss(grids);
  for (std::string g; std::getline(ss, g, ',');)
    if (!run_grid(static_cast<uint32_t>(std::stoul(g)), pb, epochs)) return 1;
  return 0;
}
