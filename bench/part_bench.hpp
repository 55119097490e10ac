// What part_bench.cu (the modes, main) and part_trace.cu (the trace mode) share: the shape
// of the producer, the ranks' setup and the check macro.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "weft/partitioned.h"
#include "weft/partitioned.hpp"
#include "weft/weft.h"

namespace partbench {

constexpr int kThreads = 1024;  ///< threads per block, 8 B each
constexpr int kIters = 20;      ///< timed iterations (epochs) per row

/// Returns 1 from the calling function, printing where, when a weft or CUDA call fails.
#define OK(call)                                                                                \
  do {                                                                                          \
    auto r_ = (call);                                                                           \
    if (static_cast<int>(r_) != 0) {                                                            \
      std::printf("%s:%d: %s failed (%d): %s\n", __FILE__, __LINE__, #call, static_cast<int>(r_), \
                  weftGetLastError(nullptr));                                                   \
      return 1;                                                                                 \
    }                                                                                           \
  } while (0)

struct Rank {
  int rank = 0;
  weftComm_t comm = nullptr;
  weftPartComm_t pc = nullptr;
  cudaStream_t stream = nullptr;
  bool shared_gpu = false;
};

int open_rank(int r, const weftUniqueId& id, Rank& k);
int barrier(Rank& k);
int close_rank(Rank& k);
/// a[i] = 1 + i % 97 and b[i] = 2 + i % 97 for i < n (the vector add's inputs), synchronized.
int fill_inputs(Rank& k, double* a, double* b, uint64_t n);
/// Elements of c[0, n) that are not a[i] + b[i] = 3 + 2 (i % 97).
long wrong_sums(const std::vector<double>& c);

extern std::vector<int> g_grids;   ///< --grids
extern int g_trace_grid;           ///< trace --per-block G: G's blocks sorted by pready start (0: none)
extern int g_trace_rows;           ///< trace --rows N: at most N of them (0: all)
extern std::vector<int> g_trace_thresholds;  ///< trace --thresholds: user partitions per transport partition (0: all, -d: ceil(G / d))
extern std::vector<int> g_trace_paths;       ///< trace --paths: 0 kernel copy, 1 progression engine (proxy)
extern std::vector<int> g_trace_claims;      ///< trace --claims: 0 weft, 1 each-block
extern int g_max_blocks;                     ///< allreduce --max-blocks: the largest grid with the ranks on one GPU (0: SMs / 2)

/// The trace mode (part_trace.cu), as a rank of gt::run_ranks.
int trace(int r, const weftUniqueId& id);

}  // namespace partbench
