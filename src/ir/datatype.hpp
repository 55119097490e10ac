// weft's one table of data types and reduction operators.
//
// The values are the public API's (weftDataType_t and weftRedOp_t in weft/weft.h), which
// are NCCL's (ncclDataType_t 0..9, ncclRedOp_t 0..4); static_asserts beside the C API keep
// them equal (runtime/c_api.cpp). Every layer that switches on a type or an operator goes
// through this header: the host reductions (exec/host_reduce.hpp), the executor's kernels
// and their launch (exec/reduce_ops.cuh, exec/dtype_dispatch.hpp), the copy engines, the
// generated kernels (gen/codegen.cpp), the NCCL layer (nccl/route.cpp, nccl/premul.cu) and
// partitioned communication (part/state.cpp).
//
// Host and device code: constexpr functions and enums only, no std::string, so that nvcc,
// NVRTC (the header is embedded in generated kernels, src/gen/CMakeLists.txt) and the host
// compiler all read it.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"

namespace weft {

/// An element type; weftDataType_t's (and ncclDataType_t's) values.
enum class DataType : int32_t {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
};
/// The number of data types (valid values are 0 .. kNumDataTypes - 1).
inline constexpr int kNumDataTypes = 10;

/// A reduction operator; weftRedOp_t's (and ncclRedOp_t's) values. Avg combines as Sum and
/// divides by the rank count at the end (combining_op).
enum class RedOp : int32_t {
  Sum = 0,
  Prod = 1,
  Max = 2,
  Min = 3,
  Avg = 4,
};
/// The number of reduction operators (valid values are 0 .. kNumRedOps - 1).
inline constexpr int kNumRedOps = 5;
/// RedOp's values as ints, for kernels that take the operator as a template argument or a
/// launch parameter.
inline constexpr int kOpSum = static_cast<int>(RedOp::Sum);
inline constexpr int kOpProd = static_cast<int>(RedOp::Prod);
inline constexpr int kOpMax = static_cast<int>(RedOp::Max);
inline constexpr int kOpMin = static_cast<int>(RedOp::Min);
inline constexpr int kOpAvg = static_cast<int>(RedOp::Avg);

/// True for a value of DataType (a weftDataType_t the caller passed as an int).
WEFT_HOST_DEVICE_INLINE constexpr bool valid_dtype(int t) { return t >= 0 && t < kNumDataTypes; }
/// True for a value of RedOp.
WEFT_HOST_DEVICE_INLINE constexpr bool valid_op(int op) { return op >= 0 && op < kNumRedOps; }

/// Bytes per element.
WEFT_HOST_DEVICE_INLINE constexpr uint32_t dtype_bytes(DataType t) {
  switch (t) {
    case DataType::Int8: case DataType::Uint8: return 1;
    case DataType::Float16: case DataType::Bfloat16: return 2;
    case DataType::Int32: case DataType::Uint32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Uint64: case DataType::Float64: return 8;
  }
  return 0;
}
/// Bytes per element of a weftDataType_t value; 0 for an unknown value.
WEFT_HOST_DEVICE_INLINE constexpr uint32_t dtype_bytes(int t) {
  return valid_dtype(t) ? dtype_bytes(static_cast<DataType>(t)) : 0;
}

/// True for the floating-point types (fp16 and bf16 are reduced in fp32).
WEFT_HOST_DEVICE_INLINE constexpr bool is_float(DataType t) {
  return t == DataType::Float16 || t == DataType::Float32 || t == DataType::Float64 || t == DataType::Bfloat16;
}
/// True for the unsigned integer types.
WEFT_HOST_DEVICE_INLINE constexpr bool is_unsigned(DataType t) {
  return t == DataType::Uint8 || t == DataType::Uint32 || t == DataType::Uint64;
}

/// The type of the same size that stands for every type when data only moves (no
/// reduction): uint8, float16, uint32 or uint64.
WEFT_HOST_DEVICE_INLINE constexpr DataType move_type(DataType t) {
  switch (dtype_bytes(t)) {
    case 1: return DataType::Uint8;
    case 2: return DataType::Float16;
    case 4: return DataType::Uint32;
    default: return DataType::Uint64;
  }
}

/// Calls f(static_cast<T*>(nullptr)) with T the element type of `t`: the C++ integer and
/// floating-point types, and the caller's `Half` and `Bf16` for the 16-bit floats (CUDA's
/// __half and __nv_bfloat16 where kernels are launched, exec/dtype_dispatch.hpp; the host's
/// own, exec/host_reduce.hpp). Host code only: NVRTC, which reads this header for generated
/// kernels, takes no host functions.
#ifndef __CUDACC_RTC__
template <typename Half, typename Bf16, typename F>
void with_element_type(DataType t, F&& f) {
  switch (t) {
    case DataType::Int8: return f(static_cast<int8_t*>(nullptr));
    case DataType::Uint8: return f(static_cast<uint8_t*>(nullptr));
    case DataType::Int32: return f(static_cast<int32_t*>(nullptr));
    case DataType::Uint32: return f(static_cast<uint32_t*>(nullptr));
    case DataType::Int64: return f(static_cast<int64_t*>(nullptr));
    case DataType::Uint64: return f(static_cast<uint64_t*>(nullptr));
    case DataType::Float16: return f(static_cast<Half*>(nullptr));
    case DataType::Float32: return f(static_cast<float*>(nullptr));
    case DataType::Float64: return f(static_cast<double*>(nullptr));
    case DataType::Bfloat16: return f(static_cast<Bf16*>(nullptr));
  }
}
#endif

/// "int8", "float32", "bfloat16", ... (the names `weft bench --type` takes).
WEFT_HOST_DEVICE_INLINE constexpr const char* dtype_name(DataType t) {
  switch (t) {
    case DataType::Int8: return "int8";
    case DataType::Uint8: return "uint8";
    case DataType::Int32: return "int32";
    case DataType::Uint32: return "uint32";
    case DataType::Int64: return "int64";
    case DataType::Uint64: return "uint64";
    case DataType::Float16: return "float16";
    case DataType::Float32: return "float32";
    case DataType::Float64: return "float64";
    case DataType::Bfloat16: return "bfloat16";
  }
  return "?";
}
/// dtype_name of a weftDataType_t value; "?" for an unknown value.
WEFT_HOST_DEVICE_INLINE constexpr const char* dtype_name(int t) {
  return valid_dtype(t) ? dtype_name(static_cast<DataType>(t)) : "?";
}

/// "sum", "prod", "max", "min", "avg" (the names `weft bench --op` takes).
WEFT_HOST_DEVICE_INLINE constexpr const char* op_name(RedOp op) {
  switch (op) {
    case RedOp::Sum: return "sum";
    case RedOp::Prod: return "prod";
    case RedOp::Max: return "max";
    case RedOp::Min: return "min";
    case RedOp::Avg: return "avg";
  }
  return "?";
}
/// op_name of a weftRedOp_t value; "?" for an unknown value.
WEFT_HOST_DEVICE_INLINE constexpr const char* op_name(int op) {
  return valid_op(op) ? op_name(static_cast<RedOp>(op)) : "?";
}

/// The operator the data is combined with: Avg sums (the division by the rank count is a
/// separate, last step); every other operator is itself.
WEFT_HOST_DEVICE_INLINE constexpr RedOp combining_op(RedOp op) { return op == RedOp::Avg ? RedOp::Sum : op; }
/// combining_op of a weftRedOp_t value, as an int (what kernels take as a template argument
/// or a launch parameter).
WEFT_HOST_DEVICE_INLINE constexpr int combining_op(int op) { return op == kOpAvg ? kOpSum : op; }
/// True for Avg: the call divides by the rank count after combining.
WEFT_HOST_DEVICE_INLINE constexpr bool divides(int op) { return op == kOpAvg; }

}  // namespace weft
