// The interpreter's launch helpers, defined once and instantiated per element type by
// exec_float.cu and exec_int.cu (split so the two-core build machine compiles them in
// parallel). Include from .cu files only.
#pragma once

#include <type_traits>

#include "exec/executor_kernel.cuh"
#include "exec/executor.hpp"
#include "util/cuda_check.hpp"

namespace weft::detail {

/// `threads`: the movers; a.post_warp launches 32 more (the posting warp, exec_kernel), and
/// wins over a.mover_wide (the 8 / 8 movers: another instantiation).
template <typename T>
void launch_exec_t(const exec::ExecArgs& a, int num_tbs, int threads, size_t smem, cudaStream_t stream) {
  // The traced interpreter is built for float32 on one node only (the runtime traces no
  // other call: docs/traces.md), so that the build keeps one extra kernel.
  if constexpr (std::is_same_v<T, float>)
    if (a.trace != nullptr && !a.net) {
      exec::exec_kernel<T, false, true><<<num_tbs, threads, smem, stream>>>(a);
      return;
    }
  if (a.net) exec::exec_kernel<T, true><<<num_tbs, threads, smem, stream>>>(a);
  else if (a.post_warp) exec::exec_kernel<T, false, false, true><<<num_tbs, threads + 32, smem, stream>>>(a);
  else if (a.mover_wide) exec::exec_kernel<T, false, false, false, true><<<num_tbs, threads, smem, stream>>>(a);
  else if (a.ll_kernel && a.protocol == exec::kLL)
    exec::exec_kernel<T, false, false, false, false, exec::kLL><<<num_tbs, threads, smem, stream>>>(a);
  else exec::exec_kernel<T, false><<<num_tbs, threads, smem, stream>>>(a);
}

template <typename T>
void launch_divide_t(void* x, uint64_t n, int divisor, cudaStream_t stream) {
  uint64_t blocks = (n + 1023) / 1024;
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) return;
  exec::divide_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<T*>(x), n, divisor);
}

template <typename T>
void preload_exec_t() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::exec_kernel<T>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::exec_kernel<T, false, false, true>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::exec_kernel<T, false, false, false, true>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::exec_kernel<T, false, false, false, false, exec::kLL>));
  if constexpr (std::is_same_v<T, float>) WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::exec_kernel<T, false, true>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::divide_kernel<T>));
}

template <typename T>
int blocks_per_sm_t(int threads) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, exec::exec_kernel<T, false>, threads, 0) != cudaSuccess) return 1;
  return n;
}

}  // namespace weft::detail

/// Explicit instantiations of the three helpers for element type T (inside weft::detail).
#define WEFT_INSTANTIATE_EXEC(T)                                                        \
  template void launch_exec_t<T>(const exec::ExecArgs&, int, int, size_t, cudaStream_t); \
  template void launch_divide_t<T>(void*, uint64_t, int, cudaStream_t);                 \
  template int blocks_per_sm_t<T>(int);                                                  \
  template void preload_exec_t<T>();
