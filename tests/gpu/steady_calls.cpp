// Steady-state collectives make no host allocation (issue 25): on each of 2 ranks, after a
// warm-up call of each kind, AllReduce calls of 1,024 floats (the one-shot kernel) and of
// 1 Mi floats (a cached plan on the interpreter) are made while this thread counts its calls
// of operator new: there must be none. Every call's output is poisoned first and the last
// one of each kind is checked element by element against the host reference on random data.
// Exit codes as every GPU test: 0 pass, 1 fail, 77 skipped (no GPU).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "gpu_check.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "util/launcher.hpp"
#include "weft/weft.h"

#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {
thread_local bool t_counting = false;
thread_local size_t t_news = 0;
}  // namespace

void* operator new(size_t n) {
  if (t_counting) ++t_news;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

namespace gt = weft::gputest;
namespace host = weft::host;

constexpr int kRanks = 2;
constexpr int kCalls = 200;

/// kCalls AllReduce calls of `count` floats, counted; then the last result checked.
int steady(weftComm_t comm, cudaStream_t st, int rank, size_t count, const char* what) {
  const size_t bytes = count * sizeof(float);
  std::vector<std::vector<uint8_t>> sends(kRanks);
  for (int q = 0; q < kRanks; ++q) {
    sends[static_cast<size_t>(q)].resize(bytes);
    host::fill_random(weftFloat32, weftSum, sends[static_cast<size_t>(q)].data(), count, 7000 + static_cast<uint64_t>(q), 4);
  }
  const std::vector<uint8_t> want =
      host::reference_for_rank(weft::Collective::AllReduce, weftFloat32, weftSum, 0, count, rank, sends, {}, 4);
  std::vector<uint8_t> got(bytes);
  float *dsend = nullptr, *drecv = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dsend), bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&drecv), bytes));
  CUDA_OK(cudaMemcpy(dsend, sends[static_cast<size_t>(rank)].data(), bytes, cudaMemcpyHostToDevice));
  auto ws = reinterpret_cast<weftStream_t>(st);
  // The warm-up builds, checks and uploads the plan (if any) and everything else first use makes.
  WEFT_OK(weftAllReduce(dsend, drecv, count, weftFloat32, weftSum, comm, ws));
  if (!gt::sync_bounded(ws, 60)) {
    std::printf("FAIL rank %d: %s warm-up did not finish\n", rank, what);
    return 1;
  }
  t_news = 0;
  t_counting = true;
  for (int i = 0; i < kCalls; ++i) {
    CUDA_OK(cudaMemsetAsync(drecv, 0xFF, bytes, st));
    WEFT_OK(weftAllReduce(dsend, drecv, count, weftFloat32, weftSum, comm, ws));
  }
  t_counting = false;
  const size_t news = t_news;
  if (!gt::sync_bounded(ws, 120)) {
    std::printf("FAIL rank %d: %s calls did not finish\n", rank, what);
    return 1;
  }
  CUDA_OK(cudaMemcpy(got.data(), drecv, bytes, cudaMemcpyDeviceToHost));
  cudaFree(dsend);
  cudaFree(drecv);
  int failures = 0;
  if (std::memcmp(got.data(), want.data(), bytes) != 0) {
    ++failures;
    std::printf("FAIL rank %d: %s: the last AllReduce of %zu floats is wrong\n", rank, what, count);
  }
  if (news != 0) {
    ++failures;
    std::printf("FAIL rank %d: %s: %zu calls of operator new in %d AllReduce calls (%.2f per call)\n", rank, what, news,
                kCalls, static_cast<double>(news) / kCalls);
  }
  std::printf("rank %d: %s: %d calls, %zu allocations, result %s\n", rank, what, kCalls, news,
              failures ? "FAILED" : "right");
  return failures;
}

int rank_main(int rank, const weftUniqueId& id) {
  weftComm_t comm = nullptr;
  WEFT_OK(weftCommInitRank(&comm, kRanks, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int failures = steady(comm, st, rank, 1024, "one-shot kernel (4 KiB)");
  failures += steady(comm, st, rank, size_t(1) << 20, "cached plan (4 MiB)");
  WEFT_OK(weftCommDestroy(comm));
  CUDA_OK(cudaStreamDestroy(st));
  return failures ? 1 : 0;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  return gt::run_ranks(kRanks, rank_main, 300, "steady_calls");
}
