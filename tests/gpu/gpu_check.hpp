// The GPU tests' checks: a failed CUDA or weft call prints where and why, and the rank's
// function returns 1 (a failure).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>

#include "weft/weft.h"

#define CUDA_OK(call)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (call);                                                                \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));   \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

#define WEFT_OK(call)                                                                       \
  do {                                                                                      \
    weftResult_t r_ = (call);                                                               \
    if (r_ != weftSuccess) {                                                                \
      std::printf("%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, weftGetErrorString(r_), \
                  weftGetLastError(nullptr));                                               \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)
