// Generated kernels (docs/generated-kernels.md): a lowered plan of one rank becomes CUDA
// source, one `extern "C" __global__` kernel per (plan, rank, element type, reduction):
// a switch on blockIdx.x whose cases run their thread block's slots in the plan's order,
// straight-line, each slot's fields constants: what its invocation branches on (primitive,
// buffers, flags, protocol, reduction) as template arguments, its indices as immediate
// arguments, calling the interpreter's own invocation (exec/executor_kernel.cuh,
// invoke_slot) through gen/gen_kernel.cuh, so both speak the same wire protocol. Geometry,
// buffers and connections stay run-time arguments (the interpreter's ExecArgs), so one
// kernel serves every size. Host-only: compiling is src/gen/nvrtc.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exec/plan_lowering.hpp"
#include "ir/datatype.hpp"

namespace weft::gen {

/// The name of the kernel in every generated source (one kernel per program).
inline constexpr const char* kKernelName = "weft_gen_kernel";

/// What one generated kernel is for.
struct KernelSpec {
  int32_t rank = 0;
  uint8_t protocol = exec::kSimple;  ///< exec::Protocol (Simple or LL)
  int dtype = static_cast<int>(DataType::Float32);  ///< weftDataType_t
  int op = kOpSum;  ///< weftRedOp_t; Avg is generated as Sum (weftAvg divides after)
};

/// Whether WEFT_EXECUTOR asks for generated kernels ("gen"); "interp" (the default) for the
/// interpreter. Throws weft::Error(InvalidArgument) for another value.
bool executor_is_gen();

/// The spec whose kernel runs `spec` on `lp`: a plan that reduces nothing moves bytes, so
/// its kernel depends on the element size only (the unsigned type of that size, __half for
/// 2 bytes) and not on the reduction; Avg becomes Sum (weftAvg divides afterwards).
KernelSpec canonical_spec(const LoweredPlan& lp, KernelSpec spec);

/// The CUDA source of the kernel for `spec` on plan `lp`. Throws weft::Error(InvalidArgument)
/// for an unknown type, reduction or protocol, or a rank outside the plan.
std::string generate_source(const LoweredPlan& lp, const KernelSpec& spec);

/// The headers a generated source includes, embedded in the library at build time
/// (src/gen/CMakeLists.txt): (include name, text), handed to NVRTC as named headers.
const std::vector<std::pair<const char*, const char*>>& embedded_headers();

}  // namespace weft::gen
