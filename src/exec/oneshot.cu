// One-shot kernel instantiations (exec/oneshot_kernel.cuh): one per data type, the
// reduction chosen at run time (a uniform branch per word costs nothing next to a
// cross-GPU round trip, and keeps the build to twenty kernels: one word per thread or up
// to four, OneShotArgs::one_word).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "exec/oneshot_kernel.cuh"
#include "exec/executor.hpp"
#include "util/cuda_check.hpp"

namespace weft::detail {

template <typename T>
void launch_oneshot_t(const exec::OneShotArgs& a, int blocks, int threads, cudaStream_t stream) {
  if (a.one_word != 0) exec::oneshot_kernel<T, 1><<<blocks, threads, 0, stream>>>(a);
  else exec::oneshot_kernel<T, exec::kOneShotWordsPerThread><<<blocks, threads, 0, stream>>>(a);
}

template <typename T>
void preload_oneshot_t() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::oneshot_kernel<T, 1>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::oneshot_kernel<T, exec::kOneShotWordsPerThread>));
}

template void launch_oneshot_t<int8_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<uint8_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<int32_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<uint32_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<int64_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<uint64_t>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<__half>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<float>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<double>(const exec::OneShotArgs&, int, int, cudaStream_t);
template void launch_oneshot_t<__nv_bfloat16>(const exec::OneShotArgs&, int, int, cudaStream_t);

template void preload_oneshot_t<int8_t>();
template void preload_oneshot_t<uint8_t>();
template void preload_oneshot_t<int32_t>();
template void preload_oneshot_t<uint32_t>();
template void preload_oneshot_t<int64_t>();
template void preload_oneshot_t<uint64_t>();
template void preload_oneshot_t<__half>();
template void preload_oneshot_t<float>();
template void preload_oneshot_t<double>();
template void preload_oneshot_t<__nv_bfloat16>();

}  // namespace weft::detail
