// Element-wise reductions on 8- and 16-byte words for every weft data type. fp16 and bf16
// are widened to fp32, combined and rounded to nearest even (as the host reference does).
// Op values are RedOp's (ir/datatype.hpp); avg runs as sum (combining_op).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ir/datatype.hpp"
#include "weft/device/macros.hpp"

namespace weft::exec {

template <int Op, typename T>
WEFT_DEVICE_INLINE T apply_op(T a, T b) {
  if constexpr (Op == kOpProd) return static_cast<T>(a * b);
  else if constexpr (Op == kOpMax) return a > b ? a : b;
  else if constexpr (Op == kOpMin) return a < b ? a : b;
  else return static_cast<T>(a + b);
}

template <int Op>
WEFT_DEVICE_INLINE __half apply_op(__half a, __half b) {
  return __float2half_rn(apply_op<Op, float>(__half2float(a), __half2float(b)));
}

template <int Op>
WEFT_DEVICE_INLINE __nv_bfloat16 apply_op(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __float2bfloat16_rn(apply_op<Op, float>(__bfloat162float(a), __bfloat162float(b)));
}

/// x (op) y element-wise over the T elements packed in a 16-byte vector.
template <typename T, int Op>
WEFT_DEVICE_INLINE uint4 apply16(uint4 x, uint4 y) {
  constexpr int kN = 16 / sizeof(T);
  T* a = reinterpret_cast<T*>(&x);
  const T* b = reinterpret_cast<const T*>(&y);
#pragma unroll
  for (int i = 0; i < kN; ++i) a[i] = apply_op<Op>(a[i], b[i]);
  return x;
}

/// x (op) y element-wise over the T elements packed in an 8-byte word.
template <typename T, int Op>
WEFT_DEVICE_INLINE uint64_t apply8(uint64_t x, uint64_t y) {
  constexpr int kN = 8 / sizeof(T);
  T* a = reinterpret_cast<T*>(&x);
  const T* b = reinterpret_cast<const T*>(&y);
#pragma unroll
  for (int i = 0; i < kN; ++i) a[i] = apply_op<Op>(a[i], b[i]);
  return x;
}

/// apply8 with the op a run-time value (a RedOp; avg sums: the division comes last).
template <typename T>
WEFT_DEVICE_INLINE uint64_t combine8(int op, uint64_t x, uint64_t y) {
  switch (op) {
    case kOpProd: return apply8<T, kOpProd>(x, y);
    case kOpMax: return apply8<T, kOpMax>(x, y);
    case kOpMin: return apply8<T, kOpMin>(x, y);
    default: return apply8<T, kOpSum>(x, y);
  }
}

/// Loads one element bypassing L1 (it may have been written by another GPU or block).
template <typename T>
WEFT_DEVICE_INLINE T ld_cg(const T* p) {
  if constexpr (sizeof(T) == 1) {
    unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p));
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(p));
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int v = __ldcg(reinterpret_cast<const unsigned int*>(p));
    return *reinterpret_cast<T*>(&v);
  } else {
    unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    return *reinterpret_cast<T*>(&v);
  }
}

}  // namespace weft::exec
