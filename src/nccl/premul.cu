#include "nccl/premul.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

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
  preload_one<int8_t>();
  preload_one<uint8_t>();
  preload_one<int32_t>();
  preload_one<uint32_t>();
  preload_one<int64_t>();
  preload_one<uint64_t>();
  preload_one<__half>();
  preload_one<float>();
  preload_one<double>();
  preload_one<__nv_bfloat16>();
}

void launch_premul(void* dst, const void* src, size_t count, int type, const void* dev,
                   const unsigned char host[8], cudaStream_t s) {
  if (count == 0) return;
  switch (type) {
    case 0: return launch<int8_t>(dst, src, count, dev, host, s);
    case 1: return launch<uint8_t>(dst, src, count, dev, host, s);
    case 2: return launch<int32_t>(dst, src, count, dev, host, s);
    case 3: return launch<uint32_t>(dst, src, count, dev, host, s);
    case 4: return launch<int64_t>(dst, src, count, dev, host, s);
    case 5: return launch<uint64_t>(dst, src, count, dev, host, s);
    case 6: return launch<__half>(dst, src, count, dev, host, s);
    case 7: return launch<float>(dst, src, count, dev, host, s);
    case 8: return launch<double>(dst, src, count, dev, host, s);
    case 9: return launch<__nv_bfloat16>(dst, src, count, dev, host, s);
    default: fail(ErrorCode::InvalidArgument, "PreMulSum: weft cannot scale type " + std::to_string(type));
  }
}

}  // namespace weft::nccl
