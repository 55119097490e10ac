// The element type of a DataType (ir/datatype.hpp) for host code that launches kernels by
// type: fp16 and bf16 are CUDA's __half and __nv_bfloat16. Needs the CUDA toolkit's headers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "ir/datatype.hpp"
#include "util/error.hpp"

namespace weft::exec {

/// Calls f(static_cast<T*>(nullptr)) with T the element type of weftDataType_t value
/// `dtype`; throws InvalidArgument naming `what` for an unknown value.
template <typename F>
void with_dtype(int dtype, F&& f, const char* what = "unknown data type") {
  if (!valid_dtype(dtype)) fail(ErrorCode::InvalidArgument, std::string(what) + " " + std::to_string(dtype));
  switch (static_cast<DataType>(dtype)) {
    case DataType::Int8: return f(static_cast<int8_t*>(nullptr));
    case DataType::Uint8: return f(static_cast<uint8_t*>(nullptr));
    case DataType::Int32: return f(static_cast<int32_t*>(nullptr));
    case DataType::Uint32: return f(static_cast<uint32_t*>(nullptr));
    case DataType::Int64: return f(static_cast<int64_t*>(nullptr));
    case DataType::Uint64: return f(static_cast<uint64_t*>(nullptr));
    case DataType::Float16: return f(static_cast<__half*>(nullptr));
    case DataType::Float32: return f(static_cast<float*>(nullptr));
    case DataType::Float64: return f(static_cast<double*>(nullptr));
    case DataType::Bfloat16: return f(static_cast<__nv_bfloat16*>(nullptr));
  }
}

/// Calls f(static_cast<T*>(nullptr)) for every data type.
template <typename F>
void for_each_dtype(F&& f) {
  for (int t = 0; t < kNumDataTypes; ++t) with_dtype(t, f);
}

}  // namespace weft::exec
