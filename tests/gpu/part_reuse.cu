// weft_part_gpu_tests reuse (part_tests.cu lists every subcommand): many epochs back to back
// on one request pair (block, warp and thread granularity) and on one partitioned AllReduce,
// every element of every epoch checked on the device.
//
// The loop of each epoch, on every rank (each sends to rank + 1 and receives from rank - 1):
//   1. poison the receive buffer on the checking stream and wait for that stream: the check of
//      the last epoch has ended. It must end before the next start, which raises the epoch its
//      device parrived compares with (arrived_in, weft/part/common.hpp): a check still polling
//      after the start would wait for data that cannot come before this rank is ready, and
//      this rank waits for the check (the hang of the 2026-11-28 round).
//   2. start both requests, pbuf_prepare both, launch the producer and the check, wait both.
// Bounded: an epoch whose check takes longer than kEpochSeconds fails naming the epoch and
// the partition; host waits end at WEFT_TIMEOUT (20 s unless set). A line per case, and
// progress at each quarter.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "part_common.cuh"

using namespace parttest;

namespace {

constexpr double kEpochSeconds = 10;

/// Host-mapped: the first epoch whose check gave up waiting for a partition, and which.
struct Stall {
  unsigned long long epoch, partition;
};

/// Reuse check: block x waits (up to `wait_ns`) for its partitions, then compares each element
/// of the receive buffer with value(seed, i); counts the elements checked and those that
/// differ, and keeps the first bad index. A partition that never arrives is recorded in
/// `stall` (host-mapped), and the other blocks stop waiting.
__global__ void check_epoch(PrecvDeviceHandle h, const uint64_t* dst, uint64_t seed, uint64_t per,
                            unsigned long long* counts, volatile Stall* stall, uint64_t epoch, uint64_t wait_ns) {
  __shared__ unsigned long long s_bad, s_checked;
  __shared__ int s_gave_up;
  if (threadIdx.x == 0) s_bad = s_checked = 0;
  __syncthreads();
  for (uint32_t p = blockIdx.x; p < h.partitions; p += gridDim.x) {
    if (threadIdx.x == 0) {
      s_gave_up = 0;
      const uint64_t t0 = weft::device::globaltimer();
      while (!h.parrived(p))
        if (stall->epoch != 0 || weft::device::globaltimer() - t0 > wait_ns) {
          if (stall->epoch == 0) {
            stall->partition = p;
            __threadfence_system();
            stall->epoch = epoch;
          }
          s_gave_up = 1;
          break;
        }
    }
    __syncthreads();
    if (s_gave_up) break;
    for (uint64_t w = threadIdx.x; w < per; w += blockDim.x) {
      const uint64_t i = p * per + w;
      if (__ldcg(dst + i) != value(seed, i)) {
        atomicAdd(&s_bad, 1ull);
        atomicCAS(&counts[2], ~0ull, i);
      }
      atomicAdd(&s_checked, 1ull);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(&counts[0], s_checked);
    atomicAdd(&counts[1], s_bad);
  }
}

/// Reuse check of an AllReduce (sum over ranks of gen): counts[0] checked, [1] wrong, [2] first wrong.
template <typename T>
__global__ void check_sum(const T* buf, uint64_t n, int nranks, uint64_t epoch, unsigned long long* counts) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    T want = 0;
    for (int r = 0; r < nranks; ++r) want += gen<T>(r, epoch, i);
    if (buf[i] != want) {
      atomicAdd(&counts[1], 1ull);
      atomicCAS(&counts[2], ~0ull, i);
    }
    atomicAdd(&counts[0], 1ull);
  }
}

/// What every case shares: the rank's streams, the device counts, the host-mapped stall record.
struct Reuse {
  Comm c;
  int nranks = 0, rank = 0;
  unsigned long long* counts = nullptr;  ///< device: checked, wrong, first wrong
  Stall* stall = nullptr;                ///< host-mapped (stall_dev on the device)
  Stall* stall_dev = nullptr;
  timespec t0{};
  /// A line at each quarter of a case's epochs.
  void progress(const char* what, uint64_t e, uint64_t epochs) const {
    if (epochs >= 4 && e % (epochs / 4) == 0 && e != epochs)
      std::printf("rank %d: reuse %s: epoch %llu of %llu, %.2f s\n", rank, what, (unsigned long long)e,
                  (unsigned long long)epochs, seconds_since(t0));
  }
};

/// Step 1 of an epoch: the last epoch's check has ended (and named no stall); `dst` poisoned.
int end_check(Reuse& R, const char* what, uint64_t e, uint64_t* dst, uint64_t bytes) {
  Comm& c = R.c;
  CUDA_OK(cudaMemsetAsync(dst, 0xA5, bytes, c.stream2));
  CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream2), kEpochSeconds),
        "reuse %s: the check of epoch %llu did not end within %.0f s", what, (unsigned long long)(e - 1), kEpochSeconds);
  const volatile Stall* st = R.stall;
  CHECK(st->epoch == 0, "reuse %s: epoch %llu: device parrived never saw partition %llu within %.0f s", what,
        st->epoch, st->partition, kEpochSeconds);
  return 0;
}

/// One epoch of reuse_p2p (steps 1 and 2 above).
int p2p_epoch(Reuse& R, const char* what, uint64_t e, weftPrequest_t s, weftPrequest_t r, PrecvDeviceHandle rh,
              const void* dh, PsendDeviceHandle& sh, uint64_t* src, uint64_t* dst, int gran, int tag,
              uint32_t blocks, uint32_t threads, uint64_t per) {
  Comm& c = R.c;
  if (end_check(R, what, e, dst, uint64_t{blocks} * threads * 8)) return 1;
  WEFT_OK(weftPstart(s));
  WEFT_OK(weftPstart(r));
  weftPrequest_t both[2] = {s, r};
  WEFT_OK(weftPbufPrepareAll(2, both));
  if (e == 1) CUDA_OK(cudaMemcpy(&sh, dh, sizeof(sh), cudaMemcpyDeviceToHost));
  const int prev = (R.rank + R.nranks - 1) % R.nranks;
  const uint64_t seed = (static_cast<uint64_t>(R.rank) << 40) | (static_cast<uint64_t>(tag) << 24) | e;
  const uint64_t pseed = (static_cast<uint64_t>(prev) << 40) | (static_cast<uint64_t>(tag) << 24) | e;
  produce<<<blocks, threads, 0, c.stream>>>(sh, src, seed, gran);
  check_epoch<<<16, 256, 0, c.stream2>>>(rh, dst, pseed, per, R.counts, R.stall_dev, e,
                                          static_cast<uint64_t>(kEpochSeconds * 1e9));
  CUDA_OK(cudaGetLastError());
  const weftResult_t sw = weftPwait(s);
  if (sw != weftSuccess) {
    uint64_t* pinned = nullptr;  // explain_send's: stamps, counters, control words
    if (cudaMallocHost(&pinned, (2 * sh.partitions + weft::part::kCtlWords) * 8) == cudaSuccess) {
      explain_send(sh, e, c.stream, c.stream2, pinned);
      cudaFreeHost(pinned);
    }
  }
  WEFT_OK(sw);
  WEFT_OK(weftPwait(r));
  return 0;
}

/// One send and one receive request (ring neighbours) run `epochs` epochs back to back at
/// granularity `gran` with `threshold`; every element of every epoch is checked on the device.
int reuse_p2p(Reuse& R, int gran, uint32_t threshold, uint64_t epochs, int tag) {
  Comm& c = R.c;
  const int rank = R.rank, next = (rank + 1) % R.nranks, prev = (rank + R.nranks - 1) % R.nranks;
  constexpr uint32_t kBlocks = 48, kThreads = 256;
  constexpr uint64_t kElems = kBlocks * kThreads;
  const uint64_t per = gran == 0 ? 1 : gran == 1 ? 32 : kThreads;
  const uint32_t parts = static_cast<uint32_t>(kElems / per);
  char what[96];
  std::snprintf(what, sizeof what, "(%s path) granularity %d threshold %u", path_name(), gran, threshold);
  std::printf("rank %d: reuse %s: %llu epochs of %u partitions\n", rank, what, (unsigned long long)epochs, parts);
  uint64_t *src = nullptr, *dst = nullptr;
  CUDA_OK(cudaMalloc(&src, kElems * 8));
  CUDA_OK(cudaMalloc(&dst, kElems * 8));
  weftPrequest_t s = nullptr, r = nullptr;
  WEFT_OK(weftPsendInit(src, static_cast<int>(parts), per, weftUint64, next, tag, c.pc, &s));
  WEFT_OK(weftPrecvInit(dst, static_cast<int>(parts), per, weftUint64, prev, tag, c.pc, &r));
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  WEFT_OK(weftPdevRequestCreate(s, static_cast<int>(threshold), &d, &dh));
  PrecvDeviceHandle rh;
  WEFT_OK(weftPrecvDeviceHandle(r, &rh, sizeof(rh)));
  PsendDeviceHandle sh{};
  const unsigned long long init[3] = {0, 0, ~0ull};
  CUDA_OK(cudaMemcpy(R.counts, init, sizeof(init), cudaMemcpyHostToDevice));
  for (uint64_t e = 1; e <= epochs; ++e) {
    if (p2p_epoch(R, what, e, s, r, rh, dh, sh, src, dst, gran, tag, kBlocks, kThreads, per)) {
      std::printf("rank %d: reuse %s: failed in epoch %llu of %llu\n", rank, what, (unsigned long long)e,
                  (unsigned long long)epochs);
      return 1;
    }
    R.progress(what, e, epochs);
  }
  if (end_check(R, what, epochs + 1, dst, kElems * 8)) return 1;
  CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), kEpochSeconds), "the producer did not finish");
  unsigned long long got[3];
  CUDA_OK(cudaMemcpy(got, R.counts, sizeof(got), cudaMemcpyDeviceToHost));
  CHECK(got[0] == epochs * kElems, "reuse %s: %llu elements checked, expected %llu", what, got[0],
        (unsigned long long)(epochs * kElems));
  CHECK(got[1] == 0, "reuse %s: %llu of %llu elements wrong over %llu epochs (first at index %llu of an epoch)", what,
        got[1], got[0], (unsigned long long)epochs, got[2]);
  WEFT_OK(weftPdevRequestFree(d));
  WEFT_OK(weftPrequestFree(s));
  WEFT_OK(weftPrequestFree(r));
  CUDA_OK(cudaFree(src));
  CUDA_OK(cudaFree(dst));
  std::printf("rank %d: reuse %s: %llu epochs on one request pair, all %llu elements right, %.2f s\n", rank, what,
              (unsigned long long)epochs, got[0], seconds_since(R.t0));
  return 0;
}

/// A partitioned AllReduce (int64 sum) run `epochs` epochs back to back, checked on the device.
/// Its kernel calls device parrived, so each epoch's kernel ends before the next start.
int reuse_coll(Reuse& R, uint64_t epochs) {
  Comm& c = R.c;
  const int rank = R.rank;
  constexpr uint32_t parts = 12;
  constexpr uint64_t count = 1000 + 3;
  const uint64_t n = parts * count;
  const char* what = "pallreduce int64 sum";
  std::printf("rank %d: reuse %s: %llu epochs of %u partitions\n", rank, what, (unsigned long long)epochs, parts);
  int64_t* buf = nullptr;
  int* flag = nullptr;
  CUDA_OK(cudaMalloc(&buf, n * sizeof(int64_t)));
  CUDA_OK(cudaMalloc(&flag, sizeof(int)));
  CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
  weftPcoll_t coll = nullptr;
  WEFT_OK(weftPallreduceInit(buf, parts, count, weftInt64, weftSum, 77, c.pc, &coll));
  const void* dh = nullptr;
  WEFT_OK(weftPcollDeviceHandle(coll, &dh));
  PcollDeviceHandle h{};
  const unsigned long long init[3] = {0, 0, ~0ull};
  CUDA_OK(cudaMemcpy(R.counts, init, sizeof(init), cudaMemcpyHostToDevice));
  for (uint64_t e = 1; e <= epochs; ++e) {
    CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), kEpochSeconds),
          "reuse %s: the kernels of epoch %llu did not end within %.0f s", what, (unsigned long long)(e - 1),
          kEpochSeconds);
    CUDA_OK(cudaMemsetAsync(buf, 0xA5, n * sizeof(int64_t), c.stream));  // poison; ordered before the kernel
    WEFT_OK(weftPcollStart(coll));
    WEFT_OK(weftPcollPbufPrepare(coll));
    if (e == 1) CUDA_OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
    coll_kernel<int64_t><<<parts, 256, 0, c.stream>>>(h, buf, rank, e, 1, flag);
    const weftResult_t w = weftPcollWait(coll);
    if (w != weftSuccess)
      std::printf("rank %d: reuse %s: failed in epoch %llu of %llu\n", rank, what, (unsigned long long)e,
                  (unsigned long long)epochs);
    WEFT_OK(w);
    check_sum<int64_t><<<12, 256, 0, c.stream>>>(buf, n, R.nranks, e, R.counts);
    CUDA_OK(cudaGetLastError());
    R.progress(what, e, epochs);
  }
  CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), kEpochSeconds), "the collective kernels did not finish");
  unsigned long long got[3];
  int not_arrived = 0;
  CUDA_OK(cudaMemcpy(got, R.counts, sizeof(got), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&not_arrived, flag, sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(got[0] == epochs * n, "reuse %s: %llu elements checked, expected %llu", what, got[0],
        (unsigned long long)(epochs * n));
  CHECK(got[1] == 0, "reuse %s: %llu of %llu elements wrong over %llu epochs (first at index %llu)", what, got[1],
        got[0], (unsigned long long)epochs, got[2]);
  CHECK(not_arrived == 0, "reuse %s: device parrived false after pready_block %d times", what, not_arrived);
  WEFT_OK(weftPcollFree(coll));
  CUDA_OK(cudaFree(buf));
  CUDA_OK(cudaFree(flag));
  std::printf("rank %d: reuse %s: %llu epochs on one collective, all %llu elements right, %.2f s\n", rank, what,
              (unsigned long long)epochs, got[0], seconds_since(R.t0));
  return 0;
}

}  // namespace

namespace parttest {

int reuse(int nranks, int rank, const weftUniqueId& id, uint64_t epochs) {
  setenv("WEFT_TIMEOUT", "20", 0);  // host waits end in 20 s unless the caller chose
  Reuse R;
  R.nranks = nranks;
  R.rank = rank;
  clock_gettime(CLOCK_MONOTONIC, &R.t0);
  Comm& c = R.c;
  if (int rc = open_comm(nranks, rank, id, c)) return rc;
  cudaFuncAttributes fa;  // loaded now: see p2p (part_tests.cu)
  CUDA_OK(cudaFuncGetAttributes(&fa, produce));
  CUDA_OK(cudaFuncGetAttributes(&fa, check_epoch));
  CUDA_OK(cudaFuncGetAttributes(&fa, coll_kernel<int64_t>));
  CUDA_OK(cudaFuncGetAttributes(&fa, check_sum<int64_t>));
  int* scratch = nullptr;
  CUDA_OK(cudaMalloc(&scratch, sizeof(int)));
  CUDA_OK(cudaMalloc(&R.counts, 3 * sizeof(unsigned long long)));
  CUDA_OK(cudaHostAlloc(reinterpret_cast<void**>(&R.stall), sizeof(Stall), cudaHostAllocMapped));
  *R.stall = Stall{0, 0};
  CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&R.stall_dev), R.stall, 0));
  const uint64_t half = epochs / 2 > 0 ? epochs / 2 : 1;
  if (reuse_p2p(R, 2, 1, epochs, 201)) return 1;
  if (reuse_p2p(R, 1, 3, epochs, 202)) return 1;
  if (reuse_p2p(R, 0, 64, half, 203)) return 1;
  if (barrier(c, scratch)) return 1;
  if (!expect_proxy() && reuse_coll(R, epochs)) return 1;
  CUDA_OK(cudaFreeHost(R.stall));
  CUDA_OK(cudaFree(R.counts));
  return close_comm(c, scratch);
}

}  // namespace parttest
