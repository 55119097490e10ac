// The copy-engine runner's kernels (exec/ce.hpp).
#include <type_traits>

#include "exec/ce.hpp"
#include "exec/dtype_dispatch.hpp"
#include "exec/reduce_ops.cuh"
#include "util/cuda_check.hpp"

namespace weft::exec {

namespace {

/// The first failing launch of this rank claims the error record and fills it in.
__device__ void ce_record(const CeTriggerArgs& a, const CeDevStep& s, int step, uint64_t expected, uint64_t seen,
                          uint64_t start_ns) {
  if (atomicCAS(a.error_claim, 0u, 1u) != 0u) return;
  ErrorRecord* e = a.error;
  e->rank = a.rank;
  e->tb = 0;
  e->slot = step;
  e->prim = s.op == kCeWait ? kRecv : s.op == kCeFlush ? kNop : kSend;
  e->what = kWaitCopyEngine;
  e->peer = s.op == kCeFlush ? -1 : s.rank;
  e->mb = 0;
  e->dep_tb = -1;
  e->expected = expected;
  e->seen = seen;
  e->waited_s = static_cast<double>(device::globaltimer() - start_ns) * 1e-9;
  __threadfence_system();
  e->valid = 1;
  __threadfence_system();
}

__global__ void __launch_bounds__(1) ce_trigger_kernel(const __grid_constant__ CeTriggerArgs a) {
  const uint64_t start = device::globaltimer();
  const device::Deadline d = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  for (int i = 0; i < a.nsteps; ++i) {
    const CeDevStep& s = a.steps[i];
    device::PortChannelDeviceHandle ch = a.ch[s.peer];
    device::WaitResult r = device::WaitResult::Ok;
    uint64_t expected = 0;
    switch (s.op) {
      case kCeSignal: r = ch.signal(d); break;
      case kCeWait:
        expected = *ch.waited + 1;
        r = ch.wait(d);
        break;
      case kCePut:
        ch.src_mem = s.src_mem;
        ch.dst_mem = s.dst_mem;
        r = ch.put_with_signal(s.dst_off, s.src_off, s.bytes, d);
        break;
      default: r = ch.flush(d); break;
    }
    if (r != device::WaitResult::Ok) {
      // Aborted: the abort flag, another launch's error or the proxy's (which its owner reports).
      if (r == device::WaitResult::Timeout)
        ce_record(a, s, i, expected, s.op == kCeWait ? device::ld_acquire_sys(ch.inbound) : 0, start);
      return;
    }
  }
}

template <typename T, int Op>
__global__ void __launch_bounds__(kCeReduceThreads) ce_reduce_kernel(const __grid_constant__ CeReduceArgs a) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool aligned = (reinterpret_cast<uintptr_t>(a.dst) | reinterpret_cast<uintptr_t>(a.a)) % 16 == 0;
  for (int k = 0; k < a.nsrc; ++k) aligned &= reinterpret_cast<uintptr_t>(a.src[k]) % 16 == 0;
  const uint64_t nvec = aligned ? a.bytes / 16 : 0;
  for (uint64_t i = first; i < nvec; i += stride) {
    uint4 v = __ldcg(reinterpret_cast<const uint4*>(a.a) + i);
    for (int k = 0; k < a.nsrc; ++k) v = apply16<T, Op>(v, __ldcg(reinterpret_cast<const uint4*>(a.src[k]) + i));
    reinterpret_cast<uint4*>(a.dst)[i] = v;
  }
  const uint64_t n = a.bytes / sizeof(T);
  for (uint64_t e = nvec * 16 / sizeof(T) + first; e < n; e += stride) {
    T v = ld_cg(reinterpret_cast<const T*>(a.a) + e);
    for (int k = 0; k < a.nsrc; ++k) v = apply_op<Op>(v, ld_cg(reinterpret_cast<const T*>(a.src[k]) + e));
    reinterpret_cast<T*>(a.dst)[e] = v;
  }
}

template <typename T>
void launch_reduce_t(const CeReduceArgs& a, int blocks, cudaStream_t s) {
  switch (a.op) {
    case kOpProd: ce_reduce_kernel<T, kOpProd><<<blocks, kCeReduceThreads, 0, s>>>(a); break;
    case kOpMax: ce_reduce_kernel<T, kOpMax><<<blocks, kCeReduceThreads, 0, s>>>(a); break;
    case kOpMin: ce_reduce_kernel<T, kOpMin><<<blocks, kCeReduceThreads, 0, s>>>(a); break;
    default: ce_reduce_kernel<T, kOpSum><<<blocks, kCeReduceThreads, 0, s>>>(a); break;
  }
}

template <typename T>
void preload_reduce_t() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_reduce_kernel<T, kOpSum>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_reduce_kernel<T, kOpProd>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_reduce_kernel<T, kOpMax>));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_reduce_kernel<T, kOpMin>));
}

}  // namespace

void launch_ce_triggers(const CeTriggerArgs& args, cudaStream_t stream) {
  ce_trigger_kernel<<<1, 1, 0, stream>>>(args);
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void launch_ce_reduce(const CeReduceArgs& args, int blocks, cudaStream_t stream) {
  with_dtype(args.dtype, [&](auto* tag) { launch_reduce_t<std::remove_pointer_t<decltype(tag)>>(args, blocks, stream); });
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void preload_ce_kernels() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_trigger_kernel));
  for_each_dtype([](auto* tag) { preload_reduce_t<std::remove_pointer_t<decltype(tag)>>(); });
}

}  // namespace weft::exec
