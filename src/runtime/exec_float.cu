// Interpreter instantiations for the float types (split across files so the two-core build
// machine compiles them in parallel).
#include "device/executor_kernel.cuh"
#include "runtime/executor.hpp"

namespace weft::detail {

template <typename T>
void launch_exec_t(const exec::ExecArgs& a, int num_tbs, int threads, cudaStream_t stream) {
  exec::exec_kernel<T><<<num_tbs, threads, 0, stream>>>(a);
}

template <typename T>
void launch_divide_t(void* x, uint64_t n, int divisor, cudaStream_t stream) {
  uint64_t blocks = (n + 1023) / 1024;
  if (blocks > 1024) blocks = 1024;
  if (blocks == 0) return;
  exec::divide_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(static_cast<T*>(x), n, divisor);
}

template <typename T>
int blocks_per_sm_t(int threads) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, exec::exec_kernel<T>, threads, 0) != cudaSuccess) return 1;
  return n;
}

template void launch_exec_t<__half>(const exec::ExecArgs&, int, int, cudaStream_t);
template void launch_divide_t<__half>(void*, uint64_t, int, cudaStream_t);
template int blocks_per_sm_t<__half>(int);
template void launch_exec_t<float>(const exec::ExecArgs&, int, int, cudaStream_t);
template void launch_divide_t<float>(void*, uint64_t, int, cudaStream_t);
template int blocks_per_sm_t<float>(int);
template void launch_exec_t<double>(const exec::ExecArgs&, int, int, cudaStream_t);
template void launch_divide_t<double>(void*, uint64_t, int, cudaStream_t);
template int blocks_per_sm_t<double>(int);
template void launch_exec_t<__nv_bfloat16>(const exec::ExecArgs&, int, int, cudaStream_t);
template void launch_divide_t<__nv_bfloat16>(void*, uint64_t, int, cudaStream_t);
template int blocks_per_sm_t<__nv_bfloat16>(int);

}  // namespace weft::detail
