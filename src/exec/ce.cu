// The copy-engine runner's kernels (exec/ce.hpp).
#include <type_traits>

#include "exec/ce.hpp"
#include "exec/dtype_dispatch.hpp"
#include "exec/reduce_ops.cuh"
#include "util/cuda_check.hpp"

namespace weft::exec {

namespace {

/// The first failing launch of this rank claims the error record and fills it in.
__device__ void fill_record(uint32_t* claim, ErrorRecord* e, int32_t rank, int32_t slot, int32_t prim, int32_t what,
                            int peer, uint64_t expected, uint64_t seen, uint64_t start_ns) {
  if (atomicCAS(claim, 0u, 1u) != 0u) return;
  e->rank = rank;
  e->tb = 0;
  e->slot = slot;
  e->prim = prim;
  e->what = what;
  e->peer = peer;
  e->mb = 0;
  e->dep_tb = -1;
  e->expected = expected;
  e->seen = seen;
  e->waited_s = static_cast<double>(device::globaltimer() - start_ns) * 1e-9;
  __threadfence_system();
  e->valid = 1;
  __threadfence_system();
}

__device__ void ce_record(const CeTriggerArgs& a, const CeDevStep& s, int step, uint64_t expected, uint64_t seen,
                          uint64_t start_ns) {
  fill_record(a.error_claim, a.error, a.rank, step, s.op == kCeWait ? kRecv : s.op == kCeFlush ? kNop : kSend,
              kWaitCopyEngine, s.op == kCeFlush ? -1 : s.rank, expected, seen, start_ns);
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

__device__ void ce_sync_record(const CeSyncArgs& a, int32_t what, int peer, uint64_t expected, uint64_t seen,
                               uint64_t start_ns) {
  fill_record(a.error_claim, a.error, a.rank, 0, kRecv, what, peer, expected, seen, start_ns);
}

__global__ void __launch_bounds__(1) ce_sync_kernel(const __grid_constant__ CeSyncArgs a) {
  const uint64_t start = device::globaltimer();
  const device::Deadline d = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  const uint64_t e = *a.epoch + 1;
  *a.epoch = e;
  // Everything this rank's stream did before (its copies into the peers included) is done
  // when this kernel runs; the release store orders the tag before the epoch.
  __threadfence_system();
  for (int q = 0; q < a.nranks; ++q) {
    if (q == a.rank) continue;
    *reinterpret_cast<volatile uint64_t*>(a.remote[q] + 1) = a.tag;
    device::st_release_sys(a.remote[q], e);
  }
  for (int q = 0; q < a.nranks; ++q) {
    if (q == a.rank) continue;
    const uint64_t* slot = a.inbox + 2 * q;
    const device::WaitResult r = device::spin_until([&] { return device::ld_acquire_sys(slot) >= e; }, d);
    if (r != device::WaitResult::Ok) {
      if (r == device::WaitResult::Timeout) ce_sync_record(a, kWaitCeSync, q, e, device::ld_acquire_sys(slot), start);
      return;
    }
    // A peer runs at most one phase ahead: in a call's first phase it is in the same call.
    // (Not `check ? *volatile_slot : a.tag`: that conditional is a volatile lvalue, and nvcc
    // 13.0 loaded a.tag through its parameter-space address as a generic pointer, address
    // 0x58: the illegal access every copy-engine call of the 2026-11-28 round hit.)
    if (a.check_tag) {
      const uint64_t tag = *reinterpret_cast<const volatile uint64_t*>(slot + 1);
      if (tag != a.tag) {
        ce_sync_record(a, kCeCallMismatch, q, a.tag, tag, start);
        return;
      }
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

void launch_ce_sync(const CeSyncArgs& args, cudaStream_t stream) {
  ce_sync_kernel<<<1, 1, 0, stream>>>(args);
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void launch_ce_reduce(const CeReduceArgs& args, int blocks, cudaStream_t stream) {
  with_dtype(args.dtype, [&](auto* tag) { launch_reduce_t<std::remove_pointer_t<decltype(tag)>>(args, blocks, stream); });
  WEFT_CUDA_CHECK(cudaGetLastError());
}

void preload_ce_kernels() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_trigger_kernel));
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, ce_sync_kernel));
  for_each_dtype([](auto* tag) { preload_reduce_t<std::remove_pointer_t<decltype(tag)>>(); });
}

}  // namespace weft::exec
