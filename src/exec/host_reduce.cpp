#include "exec/host_reduce.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>


namespace weft::host {

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
    case kOpProd: return static_cast<T>(a * b);
    case kOpMax: return std::max(a, b);
    case kOpMin: return std::min(a, b);
    default: return static_cast<T>(a + b);  // Sum; Avg combines as Sum
  }
}
Half apply(int op, Half a, Half b) { return Half{float_to_half(apply<float>(op, to_float(a), to_float(b)))}; }
Bf16 apply(int op, Bf16 a, Bf16 b) { return Bf16{float_to_bf16(apply<float>(op, to_float(a), to_float(b)))}; }

template <typename T>
T divided(T v, int d) {
  return static_cast<T>(v / static_cast<T>(d));
}
Half divided(Half v, int d) { return Half{float_to_half(to_float(v) / static_cast<float>(d))}; }
Bf16 divided(Bf16 v, int d) { return Bf16{float_to_bf16(to_float(v) / static_cast<float>(d))}; }

}  // namespace

void combine(int dtype, int op, void* dst, const void* a, const void* b, size_t n) {
  with_host_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (size_t i = 0; i < n; ++i) {
      T x, y;
      std::memcpy(&x, static_cast<const char*>(a) + i * sizeof(T), sizeof(T));
      std::memcpy(&y, static_cast<const char*>(b) + i * sizeof(T), sizeof(T));
      const T z = apply(op, x, y);
      std::memcpy(static_cast<char*>(dst) + i * sizeof(T), &z, sizeof(T));
    }
  });
}

void divide(int dtype, void* x, size_t n, int divisor) {
  with_host_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, static_cast<char*>(x) + i * sizeof(T), sizeof(T));
      v = divided(v, divisor);
      std::memcpy(static_cast<char*>(x) + i * sizeof(T), &v, sizeof(T));
    }
  });
}

}  // namespace weft::host
