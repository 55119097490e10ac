// Helpers of the NCCL library's GPU tests (nccl_api_gpu_tests.cpp, nccl_window_gpu_tests.cpp):
// two ranks of one process, rank r on device r % (devices present).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "weft/nccl.h"

namespace nccl_gpu {

constexpr int kRanks = 2;

// Rank r runs on device r % (devices present): on one GPU both ranks share it, which checks
// correctness only (docs/testing.md). Set by main().
inline int g_ndev = 1;
inline int dev_of(int rank) { return rank % g_ndev; }

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x
#define NCCL_OK(x) ASSERT_EQ((x), ncclSuccess) << #x << ": " << ncclGetLastError(nullptr)

struct Comms {
  ncclComm_t c[kRanks] = {};
  cudaStream_t s[kRanks] = {};
  void init_all() {
    int devs[kRanks];
    for (int r = 0; r < kRanks; ++r) devs[r] = dev_of(r);
    ASSERT_EQ(ncclCommInitAll(c, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(cudaSetDevice(dev_of(r)), cudaSuccess);
      ASSERT_EQ(cudaStreamCreate(&s[r]), cudaSuccess);
    }
  }
  void sync() {
    for (int r = 0; r < kRanks; ++r) {
      cudaSetDevice(dev_of(r));
      ASSERT_EQ(cudaStreamSynchronize(s[r]), cudaSuccess);
    }
  }
  ~Comms() {
    for (int r = 0; r < kRanks; ++r) {
      if (s[r]) cudaStreamDestroy(s[r]);
      if (c[r]) ncclCommDestroy(c[r]);
    }
  }
};

inline std::vector<float> pattern(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i % 13) + rank + 1);
  return v;
}

inline void* to_device(int dev, const void* host, size_t bytes) {
  cudaSetDevice(dev_of(dev));
  void* p = nullptr;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) return nullptr;
  cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
  return p;
}

template <typename T>
std::vector<T> to_host(int dev, const void* p, size_t n) {
  std::vector<T> v(n);
  cudaSetDevice(dev_of(dev));
  cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

}  // namespace nccl_gpu
