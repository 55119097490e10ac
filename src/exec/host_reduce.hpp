// Reductions on the host, with the device's semantics: the CPU emulator and the GPU tests'
// reference results use these. fp16 and bf16 are widened to fp32, combined, and rounded
// to nearest even, as the device does.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::host {

/// Bytes per element of a weftDataType_t value; 0 for an unknown type.
size_t dtype_size(int dtype);
/// "float32", "bfloat16", ...; "?" for an unknown type.
const char* dtype_name(int dtype);
/// "sum", "prod", "max", "min", "avg".
const char* op_name(int op);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

/// dst[i] = a[i] (op) b[i] for n elements of `dtype`; dst may alias a or b. Avg combines
/// as Sum (the division by the rank count is a separate step, see divide).
void combine(int dtype, int op, void* dst, const void* a, const void* b, size_t n);
/// x[i] /= divisor (integer division for integer types), for weftAvg.
void divide(int dtype, void* x, size_t n, int divisor);

}  // namespace weft::host
