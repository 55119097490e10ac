// Point-to-point transfers of a group (weftSend / weftRecv): one block per (peer,
// direction, instance), and copy blocks for sends to the rank itself (kP2PCopy). An operation of `bytes` is split into `instances` 16-byte-aligned
// parts, and each part into messages of at most one staging slot, which travel through
// the same memory-channel FIFOs (weft/device/memory_channel.hpp: Simple slots, post and
// ack) as the interpreter's. Sender and receiver compute the same split from the byte
// count, which both sides of a matched pair must agree on.
#pragma once

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "exec/executor_kernel.cuh"
#include "weft/device/copy.hpp"
#include "weft/device/atomics.hpp"
#include "weft/device/wait.hpp"

namespace weft::exec {

constexpr int kMaxP2POps = 64;
constexpr int kMaxP2PBlocks = 96;  // P2PArgs stays within the 4 KiB kernel-parameter limit

struct P2POpDev {
  char* buf;
  uint64_t bytes;
  int32_t instances;
  int32_t pad;
  const char* src;  ///< a copy block's source (a send to this rank itself); null otherwise
};

constexpr int8_t kP2PCopy = 2;  ///< P2PBlockDev::send of a block that copies src to buf on this GPU

struct P2PBlockDev {
  int16_t op_begin;
  int16_t op_end;
  int16_t instance;
  int8_t send;
  int8_t pad;
  int32_t conn;  ///< index into the communicator's connection table
  int32_t peer;
};

struct P2PArgs {
  P2POpDev ops[kMaxP2POps];
  P2PBlockDev blocks[kMaxP2PBlocks];
  const ChannelHandle* table;
  int32_t rank;
  uint64_t timeout_ns;
  uint32_t* error_claim;
  ErrorRecord* error;
  volatile uint32_t* abort;
};
static_assert(sizeof(P2PArgs) <= 4096, "P2PArgs must fit the kernel-parameter limit");

/// Each thread keeps kU 16-byte loads in flight before its stores (one at a time would
/// leave a block's rate at a sixth of what it moves this way); p2p_kernel has the registers.
WEFT_DEVICE_INLINE void copy_from_staging(char* dst, const char* src, uint64_t bytes) {
  const uint32_t tid = threadIdx.x, nth = blockDim.x;
  uint64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15u) == 0) {
    const uint64_t nvec = bytes / 16;
    const uint4* sv = reinterpret_cast<const uint4*>(src);
    uint4* dv = reinterpret_cast<uint4*>(dst);
    constexpr uint32_t kU = 8;
    uint64_t i = tid;
    for (; i + (kU - 1) * nth < nvec; i += kU * nth) {
      uint4 v[kU];
#pragma unroll
      for (uint32_t u = 0; u < kU; ++u) v[u] = device::ld_cg_v4(sv + i + u * nth);
#pragma unroll
      for (uint32_t u = 0; u < kU; ++u) dv[i + u * nth] = v[u];
    }
    for (; i < nvec; i += nth) dv[i] = device::ld_cg_v4(sv + i);
    done = nvec * 16;
  }
  for (uint64_t i = done + tid; i < bytes; i += nth) dst[i] = static_cast<char>(__ldcg(reinterpret_cast<const unsigned char*>(src + i)));
}

__global__ void __launch_bounds__(kMaxThreads) p2p_kernel(P2PArgs a) {
  __shared__ uint64_t s_pos;
  __shared__ int s_status[2];
  const P2PBlockDev blk = a.blocks[blockIdx.x];
  if (blk.send == kP2PCopy) {
    // A send to this rank itself and its receive: the block copies its instance's part of
    // each op, beside the blocks that move the other peers' data (no FIFO, no wait).
    for (int o = blk.op_begin; o < blk.op_end; ++o) {
      const P2POpDev op = a.ops[o];
      if (blk.instance >= op.instances) continue;
      const uint64_t part = ((op.bytes + op.instances - 1) / op.instances + 15) / 16 * 16;
      const uint64_t lo = static_cast<uint64_t>(blk.instance) * part;
      if (lo < op.bytes) copy_from_staging(op.buf + lo, op.src + lo, op.bytes - lo < part ? op.bytes - lo : part);
    }
    return;
  }
  const ChannelHandle* c = &a.table[blk.conn];
  ExecArgs ea{};
  ea.rank = a.rank;
  ea.error_claim = a.error_claim;
  ea.error = a.error;
  Invocation iv;
  iv.a = &ea;
  iv.slots = nullptr;
  iv.conns = nullptr;
  iv.tb = static_cast<int32_t>(blockIdx.x);
  iv.tb_first_slot = 0;
  iv.tid = threadIdx.x;
  iv.nth = blockDim.x;
  iv.bar = 0;
  iv.start_ns = device::globaltimer();
  iv.dl = device::deadline_after(a.timeout_ns, a.abort, a.error_claim);
  uint32_t par = 0, msg = 0;
  for (int o = blk.op_begin; o < blk.op_end; ++o) {
    const P2POpDev op = a.ops[o];
    if (blk.instance >= op.instances) continue;
    const uint64_t part = ((op.bytes + op.instances - 1) / op.instances + 15) / 16 * 16;
    const uint64_t lo = static_cast<uint64_t>(blk.instance) * part;
    const uint64_t hi = lo + part < op.bytes ? lo + part : op.bytes;
    for (uint64_t off = lo; off < hi; off += c->slot_bytes, par ^= 1u, ++msg) {
      const uint64_t n = hi - off < c->slot_bytes ? hi - off : c->slot_bytes;
      if (threadIdx.x == 0) {
        const uint64_t pos = blk.send ? c->send_position() : c->recv_position();
        s_pos = pos;
        device::WaitResult r;
        if (blk.send) {
          r = c->wait_credit(pos, iv.dl);
          if (r != device::WaitResult::Ok)
            record_error(iv, r, 0, kSend, kWaitCredit, blk.peer, msg, -1, pos + 1 - c->depth, c->peer_count());
        } else {
          r = c->wait_posted(pos, iv.dl);
          if (r != device::WaitResult::Ok)
            record_error(iv, r, 0, kRecv, kWaitData, blk.peer, msg, -1, pos + 1, c->peer_count());
        }
        s_status[par] = r == device::WaitResult::Ok ? 0 : 1;
      }
      __syncthreads();
      if (s_status[par] != 0) return;
      if (blk.send) device::copy_bytes(c->send_slot(s_pos), op.buf + off, n, device::ThreadGroup{threadIdx.x, blockDim.x});
      else copy_from_staging(op.buf + off, c->recv_slot(s_pos), n);
      __syncthreads();
      if (threadIdx.x == 0) {
        // Across the network these push triggers to the proxy (bounded); a push that timed
        // out is recorded and the next wait ends.
        // A receive within a node acks without a fence: the block's loads of the slot were all
        // consumed by its stores before the barrier (the interpreter's invoke() says more).
        device::WaitResult r = device::WaitResult::Ok;
        if (blk.send) r = c->post(s_pos, n, iv.dl);
        else if (c->net == nullptr) c->ack_packets(s_pos);
        else r = c->ack(s_pos, iv.dl);
        if (r != device::WaitResult::Ok)
          record_error(iv, r, 0, blk.send ? kSend : kRecv, kWaitProxy, blk.peer, msg, -1, s_pos + 1, 0);
      }
    }
  }
}

}  // namespace weft::exec
