// Partitioned communication benchmarks (paper 002 §VI), two ranks as processes
// (src/util/launcher.hpp; with one GPU both ranks share it, and every row says so).
// Each prints a table and asserts nothing but the data (a wrong byte is reported).
//
//   goodput   [--grids 1,2,...]  bytes per second from kernel start to data delivered, for a
//             vector-add producer of G blocks x 1,024 threads x 8 B: kernel, stream
//             synchronize, weftSend (traditional) against device pready_block inside the
//             kernel, on the kernel-copy path and on the progression-engine path (Figures 4
//             and 5; within one host: the engine's puts use the copy engines)
//   pready    time of one kernel whose block of T threads readies its data at thread, warp
//             or block granularity, T = 1..1,024 (Figure 3)
//   overheads psend_init, device request create, pbuf_prepare first and average (Table I)
//   trace     [--grids ...] [--per-block G] [--rows N] [--thresholds t,...] [--paths
//             kernel,proxy] [--claims weft,each-block]  where an iteration's time goes (rank
//             0 -> 1): both ranks' WEFT_PART_TRACE records of every epoch (WEFT_PART_TRACE set
//             here, taken through the record sink), the launch, each epoch's first and last
//             block on the host clock, on one timeline with a `floor` line per case, and the
//             last epoch's producer per block and per step of its pready (part_trace.cu)
//   allreduce [--grids ...] [--max-blocks N]  vector-add + partitioned AllReduce inside the
//             kernel, against vector-add + ncclAllReduce (libnccl.so.2 loaded with dlopen) +
//             stream synchronize (Figures 6 and 7); the NCCL column is skipped, with the
//             reason, where NCCL is not found, the ranks share one GPU (NCCL refuses two ranks
//             on one device) or ncclCommInitRank fails; with the ranks on one GPU only grids of
//             at most --max-blocks (default SMs / 2) run, since both ranks' blocks must be
//             resident at once
// Every mode sets WEFT_TIMEOUT=20 unless set: a wait that cannot end fails in the process.
// The other modes use the kernel-copy path. With WEFT_EMULATE_NODES=2 the two ranks are on
// two emulated nodes: goodput's progression-engine column goes over UCX (staged through
// page-locked memory where UCX cannot register GPU memory, or with WEFT_PART_STAGE=1), and
// the header says so; the traditional send crosses the nodes too, the kernel copy does not.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "part_bench.hpp"
#include "util/launcher.hpp"

namespace gt = weft::gputest;
using weft::part::PcollDeviceHandle;
using weft::part::PsendDeviceHandle;

namespace partbench {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void vadd(const double* a, const double* b, double* c) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
}
__global__ void __launch_bounds__(1024, 2) vadd_pready(const double* a, const double* b, double* c, PsendDeviceHandle h) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
  h.pready_block(blockIdx.x);
}
__global__ void __launch_bounds__(1024, 2) vadd_allreduce(const double* a, const double* b, double* c, PcollDeviceHandle h) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
  h.pready_block(blockIdx.x);
}
__global__ void fill(double* x, uint64_t n, double base) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] = base + (i % 97);
}
__global__ void pready_gran(PsendDeviceHandle h, int gran) {
  if (gran == 0) h.pready_thread(threadIdx.x);
  else if (gran == 1) h.pready_warp(threadIdx.x / 32);
  else h.pready_block(0);
}

int open_rank(int r, const weftUniqueId& id, Rank& k) {
  k.rank = r;
  OK(weftCommInitRank(&k.comm, 2, id, r));
  OK(weftPartCommCreateWithPath(k.comm, weftPartPathKernel, &k.pc));
  OK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
  int n = 0;
  OK(cudaGetDeviceCount(&n));
  k.shared_gpu = n < 2;
  return 0;
}

int barrier(Rank& k) {
  static int* x = nullptr;
  if (!x) OK(cudaMalloc(&x, sizeof(int)));
  OK(weftAllReduce(x, x, 1, weftInt32, weftSum, k.comm, reinterpret_cast<weftStream_t>(k.stream)));
  OK(cudaStreamSynchronize(k.stream));
  return 0;
}

int close_rank(Rank& k) {
  if (barrier(k)) return 1;
  OK(weftPartCommDestroy(k.pc));
  OK(weftCommDestroy(k.comm));
  return 0;
}

int fill_inputs(Rank& k, double* a, double* b, uint64_t n) {
  fill<<<256, 256, 0, k.stream>>>(a, n, 1);
  fill<<<256, 256, 0, k.stream>>>(b, n, 2);
  OK(cudaStreamSynchronize(k.stream));
  return 0;
}

long wrong_sums(const std::vector<double>& c) {
  long wrong = 0;
  for (uint64_t i = 0; i < c.size(); ++i) wrong += c[i] != 3.0 + 2.0 * static_cast<double>(i % 97);
  return wrong;
}

std::vector<std::string> split_names(const char* s) {
  std::vector<std::string> v;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ',' || *p == 0) {
      if (!cur.empty()) v.push_back(cur);
      cur.clear();
      if (*p == 0) break;
    } else {
      cur += *p;
    }
  }
  return v;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return v;
}

std::vector<int> g_grids = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
int g_trace_grid = 256;
int g_trace_rows = 32;
std::vector<int> g_trace_thresholds = {1, 0};
std::vector<int> g_trace_paths = {0};
std::vector<int> g_trace_claims = {0, 1};
int g_max_blocks = 0;

/// Mean microseconds per iteration of start, pbuf_prepare, vadd_pready on G blocks, wait,
/// over context `pc` (its transfer path) with `threshold` partitions per transport partition,
/// into `us`; rank 1 checks every element it received.
int partitioned_us(Rank& k, weftPartComm_t pc, int G, int threshold, int tag, const double* a, const double* b,
                   double* c, double* us) {
  const int r = k.rank;
  const uint64_t n = static_cast<uint64_t>(G) * kThreads, bytes = n * 8;
  if (r == 1) OK(cudaMemset(c, 0xA5, bytes));  // poison: only a delivery writes it
  weftPrequest_t q = nullptr;
  if (r == 0) OK(weftPsendInit(c, G, kThreads, weftFloat64, 1, tag, pc, &q));
  else OK(weftPrecvInit(c, G, kThreads, weftFloat64, 0, tag, pc, &q));
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  if (r == 0) OK(weftPdevRequestCreate(q, threshold, &d, &dh));
  OK(weftPstart(q));
  OK(weftPbufPrepare(q));  // the first call sets up; not timed
  PsendDeviceHandle h{};
  if (r == 0) OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
  if (r == 0) vadd_pready<<<G, kThreads, 0, k.stream>>>(a, b, c, h);
  OK(weftPwait(q));
  OK(cudaStreamSynchronize(k.stream));
  if (barrier(k)) return 1;
  const double t0 = now_us();
  for (int it = 0; it < kIters; ++it) {
    OK(weftPstart(q));
    OK(weftPbufPrepare(q));
    if (r == 0) vadd_pready<<<G, kThreads, 0, k.stream>>>(a, b, c, h);
    OK(weftPwait(q));
  }
  OK(cudaStreamSynchronize(k.stream));
  *us = (now_us() - t0) / kIters;
  if (r == 1) {  // the data: a[i] + b[i] = 3 + 2 (i % 97)
    std::vector<double> got(n);
    OK(cudaMemcpy(got.data(), c, bytes, cudaMemcpyDeviceToHost));
    const long wrong = wrong_sums(got);
    if (wrong) std::printf("# grid %d: %ld wrong elements received\n", G, wrong);
  }
  if (d) OK(weftPdevRequestFree(d));
  OK(weftPrequestFree(q));
  return 0;
}

/// Rank 0 produces and sends, rank 1 receives; rank 0 prints.
int goodput(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  const uint64_t max_n = static_cast<uint64_t>(*std::max_element(g_grids.begin(), g_grids.end())) * kThreads;
  double *a, *b, *c;
  OK(cudaMalloc(&a, max_n * 8));
  OK(cudaMalloc(&b, max_n * 8));
  OK(cudaMalloc(&c, max_n * 8));
  if (fill_inputs(k, a, b, max_n)) return 1;
  weftPartComm_t pc_proxy = nullptr;
  OK(weftPartCommCreateWithPath(k.comm, weftPartPathProxy, &pc_proxy));
  const char* en = std::getenv("WEFT_EMULATE_NODES");
  const bool nodes = en != nullptr && std::atoi(en) > 1;
  const char* st = std::getenv("WEFT_PART_STAGE");
  const bool forced = st != nullptr && st[0] == '1';
  if (r == 0)
    std::printf("# goodput, rank 0 -> rank 1%s; %d iterations each, per-iteration mean of start, pbuf_prepare, "
                "kernel, wait\n"
                "# trad: kernel, synchronize, weftSend; part: kernel-copy path, one transport partition (threshold = "
                "blocks: paper 002's best within a node); part1: kernel-copy path, threshold 1 (a flag per block); "
                "prox: progression-engine path, threshold ceil(blocks / 32) (flags to a host thread, %s); sp_*: "
                "trad_us / *_us\n"
                "%8s %12s %12s %12s %12s %12s %10s %8s %8s %8s\n",
                k.shared_gpu ? " (both ranks share one GPU: correctness, not speed)" : "", kIters,
                !nodes ? "copy-engine puts within the host"
                : forced ? "2 emulated nodes: UCX puts staged through page-locked memory (WEFT_PART_STAGE=1)"
                         : "2 emulated nodes: UCX puts, staged through page-locked memory unless UCX registers GPU memory",
                "blocks", "bytes", "trad_us", "part_us", "part1_us", "prox_us", "part_GB/s", "sp_part", "sp_part1",
                "sp_prox");
  for (int G : g_grids) {
    const uint64_t n = static_cast<uint64_t>(G) * kThreads, bytes = n * 8;
    // Traditional: kernel, synchronize, send.
    if (barrier(k)) return 1;
    double t0 = now_us();
    for (int it = 0; it < kIters; ++it) {
      if (r == 0) {
        vadd<<<G, kThreads, 0, k.stream>>>(a, b, c);
        OK(cudaStreamSynchronize(k.stream));
        OK(weftSend(c, n, weftFloat64, 1, k.comm, reinterpret_cast<weftStream_t>(k.stream)));
      } else {
        OK(weftRecv(c, n, weftFloat64, 0, k.comm, reinterpret_cast<weftStream_t>(k.stream)));
      }
      OK(cudaStreamSynchronize(k.stream));
    }
    const double trad = (now_us() - t0) / kIters;
    // Partitioned: one partition per block, block-granularity pready; the kernel copy with
    // one transport partition and with one per block, then the progression engine.
    double part = 0, part1 = 0, prox = 0;
    if (partitioned_us(k, k.pc, G, G, G, a, b, c, &part) || partitioned_us(k, k.pc, G, 1, 1000000 + G, a, b, c, &part1) ||
        partitioned_us(k, pc_proxy, G, (G + 31) / 32, G, a, b, c, &prox))
      return 1;
    if (r == 0)
      std::printf("%8d %12llu %12.1f %12.1f %12.1f %12.1f %10.2f %8.2f %8.2f %8.2f\n", G, (unsigned long long)bytes,
                  trad, part, part1, prox, bytes / part / 1e3, trad / part, trad / part1, trad / prox);
  }
  if (barrier(k)) return 1;  // every rank has freed its requests
  OK(weftPartCommDestroy(pc_proxy));
  return close_rank(k);
}

int pready_cost(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  double* buf;
  OK(cudaMalloc(&buf, kThreads * 8));
  cudaEvent_t e0, e1;
  OK(cudaEventCreate(&e0));
  OK(cudaEventCreate(&e1));
  if (r == 0)
    std::printf("# pready cost by granularity: one block of T threads, 8 B each, kernel time (us), mean of %d%s\n"
                "%6s %10s %10s %10s\n", kIters, k.shared_gpu ? " (ranks share one GPU)" : "", "T", "thread", "warp", "block");
  int tag = 100000;
  for (int T : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}) {
    double us[3] = {0, 0, 0};
    for (int gran = 0; gran < 3; ++gran) {
      if (gran == 1 && T < 32) continue;
      const int parts = gran == 0 ? T : gran == 1 ? T / 32 : 1;
      const int per = T / parts;
      weftPrequest_t q = nullptr;
      ++tag;
      if (r == 0) OK(weftPsendInit(buf, parts, per, weftFloat64, 1, tag, k.pc, &q));
      else OK(weftPrecvInit(buf, parts, per, weftFloat64, 0, tag, k.pc, &q));
      weftPdevRequest_t d = nullptr;
      const void* dh = nullptr;
      if (r == 0) OK(weftPdevRequestCreate(q, 1, &d, &dh));
      PsendDeviceHandle h{};
      float total = 0;
      for (int it = 0; it <= kIters; ++it) {
        OK(weftPstart(q));
        OK(weftPbufPrepare(q));
        if (r == 0) {
          if (it == 0) OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
          OK(cudaEventRecord(e0, k.stream));
          pready_gran<<<1, T, 0, k.stream>>>(h, gran);
          OK(cudaEventRecord(e1, k.stream));
        }
        OK(weftPwait(q));
        if (r == 0) {
          OK(cudaEventSynchronize(e1));
          float ms = 0;
          OK(cudaEventElapsedTime(&ms, e0, e1));
          if (it > 0) total += ms;  // the first is a warm-up
        }
      }
      us[gran] = total * 1000.0 / kIters;
      if (d) OK(weftPdevRequestFree(d));
      OK(weftPrequestFree(q));
    }
    if (r == 0) {
      if (T < 32) std::printf("%6d %10.2f %10s %10.2f\n", T, us[0], "-", us[2]);
      else std::printf("%6d %10.2f %10.2f %10.2f\n", T, us[0], us[1], us[2]);
    }
  }
  return close_rank(k);
}

int overheads(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  double* buf;
  OK(cudaMalloc(&buf, 1 << 20));
  double t0 = now_us();
  weftPrequest_t q = nullptr;
  if (r == 0) OK(weftPsendInit(buf, 64, 1024, weftFloat64, 1, 7, k.pc, &q));
  else OK(weftPrecvInit(buf, 64, 1024, weftFloat64, 0, 7, k.pc, &q));
  const double init = now_us() - t0;
  t0 = now_us();
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  if (r == 0) OK(weftPdevRequestCreate(q, 1, &d, &dh));
  const double create = now_us() - t0;
  // The rounds below use host pready, which a request with a device request refuses.
  if (d) OK(weftPdevRequestFree(d));
  d = nullptr;
  OK(weftPstart(q));
  t0 = now_us();
  OK(weftPbufPrepare(q));
  const double first = now_us() - t0;
  if (r == 0) for (int p = 0; p < 64; ++p) OK(weftPready(p, q));
  OK(weftPwait(q));
  constexpr int kRounds = 100;
  double sum = 0, sq = 0;
  for (int it = 0; it < kRounds; ++it) {
    OK(weftPstart(q));
    t0 = now_us();
    OK(weftPbufPrepare(q));
    const double t = now_us() - t0;
    sum += t;
    sq += t * t;
    if (r == 0) for (int p = 0; p < 64; ++p) OK(weftPready(p, q));
    OK(weftPwait(q));
  }
  const double mean = sum / kRounds, sd = std::sqrt(std::max(0.0, sq / kRounds - mean * mean));
  OK(weftPrequestFree(q));
  if (r == 0)
    std::printf("# overheads (Table I), rank 0 (sender)%s\n%-34s %10.1f us\n%-34s %10.1f us\n%-34s %10.1f us\n"
                "%-34s %10.1f +- %.1f us (%d calls)\n", k.shared_gpu ? ", ranks share one GPU" : "", "psend_init", init,
                "device request create", create, "pbuf_prepare, first", first, "pbuf_prepare, average", mean, sd, kRounds);
  return close_rank(k);
}

// NCCL through dlopen (as `weft bench` does): the entry points this bench needs.
/// ncclUniqueId: NCCL takes it by value (a 128-byte struct, passed in memory), not as a pointer.
struct NcclId {
  char internal[128];
};
struct Nccl {
  int (*GetUniqueId)(NcclId*) = nullptr;
  int (*CommInitRank)(void**, int, NcclId, int) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, void*, cudaStream_t) = nullptr;
  int (*CommDestroy)(void*) = nullptr;
  const char* (*GetErrorString)(int) = nullptr;  ///< optional
  bool load() {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    GetUniqueId = reinterpret_cast<int (*)(NcclId*)>(dlsym(lib, "ncclGetUniqueId"));
    CommInitRank = reinterpret_cast<int (*)(void**, int, NcclId, int)>(dlsym(lib, "ncclCommInitRank"));
    AllReduce = reinterpret_cast<int (*)(const void*, void*, size_t, int, int, void*, cudaStream_t)>(
        dlsym(lib, "ncclAllReduce"));
    CommDestroy = reinterpret_cast<int (*)(void*)>(dlsym(lib, "ncclCommDestroy"));
    GetErrorString = reinterpret_cast<const char* (*)(int)>(dlsym(lib, "ncclGetErrorString"));
    return GetUniqueId && CommInitRank && AllReduce && CommDestroy;
  }
};

/// NCCL's communicator for the AllReduce column, or null with the reason in `*why` (both
/// ranks agree: a rank whose ncclCommInitRank failed makes both skip the column).
int nccl_open(Rank& k, Nccl& nccl, void** ncomm, std::string* why) {
  *ncomm = nullptr;
  // NCCL refuses two ranks on one device (ncclCommInitRank: ncclInvalidUsage): not tried.
  // Both ranks see the same device count, so they agree.
  if (k.shared_gpu) {
    *why = "the two ranks share one GPU, and NCCL refuses two ranks on one device (weft's rows still run)";
    return 0;
  }
  if (!nccl.load()) {
    *why = "libnccl.so.2 or one of its symbols was not found";
    return 0;
  }
  // The NCCL id travels from rank 0 over weft.
  char* did = nullptr;
  OK(cudaMalloc(&did, 128));
  NcclId hid{};
  if (k.rank == 0) OK(nccl.GetUniqueId(&hid));
  OK(cudaMemcpy(did, &hid, sizeof(hid), cudaMemcpyHostToDevice));
  OK(weftBroadcast(did, did, sizeof(hid), weftUint8, 0, k.comm, reinterpret_cast<weftStream_t>(k.stream)));
  OK(cudaStreamSynchronize(k.stream));
  OK(cudaMemcpy(&hid, did, sizeof(hid), cudaMemcpyDeviceToHost));
  const int rc = nccl.CommInitRank(ncomm, 2, hid, k.rank);
  // Each rank's result in its slot, summed: both learn both.
  int codes[2] = {0, 0};
  codes[k.rank] = rc;
  OK(cudaMemcpy(did, codes, sizeof(codes), cudaMemcpyHostToDevice));
  OK(weftAllReduce(did, did, 2, weftInt32, weftSum, k.comm, reinterpret_cast<weftStream_t>(k.stream)));
  OK(cudaStreamSynchronize(k.stream));
  OK(cudaMemcpy(codes, did, sizeof(codes), cudaMemcpyDeviceToHost));
  OK(cudaFree(did));
  if (codes[0] == 0 && codes[1] == 0) return 0;
  if (rc == 0 && *ncomm) nccl.CommDestroy(*ncomm);
  *ncomm = nullptr;
  auto text = [&](int c) { return std::to_string(c) + (nccl.GetErrorString ? std::string(" (") + nccl.GetErrorString(c) + ")" : ""); };
  *why = "ncclCommInitRank returned " + text(codes[0]) + " on rank 0 and " + text(codes[1]) + " on rank 1";
  return 0;
}

/// The grids allreduce runs: with both ranks on one GPU, only those whose blocks of the two
/// ranks can all be resident at once (every block of a partition waits for the same
/// partition's block on the other rank): at most --max-blocks, by default one block per SM for
/// each rank (SMs / 2), whatever the sharing of an SM between the ranks' kernels allows.
int allreduce_grids(const Rank& k, std::vector<int>* grids) {
  *grids = g_grids;
  if (!k.shared_gpu) return 0;
  int dev = 0, sms = 0;
  OK(cudaGetDevice(&dev));
  OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int cap = g_max_blocks > 0 ? g_max_blocks : std::max(1, sms / 2);
  std::string skipped;
  grids->clear();
  for (int G : g_grids)
    if (G <= cap) grids->push_back(G);
    else skipped += (skipped.empty() ? "" : ",") + std::to_string(G);
  if (!skipped.empty() && k.rank == 0)
    std::printf("# grids %s skipped: the two ranks share one GPU (%d SMs), and a partition's blocks on the two ranks "
                "wait for each other, so both ranks' blocks must be resident at once; largest grid %d blocks "
                "(--max-blocks, default SMs / 2)\n", skipped.c_str(), sms, cap);
  return 0;
}

int allreduce(int r, const weftUniqueId& id) {
  Rank k;
  if (open_rank(r, id, k)) return 1;
  Nccl nccl;
  void* ncomm = nullptr;
  std::string no_nccl;
  if (nccl_open(k, nccl, &ncomm, &no_nccl)) return 1;
  const bool have_nccl = ncomm != nullptr;
  if (!have_nccl && r == 0) std::printf("# NCCL column skipped: %s\n", no_nccl.c_str());
  std::vector<int> grids;
  if (allreduce_grids(k, &grids)) return 1;
  if (grids.empty()) {
    if (r == 0) std::printf("# no grid to run\n");
    return close_rank(k);
  }
  const uint64_t max_n = static_cast<uint64_t>(*std::max_element(grids.begin(), grids.end())) * kThreads;
  double *a, *b, *c;
  OK(cudaMalloc(&a, max_n * 8));
  OK(cudaMalloc(&b, max_n * 8));
  OK(cudaMalloc(&c, max_n * 8));
  fill<<<256, 256, 0, k.stream>>>(a, max_n, 1 + r);
  fill<<<256, 256, 0, k.stream>>>(b, max_n, 2);
  OK(cudaStreamSynchronize(k.stream));
  if (r == 0)
    std::printf("# vector add + AllReduce (float64 sum, 2 ranks)%s; per-iteration mean of %d, start + pbuf_prepare "
                "included\n%8s %12s %14s %14s %8s\n", k.shared_gpu ? ", ranks share one GPU" : "", kIters, "blocks",
                "bytes", "nccl_us", "part_us", "speedup");
  for (int G : grids) {
    if (G < 2) continue;
    const uint64_t n = static_cast<uint64_t>(G) * kThreads;
    double nccl_us = 0;
    if (have_nccl) {
      // Untimed first, as the partitioned side's first call is: NCCL sets up its connections
      // lazily, in the first call of a size class (this loop had no warm-up before, and its
      // first row's mean, 7.6 ms at 8 MiB on 2 x H200 on 2026-11-29, most likely carried that setup).
      for (int it = 0; it < 2; ++it) {
        vadd<<<G, kThreads, 0, k.stream>>>(a, b, c);
        OK(nccl.AllReduce(c, c, n, 8 /* ncclFloat64 */, 0 /* ncclSum */, ncomm, k.stream));
      }
      OK(cudaStreamSynchronize(k.stream));
      if (barrier(k)) return 1;
      const double t0 = now_us();
      for (int it = 0; it < kIters; ++it) {
        vadd<<<G, kThreads, 0, k.stream>>>(a, b, c);
        OK(nccl.AllReduce(c, c, n, 8 /* ncclFloat64 */, 0 /* ncclSum */, ncomm, k.stream));
        OK(cudaStreamSynchronize(k.stream));
      }
      nccl_us = (now_us() - t0) / kIters;
    }
    weftPcoll_t coll = nullptr;
    OK(weftPallreduceInit(c, G, kThreads, weftFloat64, weftSum, G, k.pc, &coll));
    const void* dh = nullptr;
    OK(weftPcollDeviceHandle(coll, &dh));
    PcollDeviceHandle h{};
    OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
    OK(weftPcollStart(coll));
    OK(weftPcollPbufPrepare(coll));  // the first sets up; not timed
    vadd_allreduce<<<G, kThreads, 0, k.stream>>>(a, b, c, h);
    OK(weftPcollWait(coll));
    if (barrier(k)) return 1;
    const double t0 = now_us();
    for (int it = 0; it < kIters; ++it) {
      OK(weftPcollStart(coll));
      OK(weftPcollPbufPrepare(coll));
      vadd_allreduce<<<G, kThreads, 0, k.stream>>>(a, b, c, h);
      OK(weftPcollWait(coll));
    }
    OK(cudaStreamSynchronize(k.stream));
    const double part = (now_us() - t0) / kIters;
    // Check: c = sum over ranks of a + b = (1 + 2 + i%97 * 2) + (2 + 2 + i%97 * 2).
    std::vector<double> got(n);
    OK(cudaMemcpy(got.data(), c, n * 8, cudaMemcpyDeviceToHost));
    long wrong = 0;
    for (uint64_t i = 0; i < n; ++i) wrong += got[i] != 7.0 + 4.0 * static_cast<double>(i % 97);
    if (wrong) std::printf("# rank %d grid %d: %ld wrong elements\n", r, G, wrong);
    OK(weftPcollFree(coll));
    if (r == 0) {
      if (have_nccl)
        std::printf("%8d %12llu %14.1f %14.1f %8.2f\n", G, (unsigned long long)(n * 8), nccl_us, part, nccl_us / part);
      else
        std::printf("%8d %12llu %14s %14.1f %8s\n", G, (unsigned long long)(n * 8), "(skipped)", part, "-");
    }
  }
  if (ncomm) nccl.CommDestroy(ncomm);
  return close_rank(k);
}

}  // namespace partbench

using namespace partbench;

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::printf("usage: %s goodput|pready|overheads|allreduce|trace [--grids a,b,...] [--per-block G] [--rows N] "
                "[--thresholds t,...]\n",
                argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string opt = argv[i];
    if (i + 1 >= argc) {
      std::printf("option %s needs a value\n", opt.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (opt == "--grids") g_grids = parse_list(v);
    else if (opt == "--per-block") g_trace_grid = std::atoi(v);
    else if (opt == "--rows") g_trace_rows = std::atoi(v);
    else if (opt == "--thresholds") g_trace_thresholds = parse_list(v);
    else if (opt == "--max-blocks") g_max_blocks = std::atoi(v);
    else if (opt == "--paths" || opt == "--claims") {
      const bool paths = opt == "--paths";
      std::vector<int>& out = paths ? g_trace_paths : g_trace_claims;
      out.clear();
      for (const std::string& w : split_names(v)) {
        const int x = paths ? (w == "kernel" ? 0 : w == "proxy" ? 1 : -1) : (w == "weft" ? 0 : w == "each-block" ? 1 : -1);
        if (x < 0) {
          std::printf("%s: '%s' is not one of %s\n", opt.c_str(), w.c_str(), paths ? "kernel, proxy" : "weft, each-block");
          return 2;
        }
        out.push_back(x);
      }
    } else {
      std::printf("unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (g_grids.empty() || *std::min_element(g_grids.begin(), g_grids.end()) < 1) {
    std::printf("--grids: every grid must be at least 1 block\n");
    return 2;
  }
  // A wait that cannot end (a collective whose blocks cannot all run) ends inside the process
  // at WEFT_TIMEOUT rather than by a kill, which under CUDA MPS can leave the server refusing
  // every later client (part_bench trace's exit 4 after a killed allreduce).
  setenv("WEFT_TIMEOUT", "20", 0);
  if (cmd == "goodput") return gt::run_ranks(2, goodput, 1200, cmd);
  if (cmd == "pready") return gt::run_ranks(2, pready_cost, 600, cmd);
  if (cmd == "overheads") return gt::run_ranks(2, overheads, 300, cmd);
  if (cmd == "allreduce") return gt::run_ranks(2, allreduce, 1200, cmd);
  if (cmd == "trace") {
    // The host half: every epoch after the first of every request, taken by trace's sink.
    setenv("WEFT_PART_TRACE", std::to_string(kIters).c_str(), 1);
    return gt::run_ranks(2, trace, 600, cmd);
  }
  std::printf("unknown benchmark '%s'\n", cmd.c_str());
  return 2;
}
