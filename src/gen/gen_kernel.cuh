// What a generated kernel (src/gen/codegen.hpp) runs around its straight-line slot calls:
// the block's start (the interpreter's: connection states, counters' base, the launch's error claim) and one
// slot's invocations, which are the interpreter's own invoke_slot with the slot's shape,
// protocol and op as constants. Compiled by NVRTC only, from the headers embedded in the library.
#pragma once

#include "exec/executor_kernel.cuh"

namespace weft::gen {

using exec::BlockShared;
using exec::DevSlot;
using exec::ExecArgs;
using exec::Invocation;

/// Starts thread block `tb` whose first slot is this rank's slot `first_slot` and whose
/// connections are [conn_begin, conn_begin + nconns) of the rank's table; `base_slot` is a
/// slot of the block that bumps its counter (kHasDependents), -1 if none. False when the
/// block has nothing to do (no micro-batch, or an earlier launch's error).
WEFT_DEVICE_INLINE bool begin_block(const ExecArgs& a, Invocation& iv, BlockShared& sh, int32_t tb, int32_t first_slot,
                                    int32_t base_slot, int32_t conn_begin, int32_t nconns) {
  if (a.geo.nmb == 0) return false;
  iv.a = &a;
  iv.slots = nullptr;  // the slots are constants of the generated code
  iv.conns = a.inline_plan ? a.iconns : a.conns;
  exec::set_conn_states(iv, 0, a.conn_cache, conn_begin);
  iv.tb = tb;
  iv.tb_first_slot = first_slot;
  iv.tid = threadIdx.x;  // generated kernels run one plan thread block per CUDA block (no roles)
  iv.nth = blockDim.x;
  iv.bar = 0;
  iv.start_ns = device::globaltimer();
  iv.dl = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  exec::load_conn_states(iv, conn_begin, nconns);
  if (threadIdx.x == 0) {
    sh.base = base_slot >= 0 ? *reinterpret_cast<volatile uint64_t*>(&a.counters[base_slot]) : 0;
    sh.start_status = *reinterpret_cast<volatile uint32_t*>(a.error_claim) != 0 ? 1 : 0;
  }
  __syncthreads();
  return sh.start_status == 0;
}

/// Slot `gs`'s invocations for micro-batches [k_begin, k_end). What decides the branches
/// of an invocation (primitive, buffers, whether others wait on its counter, protocol,
/// reduction) are template constants, so the interpreter's invoke_slot folds them; the
/// indices are arguments, so one instantiation serves every slot of that shape and the
/// kernel's size (and NVRTC's time) grows with the shapes, not the slots.
template <typename T, int Protocol, int Op, int Prim, int SrcBuf, int DstBuf, int Flags>
__device__ __noinline__ bool run(const Invocation& iv, BlockShared& sh, int16_t send_conn, int16_t recv_conn,
                                 int32_t src_index, int32_t dst_index, int32_t count, int16_t instance,
                                 int16_t instances, int32_t dep_begin, int32_t ndeps, int32_t gs, uint32_t k_begin,
                                 uint32_t k_end, uint32_t& par) {
  const DevSlot s{Prim,      SrcBuf, DstBuf,   Flags,     send_conn, recv_conn, src_index,
                  dst_index, count,  instance, instances, dep_begin, ndeps};
  for (uint32_t k = k_begin; k < k_end; ++k, par ^= 1u)
    if (!exec::invoke_slot<T, false, Protocol, Op>(iv, sh, s, gs, k, par)) return false;
  return true;
}

}  // namespace weft::gen
