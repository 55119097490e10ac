#include "nccl/premul.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "exec/dtype_dispatch.hpp"
#include "util/cuda_check.hpp"
#include "util/error.hpp"

namespace weft::nccl {

namespace {

template <typename T>
struct Widen {
  using Acc = T;
  __device__ static Acc up(T v) { return v; }
  __device__ static T down(Acc v) { return v; }
};
template <>
struct Widen<__half> {
  using Acc = float;
  __device__ static float up(__half v) { return __half2float(v); }
  __device__ static __half down(float v) { return __float2half_rn(v); }
};
template <>
struct Widen<__nv_bfloat16> {
  using Acc = float;
  __device__ static float up(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 down(float v) { return __float2bfloat16_rn(v); }
};

template <typename T>
__global__ void premul_kernel(T* dst, const T* src, size_t n, const T* device_scalar, T host_scalar) {
  using W = Widen<T>;
  const typename W::Acc s = W::up(device_scalar ? *device_scalar : host_scalar);
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = W::down(W::up(src[i]) * s);
}

template <typename T>
void launch(void* dst, const void* src, size_t n, const void* dev, const unsigned char host[8], cudaStream_t s) {
  T h;
  std::memcpy(&h, host, sizeof(T));
  const int threads = 512;
  const size_t want = (n + threads - 1) / threads;
  const int blocks = static_cast<int>(want < 1024 ? (want < 1 ? 1 : want) : 1024);
  premul_kernel<T><<<blocks, threads, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), n,
                                              static_cast<const T*>(dev), h);
  WEFT_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void preload_one() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, premul_kernel<T>));
}

}  // namespace

void preload_premul() {
  exec::for_each_dtype([](auto* tag) { preload_one<std::remove_pointer_t<decltype(tag)>>(); });
}

void launch_premul(void* dst, const void* src, size_t count, int type, const void* dev,
                   const unsigned char host[8], cudaStream_t s) {
  if (count == 0) return;
  exec::with_dtype(
      type, [&](auto* tag) { launch<std::remove_pointer_t<decltype(tag)>>(dst, src, count, dev, host, s); },
      "PreMulSum: weft cannot scale type");
}

}  // namespace weft::nccl
