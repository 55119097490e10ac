// Interpreter instantiations for the int types (exec_launch.cuh; the float types are in
// exec_float.cu, so the two-core build machine compiles them in parallel).
#include "exec/exec_launch.cuh"

namespace weft::detail {

WEFT_INSTANTIATE_EXEC(int8_t)
WEFT_INSTANTIATE_EXEC(uint8_t)
WEFT_INSTANTIATE_EXEC(int32_t)
WEFT_INSTANTIATE_EXEC(uint32_t)
WEFT_INSTANTIATE_EXEC(int64_t)
WEFT_INSTANTIATE_EXEC(uint64_t)

}  // namespace weft::detail
