// Shared by the partitioned GPU tests (part_tests.cu: p2p, coll, misuse and main;
// part_reuse.cu: reuse): the checks (a failed CUDA or weft call prints where and why, and the
// rank's function returns 1), the random data, the producing kernels, a rank's communicator
// and partitioned context, and the diagnosis of a send wait that failed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "util/launcher.hpp"
#include "weft/partitioned.h"
#include "weft/partitioned.hpp"
#include "weft/weft.h"

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      std::printf("rank %d: %s:%d: ", g_rank, __FILE__, __LINE__); \
      std::printf(__VA_ARGS__);                            \
      std::printf("\n");                                   \
      return 1;                                            \
    }                                                      \
  } while (0)
#define CUDA_OK(call) CHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))
#define WEFT_OK(call)                                                                   \
  do {                                                                                  \
    weftResult_t r_ = (call);                                                           \
    CHECK(r_ == weftSuccess, "%s: %s: %s", #call, weftGetErrorString(r_), weftGetLastError(nullptr)); \
  } while (0)
/// Expects `call` to fail with `code` and a message containing `part`.
#define WEFT_FAILS(call, code, part)                                                    \
  do {                                                                                  \
    weftResult_t r_ = (call);                                                           \
    const char* m_ = weftGetLastError(nullptr);                                         \
    CHECK(r_ == (code) && std::strstr(m_, part) != nullptr, "%s: got %s (%s), expected %s with '%s'", #call, \
          weftGetErrorString(r_), m_, weftGetErrorString(code), part);                  \
    std::printf("rank %d: as expected: %s\n", g_rank, m_);                              \
  } while (0)

namespace gt = weft::gputest;

namespace parttest {

using weft::part::PcollDeviceHandle;
using weft::part::PrecvDeviceHandle;
using weft::part::PsendDeviceHandle;

inline int g_rank = 0;
inline weftPartPath_t g_path = weftPartPathKernel;
/// Whether send handles must be on the progression-engine path.
inline bool expect_proxy() {
  if (g_path != weftPartPathDefault) return g_path == weftPartPathProxy;
  const char* v = std::getenv("WEFT_PART_PATH");
  return v != nullptr && std::string(v) == "proxy";
}
inline const char* path_name() {
  return g_path == weftPartPathProxy ? "proxy" : g_path == weftPartPathKernel ? "kernel" : "WEFT_PART_PATH";
}

__host__ __device__ inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__host__ __device__ inline uint64_t value(uint64_t seed, uint64_t i) { return mix(seed * 0x100000001b3ull + i); }

template <typename T>
__host__ __device__ T gen(int rank, uint64_t epoch, uint64_t i) {
  return static_cast<T>(static_cast<int64_t>(value(epoch * 1000 + static_cast<uint64_t>(rank), i) % 2001) - 1000);
}

struct Comm {
  weftComm_t comm = nullptr;
  weftPartComm_t pc = nullptr;
  cudaStream_t stream = nullptr;
  cudaStream_t stream2 = nullptr;  ///< for a consumer kernel that runs alongside the producer
};

inline int open_comm(int nranks, int rank, const weftUniqueId& id, Comm& c) {
  g_rank = rank;
  WEFT_OK(weftCommInitRank(&c.comm, nranks, id, rank));
  // Across emulated nodes a UCX without CUDA support is no reason to skip: the engines stage
  // through page-locked memory (WEFT_PART_STAGE=1 forces it).
  WEFT_OK(weftPartCommCreateWithPath(c.comm, g_path, &c.pc));
  CUDA_OK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&c.stream2, cudaStreamNonBlocking));
  return 0;
}

/// Every rank reaches this point (an AllReduce of one int, synchronized).
inline int barrier(Comm& c, int* scratch) {
  WEFT_OK(weftAllReduce(scratch, scratch, 1, weftInt32, weftSum, c.comm, reinterpret_cast<weftStream_t>(c.stream)));
  CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), 60), "barrier did not finish");
  return 0;
}

inline int close_comm(Comm& c, int* scratch) {
  if (barrier(c, scratch)) return 1;
  WEFT_OK(weftPartCommDestroy(c.pc));
  WEFT_OK(weftCommDestroy(c.comm));
  return 0;
}

/// WEFT_PART_TEST_TRACE=1: a line per case and epoch (launch, each wait with its time).
inline bool trace() {
  static const bool on = [] {
    const char* v = std::getenv("WEFT_PART_TEST_TRACE");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return on;
}

inline double seconds_since(const timespec& t0) {
  timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return static_cast<double>(t1.tv_sec - t0.tv_sec) + 1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
}

/// After a send wait failed: what the sender's device state says about epoch e, read on a
/// stream of its own into pinned memory allocated beforehand (`pinned`, at least
/// partitions + transports + kCtlWords words), so that a producer that never ran (0 claimed)
/// and a counting fault (all claimed, counters short) read differently.
inline void explain_send(const PsendDeviceHandle& h, uint64_t e, cudaStream_t producer, cudaStream_t consumer,
                  uint64_t* pinned) {
  auto state = [](cudaStream_t s) {
    const cudaError_t q = cudaStreamQuery(s);
    return q == cudaSuccess ? "finished" : q == cudaErrorNotReady ? "still queued or running" : cudaGetErrorString(q);
  };
  std::printf("rank %d: diagnosis, epoch %llu: producer kernel %s, consumer kernel %s\n", g_rank,
              (unsigned long long)e, state(producer), state(consumer));
  const uint32_t U = h.partitions, T = (U + h.threshold - 1) / h.threshold;
  uint64_t *stamps = pinned, *counters = pinned + U, *ctl = pinned + U + T;
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return;
  cudaMemcpyAsync(stamps, h.stamps, U * 8, cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(counters, h.counters, T * 8, cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(ctl, h.ctl, weft::part::kCtlWords * 8, cudaMemcpyDeviceToHost, s);
  if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(s), 10)) {
    std::printf("rank %d: diagnosis: reading the device state did not finish in 10 s\n", g_rank);
    return;
  }
  uint32_t claimed = 0, complete = 0;
  for (uint32_t p = 0; p < U; ++p) claimed += stamps[p] >= e;  // a stamp counts a partition's preadies
  for (uint32_t t = 0; t < T; ++t) complete += counters[t] >= weft::part::transport_size(U, h.threshold, t) * e;
  std::printf("rank %d: diagnosis: %u of %u partitions claimed, %u of %u transport partitions counted complete "
              "(threshold %u), device sent counter %llu, prepared-epoch cache %llu (claim reader %llu, checked %llu)\n",
              g_rank, claimed, U, complete, T, h.threshold, (unsigned long long)ctl[weft::part::kCtlSent],
              (unsigned long long)ctl[weft::part::kCtlEpoch], (unsigned long long)ctl[weft::part::kCtlReader],
              (unsigned long long)ctl[weft::part::kCtlChecked]);
  if (h.ready != nullptr) {  // progression-engine path: the flags the engine polls (host-mapped)
    uint32_t marked = 0;
    for (uint32_t t = 0; t < T; ++t) marked += reinterpret_cast<const volatile uint64_t*>(h.ready)[t] == e;
    std::printf("rank %d: diagnosis: %u of %u transport partitions marked ready for the progression engine\n",
                g_rank, marked, T);
  }
  cudaStreamDestroy(s);
}

/// The reuse subcommand (part_reuse.cu): `epochs` sets how many epochs each case runs.
int reuse(int nranks, int rank, const weftUniqueId& id, uint64_t epochs);

}  // namespace parttest

// Kernels: one copy per translation unit.
namespace {
using namespace parttest;

/// Each thread writes its 8-byte element, then readies at `gran` (0 thread, 1 warp, 2 block):
/// partitions of 1 element, 32, or blockDim elements.
__global__ void produce(PsendDeviceHandle h, uint64_t* buf, uint64_t seed, int gran) {
  const uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  buf[i] = value(seed, i);
  if (gran == 0) h.pready_thread(static_cast<uint32_t>(i));
  else if (gran == 1) h.pready_warp(static_cast<uint32_t>(i / 32));
  else h.pready_block(blockIdx.x);
}

/// Block u writes partition u (unless `write` is 0), then runs the collective for it and
/// checks that parrived says so.
template <typename T>
__global__ void coll_kernel(PcollDeviceHandle h, T* buf, int rank, uint64_t epoch, int write, int* not_arrived) {
  const uint32_t u = blockIdx.x;
  if (write)
    for (uint64_t i = threadIdx.x; i < h.partition_elems; i += blockDim.x) {
      const uint64_t g = u * h.partition_elems + i;
      buf[g] = gen<T>(rank, epoch, g);
    }
  h.pready_block(u);
  if (threadIdx.x == 0 && !h.parrived(u)) atomicAdd(not_arrived, 1);
}

}  // namespace
