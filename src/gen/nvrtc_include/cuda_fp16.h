// The part of <cuda_fp16.h> weft's reductions use (exec/reduce_ops.cuh), for NVRTC builds
// of generated kernels, so that no CUDA toolkit headers are needed at run time: a 2-byte
// __half and its round-to-nearest-even conversions (the instructions nvcc's header emits).
// Embedded in the library.
#pragma once
struct __half {
  unsigned short x;
};
__device__ __forceinline__ float __half2float(__half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.x));
  return f;
}
__device__ __forceinline__ __half __float2half_rn(float f) {
  __half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
  return h;
}
