// Launching the plan interpreter (exec/executor_kernel.cuh) and weftAvg's division.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "exec/oneshot.hpp"

namespace weft {

/// Threads per block of the interpreter (its __launch_bounds__ allows up to 512).
constexpr int kExecThreadsSimple = exec::kExecBlockThreads;
constexpr int kExecThreadsLL = exec::kExecBlockThreads;

/// Launches one interpreter block per thread block of the rank's plan on `stream`, or,
/// when `generated` is not null, that generated kernel (gen/kernels.hpp, the plan's own
/// code, same arguments), with max(roles, 1) x conn_cache connection states of dynamic
/// shared memory. Throws UnhandledCuda if the launch fails.
void launch_executor(const exec::ExecArgs& args, int num_tbs, int threads, cudaStream_t stream,
                     const void* generated = nullptr);

/// Launches the one-shot kernel (exec/oneshot.hpp) with `blocks` thread blocks of
/// `threads` threads (1..kOneShotBlocks, 32..kOneShotThreads) on `stream`.
/// `pdl`: launched as a programmatic dependent of the stream's previous kernel
/// (WEFT_ONESHOT_PDL; the kernel waits for that kernel's end and memory before its first
/// load, so only the launch overlaps). Throws UnhandledCuda if the launch fails.
void launch_oneshot(const exec::OneShotArgs& args, int blocks, int threads, cudaStream_t stream, bool pdl = false);

/// x[i] /= divisor for `n` elements of `dtype` (weftAvg's last step).
void launch_divide(void* x, uint64_t n, int dtype, int divisor, cudaStream_t stream);

/// How many interpreter blocks of `threads` threads fit on one multiprocessor at once.
int executor_blocks_per_sm(int threads);

/// Loads every kernel weft launches (the interpreter, weftAvg's division, the one-shot and
/// p2p kernels, for every type) into the current device's context, once per device and
/// process. Under CUDA's lazy loading (the default since CUDA 12.2) a kernel's first launch
/// may wait until the context is idle; with ranks as threads of one process sharing a GPU,
/// one rank's first launch of a kernel would then wait behind another rank's kernel that
/// spins on it: a hang. Called when a communicator is made. Throws UnhandledCuda.
void preload_kernels();

namespace detail {
template <typename T>
void launch_exec_t(const exec::ExecArgs& a, int num_tbs, int threads, size_t smem, cudaStream_t stream);
template <typename T>
void launch_oneshot_t(const exec::OneShotArgs& a, int blocks, int threads, cudaStream_t stream, bool pdl);
template <typename T>
void launch_divide_t(void* x, uint64_t n, int divisor, cudaStream_t stream);
template <typename T>
int blocks_per_sm_t(int threads);
template <typename T>
void preload_exec_t();
template <typename T>
void preload_oneshot_t();
void preload_p2p();
}  // namespace detail

}  // namespace weft
