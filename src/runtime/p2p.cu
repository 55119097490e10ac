// Communicator::p2p: a group's sends and receives as one launch (exec/p2p_kernel.cuh).
#include <algorithm>
#include <map>

#include "exec/p2p_kernel.cuh"
#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "exec/executor.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

/// Parallel blocks for one operation of `bytes`: one per 256 KiB, at most 24 (what fills NVLink,
/// as for the collectives) and at most what keeps a group within exec::kMaxP2PBlocks when it
/// talks to every peer in both directions (AllToAll). Both sides of a matched pair must
/// agree, so this depends only on the byte count and the communicator's size, never on what
/// else a rank's group holds.
int p2p_instances(uint64_t bytes, int max_conns, int nranks) {
  const int per_group = std::max(1, exec::kMaxP2PBlocks / std::max(1, 2 * (nranks - 1)));
  const int cap = std::min({24, max_conns, per_group});
  uint64_t n = bytes / (256u << 10);  // one per 256 KiB: a 2 MiB message already gets 8
  return static_cast<int>(std::clamp<uint64_t>(n, 1, static_cast<uint64_t>(cap)));
}

}  // namespace

void Communicator::p2p(const std::vector<P2POp>& ops) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  if (ops.empty()) return;
  DeviceGuard guard(device_);
  cudaStream_t stream = ops[0].stream;
  for (const P2POp& op : ops) {
    if (op.stream != stream)
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": the sends and receives of one group must use one stream per communicator");
    if (op.peer < 0 || op.peer >= nranks_)
      fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + ": peer " + std::to_string(op.peer) + " is outside 0.." + std::to_string(nranks_ - 1));
    if (op.bytes > 0 && op.buf == nullptr)
      fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + ": a send or receive buffer is null");
  }
  // Sends to and receives from this rank itself pair up in order and become copies.
  std::vector<const P2POp*> self_send, self_recv;
  std::map<std::pair<int, int>, std::vector<const P2POp*>> groups;  // (peer, send) -> ops in call order
  for (const P2POp& op : ops) {
    if (op.peer == rank_) (op.send ? self_send : self_recv).push_back(&op);
    else groups[{op.peer, op.send ? 1 : 0}].push_back(&op);
  }
  if (self_send.size() != self_recv.size())
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": " + std::to_string(self_send.size()) +
                                      " sends to itself but " + std::to_string(self_recv.size()) + " receives from itself in one group");
  for (size_t i = 0; i < self_send.size(); ++i)
    if (self_send[i]->bytes != self_recv[i]->bytes)
      fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + ": a send to itself and its matching receive differ in size");
  // The copies of sends to this rank itself run in copy blocks of the group's kernel, beside
  // its transfers (an all-to-all's own block no longer waits in front of them), as far as the
  // kernel's op and block tables have room; the rest, and a group of self copies only, go
  // through cudaMemcpyAsync before the kernel.
  std::vector<size_t> self_in_kernel, self_by_memcpy;
  for (size_t i = 0; i < self_send.size(); ++i)
    if (self_send[i]->bytes > 0 && self_send[i]->buf != self_recv[i]->buf)
      (groups.empty() ? self_by_memcpy : self_in_kernel).push_back(i);
  auto memcpy_self = [&](size_t i) {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(self_recv[i]->buf, self_send[i]->buf, self_send[i]->bytes, cudaMemcpyDeviceToDevice, stream));
  };
  for (size_t i : self_by_memcpy) memcpy_self(i);
  if (!groups.empty()) {
    exec::P2PArgs a{};
    int nops = 0, nblocks = 0;
    const int K = layout_.cfg.connections;
    for (const auto& [key, list] : groups) {
      const int begin = nops;
      int imax = 1;
      for (const P2POp* op : list) {
        if (nops >= exec::kMaxP2POps)
          fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": more than " + std::to_string(exec::kMaxP2POps) + " sends and receives in one group");
        int inst = p2p_instances(op->bytes, K, nranks_);
        a.ops[nops++] = exec::P2POpDev{static_cast<char*>(op->buf), op->bytes, inst, 0, nullptr};
        imax = std::max(imax, inst);
      }
      for (int i = 0; i < imax; ++i) {
        if (nblocks >= exec::kMaxP2PBlocks)
          fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": a group needs more than " + std::to_string(exec::kMaxP2PBlocks) + " thread blocks");
        exec::P2PBlockDev& b = a.blocks[nblocks++];
        b.op_begin = static_cast<int16_t>(begin);
        b.op_end = static_cast<int16_t>(nops);
        b.instance = static_cast<int16_t>(i);
        b.send = static_cast<int8_t>(key.second);
        b.peer = key.first;
        b.conn = (key.first * 2 + key.second) * K + i;
      }
    }
    for (size_t i : self_in_kernel) {
      // One copy block per 256 KiB, at most 16, within what the tables have left.
      const uint64_t bytes = self_send[i]->bytes;
      const int room = exec::kMaxP2PBlocks - nblocks;
      if (nops >= exec::kMaxP2POps || room <= 0) {
        memcpy_self(i);
        continue;
      }
      const int inst = static_cast<int>(std::clamp<uint64_t>(bytes / (256u << 10), 1, static_cast<uint64_t>(std::min(16, room))));
      a.ops[nops] = exec::P2POpDev{static_cast<char*>(self_recv[i]->buf), bytes, inst, 0,
                                   static_cast<const char*>(self_send[i]->buf)};
      for (int k = 0; k < inst; ++k) {
        exec::P2PBlockDev& b = a.blocks[nblocks++];
        b.op_begin = static_cast<int16_t>(nops);
        b.op_end = static_cast<int16_t>(nops + 1);
        b.instance = static_cast<int16_t>(k);
        b.send = exec::kP2PCopy;
        b.peer = rank_;
        b.conn = 0;
      }
      ++nops;
    }
    a.table = p2p_conns_;
    a.rank = rank_;
    a.timeout_ns = static_cast<uint64_t>(timeout_s_ * 1e9);
    a.error_claim = error_claim_;
    a.error = error_dev_;
    a.abort = abort_dev_;
    exec::p2p_kernel<<<nblocks, kExecThreadsSimple, 0, stream>>>(a);
    WEFT_CUDA_CHECK(cudaGetLastError());
  }
  note_launch(stream);
}

namespace detail {
void preload_p2p() {
  cudaFuncAttributes attr;
  WEFT_CUDA_CHECK(cudaFuncGetAttributes(&attr, exec::p2p_kernel));
}
}  // namespace detail

}  // namespace weft
