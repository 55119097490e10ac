#include "exec/host_reduce.hpp"

#include <algorithm>
#include <cstring>

#include "weft/weft.h"

namespace weft::host {

size_t dtype_size(int dtype) {
  switch (dtype) {
    case weftInt8: case weftUint8: return 1;
    case weftFloat16: case weftBfloat16: return 2;
    case weftInt32: case weftUint32: case weftFloat32: return 4;
    case weftInt64: case weftUint64: case weftFloat64: return 8;
    default: return 0;
  }
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case weftInt8: return "int8";
    case weftUint8: return "uint8";
    case weftInt32: return "int32";
    case weftUint32: return "uint32";
    case weftInt64: return "int64";
    case weftUint64: return "uint64";
    case weftFloat16: return "float16";
    case weftFloat32: return "float32";
    case weftFloat64: return "float64";
    case weftBfloat16: return "bfloat16";
    default: return "?";
  }
}

const char* op_name(int op) {
  switch (op) {
    case weftSum: return "sum";
    case weftProd: return "prod";
    case weftMax: return "max";
    case weftMin: return "min";
    case weftAvg: return "avg";
    default: return "?";
  }
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign << 31;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = (sign << 31) | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = (sign << 31) | 0x7f800000u | (man << 13);
  } else {
    bits = (sign << 31) | (exp + 112u) << 23 | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (absx < 0x38800000u) {  // subnormal half or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14 + (113 - e) ... mantissa shift to the 10-bit field
    uint32_t res = m >> (shift);
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (res & 1u))) ++res;
    return static_cast<uint16_t>(sign | res);
  }
  uint32_t res = ((absx >> 13) - (112u << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  return static_cast<uint16_t>(sign | res);
}

float bf16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

namespace {

template <typename T>
T apply(int op, T a, T b) {
  switch (op) {
    case weftProd: return static_cast<T>(a * b);
    case weftMax: return std::max(a, b);
    case weftMin: return std::min(a, b);
    default: return static_cast<T>(a + b);
  }
}

template <typename T>
void combine_t(int op, void* dst, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
    T z = apply<T>(op, x, y);
    std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &z, sizeof(T));
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void combine_16(int op, void* dst, const void* a, const void* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t x, y;
    std::memcpy(&x, static_cast<const char*>(a) + i * 2, 2);
    std::memcpy(&y, static_cast<const char*>(b) + i * 2, 2);
    uint16_t z = FromF(apply<float>(op, ToF(x), ToF(y)));
    std::memcpy(static_cast<char*>(dst) + i * 2, &z, 2);
  }
}

template <typename T>
void divide_t(void* x, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, static_cast<char*>(x) + i * sizeof(T), sizeof(T));
    v = static_cast<T>(v / static_cast<T>(d));
    std::memcpy(static_cast<char*>(x) + i * sizeof(T), &v, sizeof(T));
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void divide_16(void* x, size_t n, int d) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, static_cast<char*>(x) + i * 2, 2);
    v = FromF(ToF(v) / static_cast<float>(d));
    std::memcpy(static_cast<char*>(x) + i * 2, &v, 2);
  }
}

}  // namespace

void combine(int dtype, int op, void* dst, const void* a, const void* b, size_t n) {
  switch (dtype) {
    case weftInt8: return combine_t<int8_t>(op, dst, a, b, n);
    case weftUint8: return combine_t<uint8_t>(op, dst, a, b, n);
    case weftInt32: return combine_t<int32_t>(op, dst, a, b, n);
    case weftUint32: return combine_t<uint32_t>(op, dst, a, b, n);
    case weftInt64: return combine_t<int64_t>(op, dst, a, b, n);
    case weftUint64: return combine_t<uint64_t>(op, dst, a, b, n);
    case weftFloat16: return combine_16<half_to_float, float_to_half>(op, dst, a, b, n);
    case weftFloat32: return combine_t<float>(op, dst, a, b, n);
    case weftFloat64: return combine_t<double>(op, dst, a, b, n);
    case weftBfloat16: return combine_16<bf16_to_float, float_to_bf16>(op, dst, a, b, n);
    default: return;
  }
}

void divide(int dtype, void* x, size_t n, int divisor) {
  switch (dtype) {
    case weftInt8: return divide_t<int8_t>(x, n, divisor);
    case weftUint8: return divide_t<uint8_t>(x, n, divisor);
    case weftInt32: return divide_t<int32_t>(x, n, divisor);
    case weftUint32: return divide_t<uint32_t>(x, n, divisor);
    case weftInt64: return divide_t<int64_t>(x, n, divisor);
    case weftUint64: return divide_t<uint64_t>(x, n, divisor);
    case weftFloat16: return divide_16<half_to_float, float_to_half>(x, n, divisor);
    case weftFloat32: return divide_t<float>(x, n, divisor);
    case weftFloat64: return divide_t<double>(x, n, divisor);
    case weftBfloat16: return divide_16<bf16_to_float, float_to_bf16>(x, n, divisor);
    default: return;
  }
}

}  // namespace weft::host
