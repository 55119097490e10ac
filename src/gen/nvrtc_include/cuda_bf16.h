// The part of <cuda_bf16.h> weft's reductions use (exec/reduce_ops.cuh), for NVRTC builds
// of generated kernels, so that no CUDA toolkit headers are needed at run time: a 2-byte
// __nv_bfloat16 and its conversions (round to nearest even). Embedded in the library.
#pragma once
struct __nv_bfloat16 {
  unsigned short x;
};
__device__ __forceinline__ float __bfloat162float(__nv_bfloat16 h) {
  return __uint_as_float(static_cast<unsigned int>(h.x) << 16);
}
__device__ __forceinline__ __nv_bfloat16 __float2bfloat16_rn(float f) {
  __nv_bfloat16 h;
#if __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.x) : "f"(f));
#else
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) h.x = 0x7fffu;
  else h.x = static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
  return h;
}
