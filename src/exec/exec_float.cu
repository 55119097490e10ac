// Interpreter instantiations for the float types (exec_launch.cuh; the int types are in
// exec_int.cu, so the two-core build machine compiles them in parallel).
#include "exec/exec_launch.cuh"

namespace weft::detail {

WEFT_INSTANTIATE_EXEC(__half)
WEFT_INSTANTIATE_EXEC(float)
WEFT_INSTANTIATE_EXEC(double)
WEFT_INSTANTIATE_EXEC(__nv_bfloat16)

}  // namespace weft::detail
