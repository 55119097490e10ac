// Reductions on the host, with the device's semantics: the CPU emulator and the GPU tests'
// reference results use these. fp16 and bf16 are widened to fp32, combined, and rounded
// to nearest even, as the device does.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/datatype.hpp"

namespace weft::host {

/// Bytes per element of a weftDataType_t value; 0 for an unknown type (the table's,
/// ir/datatype.hpp).
inline size_t dtype_size(int dtype) { return dtype_bytes(dtype); }
using ::weft::dtype_name;
using ::weft::op_name;

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

/// How the host holds an fp16 or a bf16 element: its 16 bits (widened to fp32 to compute).
struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};
inline float to_float(Half h) { return half_to_float(h.bits); }
inline float to_float(Bf16 b) { return bf16_to_float(b.bits); }

/// Calls f(static_cast<T*>(nullptr)) with T the host's element type of weftDataType_t value
/// `dtype` (int8_t ... double, Half, Bf16); does nothing for an unknown value.
template <typename F>
void with_host_type(int dtype, F&& f) {
  if (!valid_dtype(dtype)) return;
  with_element_type<Half, Bf16>(static_cast<DataType>(dtype), f);
}

/// dst[i] = a[i] (op) b[i] for n elements of `dtype`; dst may alias a or b. Avg combines
/// as Sum (the division by the rank count is a separate step, see divide).
void combine(int dtype, int op, void* dst, const void* a, const void* b, size_t n);
/// x[i] /= divisor (integer division for integer types), for weftAvg.
void divide(int dtype, void* x, size_t n, int divisor);

}  // namespace weft::host
