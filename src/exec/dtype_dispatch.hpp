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
  with_element_type<__half, __nv_bfloat16>(static_cast<DataType>(dtype), f);
}

/// Calls f(static_cast<T*>(nullptr)) for every data type.
template <typename F>
void for_each_dtype(F&& f) {
  for (int t = 0; t < kNumDataTypes; ++t) with_dtype(t, f);
}

}  // namespace weft::exec
