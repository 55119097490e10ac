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
void launch_oneshot_t(const exec::OneShotArgs& a, int blocks, int threads, cudaStream_t stream, bool pdl) {
  void (*kernel)(const exec::OneShotArgs) =
      a.one_word != 0 ? exec::oneshot_kernel<T, 1> : exec::oneshot_kernel<T, exec::kOneShotWordsPerThread>;
  if (!pdl) {
    kernel<<<blocks, threads, 0, stream>>>(a);
    return;
  }
  // A programmatic dependent of the stream's previous kernel: it may be launched before that
  // kernel ends (when that kernel triggers its dependents, as this one does at once) and
  // waits in griddepcontrol.wait for its end and its memory. Captured into a graph, the
  // dependency becomes a programmatic edge.
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  WEFT_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
}

template <typename T>
void preload_oneshot_t() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::oneshot_kernel<T, 1>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::oneshot_kernel<T, exec::kOneShotWordsPerThread>));
}

template void launch_oneshot_t<int8_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<uint8_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<int32_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<uint32_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<int64_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<uint64_t>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<__half>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<float>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<double>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);
template void launch_oneshot_t<__nv_bfloat16>(const exec::OneShotArgs&, int, int, cudaStream_t, bool);

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
