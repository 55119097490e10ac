// part_bench trace: where a partitioned iteration's time goes on the kernel-copy path,
// rank 0 -> rank 1, per grid, at the thresholds of --thresholds (default 1,0; 0 means all the
// grid's blocks, and each is at most the grid), with two claims:
//   weft        PsendDeviceHandle::claim (one block per epoch reads the host words)
//   each-block  the claim before issue 28's fix, kept here to measure beside it: every block
//               that finds the device's epoch cache behind reads `prepared` and `started`
//               from host memory itself with strong system-scope loads
// The producer is a vector add followed by pready_block's steps (include/weft/part/device.hpp:
// claim, the block's put, complete) with a %globaltimer stamp after each, so each block of
// the last epoch gives: entry, pready start, claimed, copied, pready end. One row per case:
// the kernel's span, per-block means of each step, the largest claim and pready, and the
// slope of the claim's end against the order in which blocks began pready (ns per block:
// claims served one after another make a staircase, about 1,900 ns per block in round 3;
// claims served at once, close to 0). For the grid of --per-block (default 256), up to --rows
// (default 32; 0: all) of its blocks sorted by pready start, times from the earliest start.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include "part_bench.hpp"

namespace partbench {
namespace {

using weft::part::PsendDeviceHandle;

enum Claim : int { kClaimWeft = 0, kClaimEachBlock = 1 };
const char* claim_name(int c) { return c == kClaimWeft ? "weft" : "each-block"; }

/// The claim before the fix (weft/part/common.hpp at a046361). The bench never misuses, so a
/// refusal (0) would only show as data missing at the receiver.
__device__ __noinline__ uint64_t claim_each_block(uint64_t* stamps, uint64_t* ctl, const uint64_t* host, uint32_t p) {
  const uint64_t e = atomicAdd(reinterpret_cast<unsigned long long*>(stamps + p), 1ull) + 1;
  if (e <= weft::device::ld_relaxed_gpu(ctl + weft::part::kCtlEpoch)) return e;
  const uint64_t prepared = weft::device::ld_acquire_sys(host + weft::part::kWordPrepared);
  const uint64_t started = weft::device::ld_acquire_sys(host + weft::part::kWordStarted);
  if (weft::part::claim_error(e, prepared, started) != weft::part::kDevOk) return 0;
  atomicMax(reinterpret_cast<unsigned long long*>(ctl + weft::part::kCtlEpoch), static_cast<unsigned long long>(prepared));
  return e;
}

constexpr int kStamps = 5;  ///< per block: entry, pready start, claimed, copied, pready end

template <int kClaim>
__global__ void __launch_bounds__(1024, 2) vadd_pready_steps(const double* a, const double* b, double* c,
                                                             PsendDeviceHandle h, uint64_t* stamps) {
  uint64_t* s = stamps + static_cast<uint64_t>(kStamps) * blockIdx.x;
  if (threadIdx.x == 0) s[0] = weft::device::globaltimer();
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
  __shared__ uint64_t s_epoch;
  __syncthreads();
  if (threadIdx.x == 0) {
    s[1] = weft::device::globaltimer();
    s_epoch = kClaim == kClaimWeft ? h.claim(blockIdx.x) : claim_each_block(h.stamps, h.ctl, h.host, blockIdx.x);
    s[2] = weft::device::globaltimer();
  }
  __syncthreads();
  const uint64_t e = s_epoch;
  const uint64_t off = static_cast<uint64_t>(blockIdx.x) * h.partition_bytes;
  if (e != 0) {
    weft::device::MemoryChannelDeviceHandle ch = h.channel;  // put is not const
    ch.put(off, off, h.partition_bytes, weft::device::ThreadGroup::block());
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    s[3] = weft::device::globaltimer();
    if (e != 0) h.complete(blockIdx.x, e);
    s[4] = weft::device::globaltimer();
  }
}

/// Per-block step times of one epoch, in microseconds (st: kStamps words per block).
struct Steps {
  double span = 0, add = 0, claim = 0, claim_max = 0, copy = 0, done = 0, pready = 0, pready_max = 0;
  double slope_ns = 0;  ///< claim end against pready-start order, least squares
};

Steps analyse(int G, const std::vector<uint64_t>& st, std::vector<int>* order) {
  Steps r;
  uint64_t first = ~0ull, last = 0;
  for (int b = 0; b < G; ++b) {
    const uint64_t* s = &st[static_cast<size_t>(kStamps) * b];
    first = std::min(first, s[0]);
    last = std::max(last, s[4]);
    r.add += (s[1] - s[0]) / 1e3;
    r.claim += (s[2] - s[1]) / 1e3;
    r.claim_max = std::max(r.claim_max, (s[2] - s[1]) / 1e3);
    r.copy += (s[3] - s[2]) / 1e3;
    r.done += (s[4] - s[3]) / 1e3;
    r.pready += (s[4] - s[1]) / 1e3;
    r.pready_max = std::max(r.pready_max, (s[4] - s[1]) / 1e3);
  }
  r.span = (last - first) / 1e3;
  for (double* m : {&r.add, &r.claim, &r.copy, &r.done, &r.pready}) *m /= G;
  order->resize(G);
  std::iota(order->begin(), order->end(), 0);
  std::stable_sort(order->begin(), order->end(),
                   [&](int x, int y) { return st[kStamps * static_cast<size_t>(x) + 1] < st[kStamps * static_cast<size_t>(y) + 1]; });
  if (G > 1) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < G; ++i) {
      const double y = static_cast<double>(st[kStamps * static_cast<size_t>((*order)[i]) + 2] - first);
      sx += i;
      sy += y;
      sxx += static_cast<double>(i) * i;
      sxy += i * y;
    }
    r.slope_ns = (G * sxy - sx * sy) / (G * sxx - sx * sx);
  }
  return r;
}

/// Up to `rows` blocks of the sorted order, evenly spaced (the first and last included).
void print_blocks(int G, const std::vector<uint64_t>& st, const std::vector<int>& order, int rows) {
  const uint64_t t0 = st[kStamps * static_cast<size_t>(order[0]) + 1];
  const int n = rows <= 0 || rows >= G ? G : rows;
  std::printf("#   %6s %6s %10s %10s %10s %10s   (us from the earliest pready start)\n", "order", "block", "start",
              "claimed", "copied", "end");
  for (int j = 0; j < n; ++j) {
    const int i = n == 1 ? 0 : static_cast<int>(static_cast<int64_t>(j) * (G - 1) / (n - 1));
    const uint64_t* s = &st[kStamps * static_cast<size_t>(order[i])];
    std::printf("#   %6d %6d %10.2f %10.2f %10.2f %10.2f\n", i, order[i], (s[1] - t0) / 1e3, (s[2] - t0) / 1e3,
                (s[3] - t0) / 1e3, (s[4] - t0) / 1e3);
  }
}

/// One case: kIters epochs of one request; rank 0 prints the last epoch's row.
int trace_case(Rank& k, int G, int thr, int claim, int tag, const double* a, const double* b, double* c,
               uint64_t* stamps) {
  const int r = k.rank;
  const uint64_t n = static_cast<uint64_t>(G) * kThreads, bytes = n * 8;
  if (barrier(k)) return 1;
  weftPrequest_t q = nullptr;
  if (r == 0) OK(weftPsendInit(c, G, kThreads, weftFloat64, 1, tag, k.pc, &q));
  else OK(weftPrecvInit(c, G, kThreads, weftFloat64, 0, tag, k.pc, &q));
  if (r == 1) OK(cudaMemset(c, 0xA5, bytes));  // poison: only a delivery writes it
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  PsendDeviceHandle h{};
  if (r == 0) OK(weftPdevRequestCreate(q, thr, &d, &dh));
  for (int it = 0; it < kIters; ++it) {
    OK(weftPstart(q));
    OK(weftPbufPrepare(q));
    if (r == 0 && it == 0) OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
    if (r == 0 && claim == kClaimWeft) vadd_pready_steps<kClaimWeft><<<G, kThreads, 0, k.stream>>>(a, b, c, h, stamps);
    if (r == 0 && claim == kClaimEachBlock)
      vadd_pready_steps<kClaimEachBlock><<<G, kThreads, 0, k.stream>>>(a, b, c, h, stamps);
    OK(weftPwait(q));
  }
  OK(cudaStreamSynchronize(k.stream));
  if (r == 0) {
    std::vector<uint64_t> st(static_cast<size_t>(kStamps) * G);
    OK(cudaMemcpy(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost));
    std::vector<int> order;
    const Steps s = analyse(G, st, &order);
    std::printf("%8d %9d %10s %10.1f %8.2f %8.2f %9.2f %8.2f %8.2f %9.2f %10.2f %9.1f %8.1f\n", G, thr,
                claim_name(claim), s.span, s.add, s.claim, s.claim_max, s.copy, s.done, s.pready, s.pready_max,
                s.slope_ns, static_cast<double>(bytes) / (s.span * 1e3));
    if (G == g_trace_grid) print_blocks(G, st, order, g_trace_rows);
  } else {
    std::vector<double> got(n);
    OK(cudaMemcpy(got.data(), c, bytes, cudaMemcpyDeviceToHost));
    const long wrong = wrong_sums(got);
    if (wrong) std::printf("# grid %d threshold %d claim %s: %ld wrong elements received\n", G, thr, claim_name(claim),
                           wrong);
  }
  if (d) OK(weftPdevRequestFree(d));
  OK(weftPrequestFree(q));
  return 0;
}

}  // namespace

int trace(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  const uint64_t max_g = static_cast<uint64_t>(*std::max_element(g_grids.begin(), g_grids.end()));
  const uint64_t max_n = max_g * kThreads;
  double *a, *b, *c;
  uint64_t* stamps;
  OK(cudaMalloc(&a, max_n * 8));
  OK(cudaMalloc(&b, max_n * 8));
  OK(cudaMalloc(&c, max_n * 8));
  OK(cudaMalloc(&stamps, max_g * kStamps * 8));
  if (fill_inputs(k, a, b, max_n)) return 1;
  if (r == 0)
    std::printf("# trace: rank 0 -> rank 1, kernel-copy path, %d epochs per case; the last epoch's producer, "
                "per block (%%globaltimer, us): vector add, then pready_block's steps: claim, copy (put), done "
                "(count, flag); claim weft: one block per epoch reads the host words; each-block: every block "
                "whose cache is behind reads them (the claim before issue 28's fix); slope: ns per block of the "
                "claim's end against pready-start order%s\n"
                "%8s %9s %10s %10s %8s %8s %9s %8s %8s %9s %10s %9s %8s\n",
                kIters, k.shared_gpu ? " (both ranks share one GPU)" : "", "blocks", "threshold", "claim",
                "kernel_us", "add_us", "claim_us", "claim_max", "copy_us", "done_us", "pready_us", "pready_max",
                "slope_ns", "GB/s");
  int tag = 500000;
  for (int G : g_grids) {
    std::vector<int> thresholds;  // --thresholds, 0 = G, each at most G, once
    for (int t : g_trace_thresholds) {
      const int thr = t <= 0 || t > G ? G : t;
      if (std::find(thresholds.begin(), thresholds.end(), thr) == thresholds.end()) thresholds.push_back(thr);
    }
    for (int thr : thresholds)
      for (int claim : {kClaimWeft, kClaimEachBlock})
        if (trace_case(k, G, thr, claim, ++tag, a, b, c, stamps)) return 1;
  }
  return close_rank(k);
}

}  // namespace partbench
