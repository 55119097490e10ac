// `weft_part_gpu_tests started` (gpu_part_started): device parrived's started epoch
// (weft/part/common.hpp detail::started), read from host memory once per grid into a device
// started cell, on one GPU without communication. For E epochs the host stores the epoch
// into a host word (page-locked, mapped), as start does, then runs a kernel of 64 blocks of
// 128 threads whose every thread asks for the started epoch 8 times and records each answer
// and its grid's %gridid; epochs alternate between plain launches and replays of one CUDA
// graph (two kernel nodes per replay). Checked: every answer is the epoch of the last store
// (a grid answered from the epoch before would take the last epoch's flags for this one's),
// and no two launches or replays share a %gridid (what the cell's per-grid answer rests on).
// Before the first store every answer is 0 (parrived false) and nothing is cached.
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <vector>

#include "weft/part/common.hpp"

namespace {

constexpr uint32_t kBlocks = 64, kThreads = 128, kCalls = 8;

/// Every thread asks kCalls times; out[0] counts wrong answers, out[1] the grid's number,
/// out[2] the last answer (all per launch slot).
__global__ void ask(uint64_t* cell, const uint64_t* host, const uint64_t* expect, unsigned long long* out) {
  const uint64_t want = *reinterpret_cast<const volatile uint64_t*>(expect);
  for (uint32_t i = 0; i < kCalls; ++i) {
    const uint64_t e = weft::part::detail::started(cell, host);
    if (e != want) atomicAdd(out, 1ull);
    if (blockIdx.x == 0 && threadIdx.x == 0 && i == kCalls - 1) out[2] = e;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) out[1] = weft::part::detail::DeviceStartedMemory::grid();
}

#define SCHECK(cond, ...)                          \
  do {                                             \
    if (!(cond)) {                                 \
      std::printf("gpu_part_started: FAILED: ");   \
      std::printf(__VA_ARGS__);                    \
      std::printf("\n");                           \
      return 1;                                    \
    }                                              \
  } while (0)
#define SCUDA(call) SCHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

}  // namespace

int started_grids(long long epochs) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("skipped: no GPU\n");
    return 77;
  }
  uint64_t *host = nullptr, *host_dev = nullptr, *expect = nullptr, *expect_dev = nullptr, *cell = nullptr;
  unsigned long long* out = nullptr;  // [slot][3]: slot 0 plain launches, slots 1 and 2 the graph's nodes
  SCUDA(cudaHostAlloc(reinterpret_cast<void**>(&host), 2 * sizeof(uint64_t), cudaHostAllocMapped));
  host[0] = 0;
  host[1] = 0;
  SCUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host, 0));
  expect = host + 1;
  expect_dev = host_dev + 1;
  SCUDA(cudaMalloc(&cell, weft::part::kCellWords * sizeof(uint64_t)));
  uint64_t init[weft::part::kCellWords];
  for (uint32_t w = 0; w < weft::part::kCellWords; ++w) init[w] = weft::part::cell_initial(w);
  SCUDA(cudaMemcpy(cell, init, sizeof(init), cudaMemcpyHostToDevice));
  SCUDA(cudaMalloc(&out, 3 * 3 * sizeof(unsigned long long)));
  cudaStream_t s;
  SCUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The graph: two kernels one after the other, each its own launch slot.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  SCUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  ask<<<kBlocks, kThreads, 0, s>>>(cell, host_dev, expect_dev, out + 3);
  ask<<<kBlocks, kThreads, 0, s>>>(cell, host_dev, expect_dev, out + 6);
  SCUDA(cudaStreamEndCapture(s, &graph));
  SCUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::set<unsigned long long> grids;
  unsigned long long launches = 0;
  for (long long e = 0; e <= epochs; ++e) {
    // e = 0: before the first start (the host word holds 0: every answer 0).
    __atomic_store_n(&host[0], static_cast<uint64_t>(e), __ATOMIC_RELEASE);  // start
    *expect = static_cast<uint64_t>(e);
    SCUDA(cudaMemsetAsync(out, 0, 3 * 3 * sizeof(unsigned long long), s));
    const bool graphed = e % 2 == 1;
    if (graphed) SCUDA(cudaGraphLaunch(exec, s));
    else ask<<<kBlocks, kThreads, 0, s>>>(cell, host_dev, expect_dev, out);
    SCUDA(cudaGetLastError());
    SCUDA(cudaStreamSynchronize(s));
    unsigned long long r[9];
    SCUDA(cudaMemcpy(r, out, sizeof(r), cudaMemcpyDeviceToHost));
    for (int slot = graphed ? 1 : 0; slot < (graphed ? 3 : 1); ++slot) {
      const unsigned long long* o = r + 3 * slot;
      SCHECK(o[0] == 0, "epoch %lld (%s, kernel %d): %llu of %u answers were not the epoch (the last: %llu)", e,
             graphed ? "graph replay" : "launch", slot, o[0], kBlocks * kThreads * kCalls, o[2]);
      SCHECK(grids.insert(o[1]).second,
             "epoch %lld (%s, kernel %d): %%gridid %llu repeats an earlier launch's (device parrived's per-grid "
             "started epoch would be stale)",
             e, graphed ? "graph replay" : "launch", slot, o[1]);
      ++launches;
    }
    uint64_t c[weft::part::kCellWords];
    SCUDA(cudaMemcpy(c, cell, sizeof(c), cudaMemcpyDeviceToHost));
    if (e == 0)
      SCHECK(c[weft::part::kCellPublished] == weft::part::kNoGrid && c[weft::part::kCellEpoch] == 0,
             "before the first start the cell cached something (published %llu, epoch %llu)",
             static_cast<unsigned long long>(c[weft::part::kCellPublished]),
             static_cast<unsigned long long>(c[weft::part::kCellEpoch]));
    else
      SCHECK(c[weft::part::kCellEpoch] == static_cast<uint64_t>(e), "epoch %lld: the cell holds epoch %llu", e,
             static_cast<unsigned long long>(c[weft::part::kCellEpoch]));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(out);
  cudaFree(cell);
  cudaFreeHost(host);
  std::printf("gpu_part_started: %lld epochs, %llu launches and graph replays, %llu distinct grids, every answer right\n",
              epochs, launches, static_cast<unsigned long long>(grids.size()));
  return 0;
}
