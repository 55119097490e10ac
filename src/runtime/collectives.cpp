// Communicator::collective: from a C API call to a launch of the plan interpreter.
#include <algorithm>

#include "runtime/collective_reference.hpp"
#include "runtime/communicator.hpp"
#include "runtime/cuda_check.hpp"
#include "runtime/executor.hpp"
#include "runtime/host_reduce.hpp"
#include "runtime/selection.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

void Communicator::collective(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op,
                              int root, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  const std::string what = std::string(to_string(c)) + " on rank " + std::to_string(rank_);
  const size_t esz = host::dtype_size(dtype);
  if (esz == 0) fail(ErrorCode::InvalidArgument, what + ": unknown data type " + std::to_string(dtype));
  const bool reduces = c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
  if (reduces && (op < 0 || op >= weftNumOps))
    fail(ErrorCode::InvalidArgument, what + ": unknown reduction " + std::to_string(op));
  if ((c == Collective::Broadcast || c == Collective::Reduce) && (root < 0 || root >= nranks_))
    fail(ErrorCode::InvalidArgument, what + ": root " + std::to_string(root) + " is outside 0.." +
                                         std::to_string(nranks_ - 1));
  if (count == 0) return;
  const uint64_t send_bytes = host::send_elems(c, count, nranks_) * esz;
  const uint64_t recv_bytes = host::recv_elems(c, count, nranks_) * esz;
  const bool needs_send = c != Collective::Broadcast || rank_ == root;
  const bool needs_recv = c != Collective::Reduce || rank_ == root;
  if ((needs_send && send == nullptr) || (needs_recv && recv == nullptr))
    fail(ErrorCode::InvalidArgument, what + ": a buffer is null");

  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  bool in_place = false;
  switch (c) {
    case Collective::AllGather: in_place = s == r + static_cast<uint64_t>(rank_) * count * esz; break;
    case Collective::ReduceScatter: in_place = r == s + static_cast<uint64_t>(rank_) * count * esz; break;
    default: in_place = s == r; break;
  }
  if (c == Collective::Broadcast && rank_ != root) in_place = false;
  if (c == Collective::Reduce && rank_ != root) in_place = false;

  DeviceGuard guard(device_);
  Choice ch = select_algorithm(c, std::max(send_bytes, recv_bytes), nranks_, layout_.cfg.connections);
  if (nranks_ == 1) ch = Choice{"ring", "Simple", 1};
  CachedPlan& cp = plan_for(c, nranks_ == 1 ? "ring" : ch.algorithm, ch.protocol, ch.instances, in_place,
                            c == Collective::Broadcast || c == Collective::Reduce ? root : 0);
  const bool ll = ch.protocol == "LL";
  const uint64_t cap = ll ? layout_.cfg.ll_slot_bytes / 2 : layout_.cfg.slot_bytes;
  const uint64_t target = static_cast<uint64_t>(std::max<int64_t>(0, config::get_int("WEFT_MICROBATCH_BYTES")));
  exec::Geometry g = make_geometry(cp.lp, count, static_cast<uint32_t>(esz), cap, target);

  exec::ExecArgs a{};
  a.tbs = cp.tbs;
  a.slots = cp.slots;
  a.deps = cp.deps;
  a.dep_tbs = cp.dep_tbs;
  a.conns = cp.conns;
  a.counters = cp.counters;
  a.buf[0] = const_cast<char*>(s);
  a.buf[1] = r;
  uint64_t sb = scratch_bytes(cp.lp, g);
  a.buf[2] = sb > 0 ? static_cast<char*>(scratch(sb)) : nullptr;
  a.geo = g;
  a.rank = rank_;
  a.model = cp.lp.plan.execution == ExecutionModel::Algorithm ? exec::kAlgorithmModel : exec::kTaskModel;
  a.protocol = ll ? exec::kLL : exec::kSimple;
  a.op = static_cast<uint8_t>(op == weftAvg ? weftSum : (reduces ? op : weftSum));
  a.dtype = static_cast<uint8_t>(dtype);
  a.timeout_ns = static_cast<uint64_t>(timeout_s_ * 1e9);
  a.error_claim = error_claim_;
  a.error = error_dev_;
  a.abort = abort_dev_;
  if (cp.fits_inline) {
    const LoweredRank& lr = cp.lp.ranks[static_cast<size_t>(rank_)];
    a.inline_plan = 1;
    std::copy(lr.tbs.begin(), lr.tbs.end(), a.itbs);
    std::copy(lr.slots.begin(), lr.slots.end(), a.islots);
    std::copy(cp.conns_host.begin(), cp.conns_host.end(), a.iconns);
  }
  if (cp.num_tbs > 0) launch_executor(a, cp.num_tbs, ll ? kExecThreadsLL : kExecThreadsSimple, stream);
  if (reduces && op == weftAvg && nranks_ > 1 && (c != Collective::Reduce || rank_ == root))
    launch_divide(recv, count, dtype, nranks_, stream);
  note_launch(stream);
  WEFT_LOG(Debug, "COLL", what << ": " << count << " x " << host::dtype_name(dtype) << " with " << ch.algorithm << "/"
                               << ch.protocol << " x" << ch.instances << ", " << g.nmb << " micro-batches of "
                               << g.mb << " elements, " << cp.num_tbs << " thread blocks");
}

}  // namespace weft
