// The calls `weft bench` times on a GPU (bench_gpu.cpp), shared with `weft tune`
// (tune_gpu.cpp): one rank's buffers and stream, a call of weft or NCCL, its timing and its
// check against the host reference. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cli/bench_gpu.hpp"
#include "ir/algorithm.hpp"
#include "weft/weft.h"

namespace weft::cli {

struct Nccl;  ///< NCCL's entry points, loaded with dlopen (bench_gpu.cpp)

enum class Lib { Weft, Nccl };

/// One rank's side of a benchmark.
struct RankCtx {
  int rank = 0, R = 1;
  weftComm_t weft = nullptr;
  void* nccl = nullptr;  ///< ncclComm_t
  Nccl* lib = nullptr;
  cudaStream_t st = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  int dtype = weftFloat32, op = weftSum;
};

/// Elements per rank's call for a row of `bytes` (nccl-tests' convention).
uint64_t count_for(Collective c, uint64_t bytes, size_t esz, int R);

/// Issues one call of `count` elements per rank on x.st; 0 on success.
int issue(RankCtx& x, Lib lib, Collective c, uint64_t count);

/// Mean microseconds per call over o.iters calls after o.warmup (or one replay of a graph
/// of o.iters calls when o.graph); negative on failure.
double time_calls(RankCtx& x, Lib lib, Collective c, uint64_t count, const BenchOptions& o);

/// Runs one call on random inputs (seeded by `seed`) and counts the wrong elements of this
/// rank's output.
long check(RankCtx& x, Lib lib, Collective c, uint64_t count, uint64_t seed);

}  // namespace weft::cli
