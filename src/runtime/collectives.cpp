// Communicator::collective: from a C API call to a launch of the plan interpreter.
#include <algorithm>

#include "runtime/ce_plan.hpp"
#include "runtime/collective_reference.hpp"
#include "runtime/cta_policy.hpp"
#include "runtime/communicator.hpp"
#include "runtime/cuda_check.hpp"
#include "exec/executor.hpp"
#include "gen/kernels.hpp"
#include "runtime/host_reduce.hpp"
#include "net/net_fifos.hpp"
#include "runtime/selection.hpp"
#include "util/checked.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

void Communicator::collective(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op,
                              int root, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  // Built only when needed: this function is on every small call's critical path.
  auto what = [&] { return std::string(to_string(c)) + " on rank " + std::to_string(rank_); };
  const size_t esz = host::dtype_size(dtype);
  if (esz == 0) fail(ErrorCode::InvalidArgument, what() + ": unknown data type " + std::to_string(dtype));
  const bool reduces = c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
  if (reduces && (op < 0 || op >= weftNumOps))
    fail(ErrorCode::InvalidArgument, what() + ": unknown reduction " + std::to_string(op));
  if ((c == Collective::Broadcast || c == Collective::Reduce) && (root < 0 || root >= nranks_))
    fail(ErrorCode::InvalidArgument, what() + ": root " + std::to_string(root) + " is outside 0.." +
                                         std::to_string(nranks_ - 1));
  if (count == 0) return;
  // count x element size and x nranks are checked: a product that wraps would move less
  // data than asked, silently.
  const uint64_t bytes = checked_mul(count, esz, "the count times the element size");
  const uint64_t send_bytes = checked_mul(host::send_elems(c, 1, nranks_), bytes, "the send buffer's size");
  const uint64_t recv_bytes = checked_mul(host::recv_elems(c, 1, nranks_), bytes, "the receive buffer's size");
  const bool needs_send = c != Collective::Broadcast || rank_ == root;
  const bool needs_recv = c != Collective::Reduce || rank_ == root;
  if ((needs_send && send == nullptr) || (needs_recv && recv == nullptr))
    fail(ErrorCode::InvalidArgument, what() + ": a buffer is null");
  if (needs_send) check_span(send, send_bytes, "the send buffer");
  if (needs_recv) check_span(recv, recv_bytes, "the receive buffer");

  const char* s = static_cast<const char*>(send);
  char* r = static_cast<char*>(recv);
  bool in_place = false;
  switch (c) {
    case Collective::AllGather: in_place = s == r + static_cast<uint64_t>(rank_) * bytes; break;
    case Collective::ReduceScatter: in_place = r == s + static_cast<uint64_t>(rank_) * bytes; break;
    default: in_place = s == r; break;
  }
  if (c == Collective::Broadcast && rank_ != root) in_place = false;
  if (c == Collective::Reduce && rank_ != root) in_place = false;

  DeviceGuard guard(device_);
  // Memory windows: an event after the call, which weftCommWindowDeregister queries.
  OnSuccess window_use([&] {
    if (!windows_.empty()) note_window_use(s, send_bytes, r, recv_bytes, stream);
  });
  if (nranks_ == 1) {
    // One rank: every collective is its input, whatever the operation (a sum, product,
    // min, max or average of one value is that value), so it is a copy, or nothing in
    // place. cudaMemcpyAsync runs on the copy engine or a driver copy kernel at memory
    // speed, and is captured by CUDA graphs like any launch.
    if (!in_place) WEFT_CUDA_CHECK(cudaMemcpyAsync(r, s, recv_bytes, cudaMemcpyDeviceToDevice, stream));
    note_launch(stream);
    WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << host::dtype_name(dtype)
                                   << (in_place ? ", one rank in place: nothing to do" : ", one rank: a copy"));
    return;
  }
  // Without WEFT_ALGO / WEFT_PROTO / WEFT_INSTANCES (read once, at creation) the table
  // decides alone: no environment lookups per call.
  const uint64_t payload = std::max(send_bytes, recv_bytes);
  Choice ch = env_overrides_ ? select_algorithm(*table_, c, payload, nranks_, layout_.cfg.connections, in_place)
                             : table_->choose(c, payload, nranks_, in_place);
  // The CTA policy and memory windows (runtime/zero_copy.cpp): copy engines first where they apply.
  if ((cta_policy_ == kCtaZero || !windows_.empty()) &&
      zero_copy_first(c, s, r, count, dtype, root, in_place, payload, stream)) {
    note_launch(stream);
    return;
  }
  if (ch.algorithm == ce::kAlgorithm) {
    // Copy engines into registered buffers (runtime/ce_collectives.hpp); where any rank
    // cannot, every rank runs the table's SM choice instead (logged at INFO).
    if (!net_ && run_copy_engine(c, s, r, count, dtype, reduces ? op : weftSum, in_place, stream, root)) {
      note_launch(stream);
      return;
    }
    ch = table_->choose(c, payload, nranks_, in_place, true);
  }
  if (net_) {
    // Links to other nodes (hosts or emulated) carry Simple messages through the proxy only:
    // the one-shot kernel (which stores into every peer's memory), LL and LL128 (whose flags
    // need the data and flag of a packet or line to land together) are not used there.
    if (ch.algorithm == kOneShot) {
      ch = table_->choose(c, payload, nranks_, in_place, true);
      const int64_t inst = env_overrides_ ? config::get_int("WEFT_INSTANCES") : 0;
      if (inst > 0) ch.instances = static_cast<int>(std::min<int64_t>(inst, layout_.cfg.connections));
    }
  }
  if (ch.algorithm != kOneShot && ch.protocol != "Simple") {
    std::string why;
    ch.protocol = effective_protocol(ch.protocol, net_ != nullptr, layout_.cfg.slot_bytes, layout_.cfg.ll_slot_bytes, &why);
    if (!why.empty()) WEFT_LOG(Debug, "COLL", what() << ": " << why);
  }
  if (cta_policy_ == kCtaEfficiency) cap_blocks(c, in_place, root, &ch);  // runtime/zero_copy.cpp
  if (ch.algorithm == kOneShot) {
    if (trace_cap_ > 0) start_trace(nullptr, nullptr, c, ch, payload, "the one-shot kernel records no timestamps", stream);
    launch_oneshot_call(c, s, r, bytes, dtype, reduces ? op : weftSum, ch.instances, stream);
    note_launch(stream);
    WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << host::dtype_name(dtype) << " with the one-shot kernel");
    return;
  }
  CachedPlan& cp = plan_for(c, ch, in_place, c == Collective::Broadcast || c == Collective::Reduce ? root : 0);
  const exec::Protocol proto = protocol_code(ch.protocol);
  const bool ll = proto == exec::kLL;
  // LL: half of an LL slot is data. LL128: its lines fill the Simple slot (make_geometry
  // counts whole lines of 120 data bytes per piece).
  const uint64_t cap = ll ? layout_.cfg.ll_slot_bytes / 2 : layout_.cfg.slot_bytes;
  // WEFT_MICROBATCH_BYTES, when set, else the row's microbatch_bytes (0: sized by the slots).
  const uint64_t env_target =
      env_overrides_ ? static_cast<uint64_t>(std::max<int64_t>(0, config::get_int("WEFT_MICROBATCH_BYTES"))) : 0;
  const uint64_t target = env_target > 0 ? env_target : ch.microbatch_bytes;
  exec::Geometry g = make_geometry(cp.lp, count, static_cast<uint32_t>(esz), cap, target, proto);

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
  a.protocol = proto;
  a.op = static_cast<uint8_t>(op == weftAvg ? weftSum : (reduces ? op : weftSum));
  a.dtype = static_cast<uint8_t>(dtype);
  a.timeout_ns = static_cast<uint64_t>(timeout_s_ * 1e9);
  a.error_claim = error_claim_;
  a.error = error_dev_;
  a.abort = abort_dev_;
  a.net = net_ ? 1 : 0;  // the interpreter's instantiation that pushes network triggers
  if (cp.fits_inline) {
    const LoweredRank& lr = cp.lp.ranks[static_cast<size_t>(rank_)];
    a.inline_plan = 1;
    std::copy(lr.tbs.begin(), lr.tbs.end(), a.itbs);
    std::copy(lr.slots.begin(), lr.slots.end(), a.islots);
    std::copy(cp.conns_host.begin(), cp.conns_host.end(), a.iconns);
  }
  int threads = ll ? kExecThreadsLL : kExecThreadsSimple;
  if (cp.roles > 1) {  // each role whole warps (exec_kernel splits the block evenly)
    a.roles = cp.roles;
    a.block_tbs = cp.block_tbs;
    threads = threads / cp.roles / 32 * 32 * cp.roles;
  }
  if (trace_cap_ > 0) start_trace(&a, &cp, c, ch, payload, "", stream);
  // Generated kernels: one plan thread block per CUDA block (plans never group under gen);
  // traced calls run the interpreter's traced instantiation (uses_gen: LL128 and links across
  // nodes run it too).
  const void* generated = nullptr;
  if (cp.gen && cp.num_tbs > 0 && a.trace == nullptr) {
    const void*& k = cp.gen_kernels[dtype][a.op];
    if (k == nullptr) k = gen::kernel_for(cp.lp, gen::KernelSpec{rank_, a.protocol, dtype, a.op});
    generated = k;
  }
  if (cp.num_tbs > 0) launch_executor(a, cp.num_blocks, threads, stream, generated);
  if (reduces && op == weftAvg && (c != Collective::Reduce || rank_ == root))
    launch_divide(recv, count, dtype, nranks_, stream);
  note_launch(stream);
  WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << host::dtype_name(dtype) << " with " << ch.algorithm << "/"
                               << ch.protocol << " x" << ch.instances << ", " << g.nmb << " micro-batches of "
                               << g.mb << " elements, " << cp.num_tbs << " thread blocks in " << cp.num_blocks
                               << " CUDA blocks" << (generated != nullptr ? " (generated kernel)" : ""));
}

void Communicator::launch_oneshot_call(Collective c, const void* send, void* recv, uint64_t bytes, int dtype, int op,
                                       int blocks, cudaStream_t stream) {
  exec::OneShotArgs a{};
  a.in = static_cast<const char*>(send);
  a.out = static_cast<char*>(recv);
  a.bytes = bytes;
  a.area = arena_ + layout_.oneshot();
  for (int p = 0; p < nranks_; ++p) a.peer_area[p] = peer_arena_[static_cast<size_t>(p)] + layout_.oneshot();
  a.epochs = reinterpret_cast<uint64_t*>(a.area + exec::oneshot_epochs(nranks_));
  a.timeout_ns = static_cast<uint64_t>(timeout_s_ * 1e9);
  a.error_claim = error_claim_;
  a.error = error_dev_;
  a.abort = abort_dev_;
  a.rank = rank_;
  a.nranks = nranks_;
  a.mode = c == Collective::AllReduce   ? exec::kOneShotAllReduce
           : c == Collective::AllGather ? exec::kOneShotAllGather
                                        : exec::kOneShotReduceScatter;
  a.op = static_cast<uint8_t>(op);
  a.dtype = static_cast<uint8_t>(dtype);
  // Every rank derives the same block count from the same arguments (the epochs rely on
  // it); the regions bound it below, and a block needs at least one word.
  const uint64_t words = (bytes + 7) / 8;
  const uint64_t per_block_max = static_cast<uint64_t>(exec::kOneShotThreads) * exec::kOneShotWordsPerThread;
  uint64_t nb = std::clamp<uint64_t>(static_cast<uint64_t>(std::max(1, blocks)), 1, exec::kOneShotBlocks);
  nb = std::max<uint64_t>(std::min<uint64_t>(nb, words), (words + per_block_max - 1) / per_block_max);
  a.words_per_block = (words + nb - 1) / nb;
  nb = (words + a.words_per_block - 1) / a.words_per_block;
  // One word per thread where the block's share allows, in whole warps.
  const uint64_t per_thread = (a.words_per_block + exec::kOneShotThreads - 1) / exec::kOneShotThreads;
  const uint64_t threads = std::clamp<uint64_t>((a.words_per_block + per_thread - 1) / per_thread, 32,
                                                exec::kOneShotThreads);
  launch_oneshot(a, static_cast<int>(nb), static_cast<int>((threads + 31) / 32 * 32), stream);
}

}  // namespace weft
