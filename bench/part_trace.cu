// part_bench trace: where a partitioned iteration's time goes, rank 0 -> rank 1, per grid,
// on the paths of --paths (kernel: the kernel copy, the default; proxy: the progression
// engine), at the thresholds of --thresholds (default 1,0; 0 means all the grid's blocks, -d
// means ceil(blocks / d), and each is at most the grid), with the claims of --claims (default
// weft,each-block; each-block runs on the kernel path only):
//   weft        PsendDeviceHandle::claim (one block per epoch reads the host words)
//   each-block  the claim before issue 28's fix, kept here to measure beside it: every block
//               that finds the device's epoch cache behind reads `prepared` and `started`
//               from host memory itself with strong system-scope loads
// The producer is a vector add followed by pready_block's steps (include/weft/part/device.hpp:
// claim, the block's put (kernel path only), complete) with a %globaltimer stamp after each,
// so each block of the last epoch gives: entry, pready start, claimed, copied, pready end. One
// row per case: the kernel's span, per-block means of each step, the largest claim and
// pready, the slope of the claim's end against the order in which blocks began pready (ns per
// block: claims served one after another make a staircase; claims served at once, close to
// 0) and the mean iteration period. For the grid of --per-block (default 256), up to --rows
// (default 32; 0: all) of its blocks sorted by pready start, times from the earliest start.
//
// Then the case's timeline (part_timeline.hpp): both ranks' WEFT_PART_TRACE records of
// epochs 2 to the last (taken through the record sink; rank 1 sends its records to rank 0
// over weft), the bench's stamps around each launch and each epoch's first block start and
// last block end, the device's %globaltimer moved onto the host's steady clock by a
// ping-pong through host-mapped memory before the case (the offset of the shortest of 16
// round trips; its half round trip is printed as the uncertainty): every event as the time
// from the sender's start of the same epoch, mean, least and largest over the epochs, and
// the last epoch's two WEFT_PART_TRACE lines.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "part_bench.hpp"
#include "part_timeline.hpp"

namespace partbench {
namespace {

using weft::part::EpochTraceRecord;
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

/// `epoch_span`: this epoch's [first block entry, last block end] (atomicMin / atomicMax).
template <int kClaim>
__global__ void __launch_bounds__(1024, 2) vadd_pready_steps(const double* a, const double* b, double* c,
                                                             PsendDeviceHandle h, uint64_t* stamps,
                                                             unsigned long long* epoch_span) {
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
  if (e != 0 && h.ready == nullptr) {  // the progression engine's path copies nothing here
    weft::device::MemoryChannelDeviceHandle ch = h.channel;  // put is not const
    ch.put(off, off, h.partition_bytes, weft::device::ThreadGroup::block());
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    s[3] = weft::device::globaltimer();
    if (e != 0) h.complete(blockIdx.x, e);
    s[4] = weft::device::globaltimer();
    atomicMin(epoch_span, static_cast<unsigned long long>(s[0]));
    atomicMax(epoch_span + 1, static_cast<unsigned long long>(s[4]));
  }
}

/// One thread: answers each of `rounds` flags the host raises in `go` with %globaltimer in
/// out[i], then out[0] = i; gives up after `limit_ns`.
__global__ void clock_pingpong(const volatile uint64_t* go, volatile uint64_t* out, int rounds, uint64_t limit_ns) {
  const uint64_t end = weft::device::globaltimer() + limit_ns;
  for (int i = 1; i <= rounds; ++i) {
    while (*go < static_cast<uint64_t>(i))
      if (weft::device::globaltimer() > end) return;
    out[i] = weft::device::globaltimer();
    __threadfence_system();
    out[0] = static_cast<uint64_t>(i);
  }
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// The offset of this GPU's %globaltimer from the host's steady clock (ns); false (and a line
/// saying so) when the device did not answer.
int calibrate(Rank& k, int64_t* offset, int64_t* uncertainty, bool* ok) {
  constexpr int kRounds = 16;
  uint64_t *go, *out, *dgo, *dout;
  OK(cudaHostAlloc(&go, sizeof(uint64_t), cudaHostAllocMapped));
  OK(cudaHostAlloc(&out, (kRounds + 1) * sizeof(uint64_t), cudaHostAllocMapped));
  *go = 0;
  std::memset(out, 0, (kRounds + 1) * sizeof(uint64_t));
  OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dgo), go, 0));
  OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dout), out, 0));
  clock_pingpong<<<1, 1, 0, k.stream>>>(dgo, dout, kRounds, 2000000000ull);
  OK(cudaGetLastError());
  std::vector<ClockSample> samples;
  const int64_t give_up = steady_ns() + 2000000000ll;
  for (int i = 1; i <= kRounds; ++i) {
    ClockSample s;
    s.host_before = steady_ns();
    __atomic_store_n(go, static_cast<uint64_t>(i), __ATOMIC_SEQ_CST);
    while (__atomic_load_n(out, __ATOMIC_ACQUIRE) < static_cast<uint64_t>(i) && steady_ns() < give_up) {
    }
    s.host_after = steady_ns();
    if (__atomic_load_n(out, __ATOMIC_ACQUIRE) < static_cast<uint64_t>(i)) break;
    s.device = __atomic_load_n(out + i, __ATOMIC_ACQUIRE);
    samples.push_back(s);
  }
  OK(cudaStreamSynchronize(k.stream));
  *ok = samples.size() == static_cast<size_t>(kRounds) && clock_offset(samples, offset, uncertainty);
  if (!*ok) std::printf("# clock calibration: the device answered %zu of %d round trips; no device events\n", samples.size(), kRounds);
  OK(cudaFreeHost(go));
  OK(cudaFreeHost(out));
  return 0;
}

std::vector<EpochTraceRecord> g_records;  ///< this rank's traced epochs (the sink's)
void keep_record(const EpochTraceRecord& r) { g_records.push_back(r); }

/// Rank 1's records of tag `tag` go to rank 0 over weft (at most kMax); rank 0 gets them in
/// `theirs` (their count is checked: bytes from another process).
int exchange_records(Rank& k, int tag, std::vector<EpochTraceRecord>* mine, std::vector<EpochTraceRecord>* theirs) {
  constexpr size_t kMax = 64, kBytes = sizeof(uint64_t) + kMax * sizeof(EpochTraceRecord);
  mine->clear();
  for (const EpochTraceRecord& r : g_records)
    if (r.tag == tag && mine->size() < kMax) mine->push_back(r);
  std::vector<char> host(kBytes, 0);
  char* dev = nullptr;
  OK(cudaMalloc(&dev, kBytes));
  auto* st = reinterpret_cast<weftStream_t>(k.stream);
  if (k.rank == 1) {
    const uint64_t n = mine->size();
    std::memcpy(host.data(), &n, sizeof n);
    std::memcpy(host.data() + sizeof n, mine->data(), n * sizeof(EpochTraceRecord));
    OK(cudaMemcpy(dev, host.data(), kBytes, cudaMemcpyHostToDevice));
    OK(weftSend(dev, kBytes, weftUint8, 0, k.comm, st));
    OK(cudaStreamSynchronize(k.stream));
  } else {
    OK(weftRecv(dev, kBytes, weftUint8, 1, k.comm, st));
    OK(cudaStreamSynchronize(k.stream));
    OK(cudaMemcpy(host.data(), dev, kBytes, cudaMemcpyDeviceToHost));
    uint64_t n = 0;
    std::memcpy(&n, host.data(), sizeof n);
    theirs->resize(std::min<uint64_t>(n, kMax));
    if (!theirs->empty()) std::memcpy(theirs->data(), host.data() + sizeof n, theirs->size() * sizeof(EpochTraceRecord));
  }
  OK(cudaFree(dev));
  return 0;
}

}  // namespace

namespace {

struct TraceBuffers {
  const double *a = nullptr, *b = nullptr;
  double* c = nullptr;
  uint64_t* stamps = nullptr;           ///< kStamps words per block, the last epoch's
  unsigned long long* spans = nullptr;  ///< 2 per epoch: first block entry, last block end
};

/// The threshold --thresholds entry `t` means for grid G: 0 all, -d ceil(G / d), at most G.
int resolve_threshold(int t, int G) {
  const int thr = t == 0 ? G : t < 0 ? (G + (-t) - 1) / (-t) : t;
  return std::clamp(thr, 1, G);
}

/// Rank 0's report of one case: the row, the blocks of --per-block's grid, the timeline and
/// the last epoch's two trace lines.
void report(int G, int thr, bool proxy, int claim, const std::vector<uint64_t>& st,
            const std::vector<EpochTraceRecord>& sender, const std::vector<EpochTraceRecord>& receiver,
            const std::vector<BenchEpoch>& bench, uint64_t bytes) {
  std::vector<int> order;
  const Steps s = analyse_blocks(G, st, &order);
  std::printf("%8d %9d %10s %6s %10.1f %8.2f %8.2f %9.2f %8.2f %8.2f %9.2f %10.2f %9.1f %8.1f %9.1f\n", G, thr,
              claim_name(claim), proxy ? "proxy" : "kernel", s.span, s.add, s.claim, s.claim_max, s.copy, s.done,
              s.pready, s.pready_max, s.slope_ns, static_cast<double>(bytes) / (s.span * 1e3), mean_period_us(sender));
  if (G == g_trace_grid) print_blocks(G, st, order, g_trace_rows);
  const std::vector<TimelineRow> rows = build_timeline(sender, receiver, bench);
  print_timeline(rows);
  print_floor_row(G, proxy ? "proxy" : "kernel", thr, rows, mean_period_us(sender));
  for (const std::vector<EpochTraceRecord>* v : {&sender, &receiver}) {
    if (v->empty()) continue;
    const EpochTraceRecord& r = *std::max_element(v->begin(), v->end(), [](auto& x, auto& y) { return x.epoch < y.epoch; });
    const std::string who = "rank " + std::to_string(r.rank) + (r.kind == EpochTraceRecord::kSend ? ": psend to rank " : ": precv from rank ") +
                            std::to_string(r.peer) + " (tag " + std::to_string(r.tag) + ")";
    std::printf("#   %s\n", weft::part::format_epoch_trace(who, r.epoch, r.t, r.prev_end).c_str());
  }
}

/// The device's per-epoch spans onto the host clock (0 where unknown).
void place_spans(const std::vector<unsigned long long>& spans, bool clock_ok, int64_t offset, std::vector<BenchEpoch>* bench) {
  for (size_t it = 0; it < bench->size(); ++it) {
    const unsigned long long first = spans[2 * it], last = spans[2 * it + 1];
    if (!clock_ok || first == ~0ull || last == 0) continue;
    (*bench)[it].kernel_first = static_cast<int64_t>(first) - offset;
    (*bench)[it].kernel_last = static_cast<int64_t>(last) - offset;
  }
}

/// One case: kIters epochs of one request; rank 0 prints the row and the timeline.
int trace_case(Rank& k, weftPartComm_t pc, bool proxy, int G, int thr, int claim, int tag, const TraceBuffers& tb) {
  const int r = k.rank;
  const uint64_t n = static_cast<uint64_t>(G) * kThreads, bytes = n * 8;
  if (barrier(k)) return 1;
  g_records.clear();
  weftPrequest_t q = nullptr;
  if (r == 0) OK(weftPsendInit(tb.c, G, kThreads, weftFloat64, 1, tag, pc, &q));
  else OK(weftPrecvInit(tb.c, G, kThreads, weftFloat64, 0, tag, pc, &q));
  if (r == 1) OK(cudaMemset(tb.c, 0xA5, bytes));  // poison: only a delivery writes it
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  PsendDeviceHandle h{};
  int64_t offset = 0, uncertainty = 0;
  bool clock_ok = false;
  std::vector<unsigned long long> spans(2 * kIters, 0);
  for (int it = 0; it < kIters; ++it) spans[2 * it] = ~0ull;
  if (r == 0) {
    OK(weftPdevRequestCreate(q, thr, &d, &dh));
    if (calibrate(k, &offset, &uncertainty, &clock_ok)) return 1;
    OK(cudaMemcpy(tb.spans, spans.data(), spans.size() * sizeof(spans[0]), cudaMemcpyHostToDevice));
  }
  std::vector<BenchEpoch> bench(kIters);
  for (int it = 0; it < kIters; ++it) {
    OK(weftPstart(q));
    OK(weftPbufPrepare(q));
    if (r == 0) {
      if (it == 0) OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
      bench[it].epoch = static_cast<uint64_t>(it) + 1;
      bench[it].launch_in = steady_ns();
      if (claim == kClaimWeft) vadd_pready_steps<kClaimWeft><<<G, kThreads, 0, k.stream>>>(tb.a, tb.b, tb.c, h, tb.stamps, tb.spans + 2 * it);
      else vadd_pready_steps<kClaimEachBlock><<<G, kThreads, 0, k.stream>>>(tb.a, tb.b, tb.c, h, tb.stamps, tb.spans + 2 * it);
      bench[it].launch_out = steady_ns();
    }
    OK(weftPwait(q));
  }
  OK(cudaStreamSynchronize(k.stream));
  std::vector<EpochTraceRecord> mine, theirs;
  if (exchange_records(k, tag, &mine, &theirs)) return 1;
  if (r == 0) {
    std::vector<uint64_t> st(static_cast<size_t>(kStamps) * G);
    OK(cudaMemcpy(st.data(), tb.stamps, st.size() * 8, cudaMemcpyDeviceToHost));
    OK(cudaMemcpy(spans.data(), tb.spans, spans.size() * sizeof(spans[0]), cudaMemcpyDeviceToHost));
    place_spans(spans, clock_ok, offset, &bench);
    if (clock_ok) std::printf("# clock: %%globaltimer - steady clock = %lld ns, +- %lld ns\n", static_cast<long long>(offset), static_cast<long long>(uncertainty));
    report(G, thr, proxy, claim, st, mine, theirs, bench, bytes);
  } else {
    std::vector<double> got(n);
    OK(cudaMemcpy(got.data(), tb.c, bytes, cudaMemcpyDeviceToHost));
    const long wrong = wrong_sums(got);
    if (wrong) std::printf("# grid %d threshold %d claim %s %s: %ld wrong elements received\n", G, thr, claim_name(claim), proxy ? "proxy" : "kernel", wrong);
  }
  if (d) OK(weftPdevRequestFree(d));
  OK(weftPrequestFree(q));
  return 0;
}

void print_header(const Rank& k) {
  std::printf("# trace: rank 0 -> rank 1, %d epochs per case; the last epoch's producer, per block (%%globaltimer, us): "
              "vector add, then pready_block's steps: claim, copy (put; none on the proxy path), done (count, flag); "
              "claim weft: one block per epoch reads the host words; each-block: every block whose cache is behind "
              "reads them (the claim before issue 28's fix); slope: ns per block of the claim's end against "
              "pready-start order; period: mean us from one start of the sender to the next%s\n"
              "%8s %9s %10s %6s %10s %8s %8s %9s %8s %8s %9s %10s %9s %8s %9s\n",
              kIters, k.shared_gpu ? " (both ranks share one GPU)" : "", "blocks", "threshold", "claim", "path",
              "kernel_us", "add_us", "claim_us", "claim_max", "copy_us", "done_us", "pready_us", "pready_max",
              "slope_ns", "GB/s", "period_us");
  print_floor_header();
}

}  // namespace

int trace(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  g_records.reserve(256);  // the sink allocates nothing inside the timed epochs
  weft::part::set_epoch_trace_sink(keep_record);
  const uint64_t max_g = static_cast<uint64_t>(*std::max_element(g_grids.begin(), g_grids.end()));
  const uint64_t max_n = max_g * kThreads;
  double *a, *b;
  TraceBuffers tb;
  OK(cudaMalloc(&a, max_n * 8));
  OK(cudaMalloc(&b, max_n * 8));
  OK(cudaMalloc(&tb.c, max_n * 8));
  OK(cudaMalloc(&tb.stamps, max_g * kStamps * 8));
  OK(cudaMalloc(&tb.spans, 2 * kIters * sizeof(unsigned long long)));
  tb.a = a;
  tb.b = b;
  if (fill_inputs(k, a, b, max_n)) return 1;
  const bool any_proxy = std::count(g_trace_paths.begin(), g_trace_paths.end(), 1) > 0;
  weftPartComm_t pc_proxy = nullptr;
  if (any_proxy) OK(weftPartCommCreateWithPath(k.comm, weftPartPathProxy, &pc_proxy));
  if (r == 0) print_header(k);
  int tag = 500000;
  for (int G : g_grids)
    for (int path : g_trace_paths) {
      std::vector<int> thresholds;  // each once
      for (int t : g_trace_thresholds) {
        const int thr = resolve_threshold(t, G);
        if (std::find(thresholds.begin(), thresholds.end(), thr) == thresholds.end()) thresholds.push_back(thr);
      }
      for (int thr : thresholds)
        for (int claim : g_trace_claims) {
          if (path == 1 && claim != kClaimWeft) continue;  // the old claim is the kernel path's
          if (trace_case(k, path == 1 ? pc_proxy : k.pc, path == 1, G, thr, claim, ++tag, tb)) return 1;
        }
    }
  if (barrier(k)) return 1;  // every rank has freed its requests
  if (pc_proxy) OK(weftPartCommDestroy(pc_proxy));
  weft::part::set_epoch_trace_sink(nullptr);
  return close_rank(k);
}

}  // namespace partbench
