// Launching the plan interpreter (exec/executor_kernel.cuh) and weftAvg's division.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "exec/oneshot.hpp"

namespace weft {

/// Threads per block of the interpreter (its __launch_bounds__ allows up to 512).
constexpr int kExecThreadsSimple = 512;
constexpr int kExecThreadsLL = 512;

/// Launches one interpreter block per thread block of the rank's plan on `stream`.
/// Throws UnhandledCuda if the launch fails.
void launch_executor(const exec::ExecArgs& args, int num_tbs, int threads, cudaStream_t stream);

/// Launches the one-shot kernel (exec/oneshot.hpp) with `blocks` thread blocks of
/// `threads` threads (1..kOneShotBlocks, 32..kOneShotThreads) on `stream`.
/// Throws UnhandledCuda if the launch fails.
void launch_oneshot(const exec::OneShotArgs& args, int blocks, int threads, cudaStream_t stream);

/// x[i] /= divisor for `n` elements of `dtype` (weftAvg's last step).
void launch_divide(void* x, uint64_t n, int dtype, int divisor, cudaStream_t stream);

/// How many interpreter blocks of `threads` threads fit on one multiprocessor at once.
int executor_blocks_per_sm(int threads);

namespace detail {
template <typename T>
void launch_exec_t(const exec::ExecArgs& a, int num_tbs, int threads, cudaStream_t stream);
template <typename T>
void launch_oneshot_t(const exec::OneShotArgs& a, int blocks, int threads, cudaStream_t stream);
template <typename T>
void launch_divide_t(void* x, uint64_t n, int divisor, cudaStream_t stream);
template <typename T>
int blocks_per_sm_t(int threads);
}  // namespace detail

}  // namespace weft
