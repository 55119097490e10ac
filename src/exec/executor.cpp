#include "exec/executor.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <mutex>
#include <set>

#include "exec/dtype_dispatch.hpp"
#include "util/cuda_check.hpp"
#include "util/error.hpp"

namespace weft {

void launch_executor(const exec::ExecArgs& args, int num_tbs, int threads, cudaStream_t stream,
                     const void* generated) {
  if (args.conn_cache < 0 || args.conn_cache > exec::kMaxConnsPerTB)
    fail(ErrorCode::Internal, "launch_executor: " + std::to_string(args.conn_cache) + " connections per thread block");
  // The connection states of every role (exec_kernel's conn_states).
  const size_t smem = static_cast<size_t>(std::max(args.roles, 1)) * static_cast<size_t>(args.conn_cache) *
                      exec::kConnStateBytes;
  if (generated != nullptr) {
    void* params[] = {const_cast<exec::ExecArgs*>(&args)};
    WEFT_CUDA_CHECK(cudaLaunchKernel(generated, dim3(static_cast<unsigned>(num_tbs)), dim3(static_cast<unsigned>(threads)),
                                     params, smem, stream));
    return;
  }
  exec::with_dtype(args.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    detail::launch_exec_t<T>(args, num_tbs, threads, smem, stream);
  });
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void launch_oneshot(const exec::OneShotArgs& args, int blocks, int threads, cudaStream_t stream, bool pdl) {
  exec::with_dtype(args.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    detail::launch_oneshot_t<T>(args, blocks, threads, stream, pdl);
  });
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void launch_divide(void* x, uint64_t n, int dtype, int divisor, cudaStream_t stream) {
  exec::with_dtype(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    detail::launch_divide_t<T>(x, n, divisor, stream);
  });
  WEFT_CUDA_CHECK(cudaGetLastError());
}

int executor_blocks_per_sm(int threads) { return detail::blocks_per_sm_t<float>(threads); }

void preload_kernels() {
  static std::mutex mu;
  static std::set<int> loaded;  // devices whose kernels this process has loaded
  int device = 0;
  WEFT_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  if (!loaded.insert(device).second) return;
  exec::for_each_dtype([&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    detail::preload_exec_t<T>();
    detail::preload_oneshot_t<T>();
  });
  detail::preload_p2p();
}

}  // namespace weft
