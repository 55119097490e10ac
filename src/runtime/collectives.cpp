// Communicator::collective: from a C API call to a launch: decide() (tune/decide.hpp) says
// what runs, this file launches it (the one-shot kernel, the copy engines, or a plan on the
// interpreter or a generated kernel).
#include <algorithm>

#include "runtime/communicator.hpp"
#include "runtime/window_rules.hpp"
#include "tune/cta_policy.hpp"
#include "util/cuda_check.hpp"
#include "exec/executor.hpp"
#include "gen/kernels.hpp"
#include "ir/call_buffers.hpp"
#include "ir/datatype.hpp"
#include "net/net_fifos.hpp"
#include "util/checked.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {
constexpr uint64_t kWindowPieceBytes = 64 << 10;
}  // namespace

// A decision's protocol is the executor's code (exec/exec_plan.hpp).
static_assert(static_cast<int>(algo::Protocol::Simple) == exec::kSimple && static_cast<int>(algo::Protocol::LL) == exec::kLL &&
              static_cast<int>(algo::Protocol::LL128) == exec::kLL128);

void Communicator::collective(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op,
                              int root, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  // Built only when needed: this function is on every small call's critical path.
  auto what = [&] { return std::string(to_string(c)) + " on rank " + std::to_string(rank_); };
  const size_t esz = dtype_bytes(dtype);
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
  const uint64_t send_bytes = checked_mul(send_counts(c, nranks_), bytes, "the send buffer's size");
  const uint64_t recv_bytes = checked_mul(recv_counts(c, nranks_), bytes, "the receive buffer's size");
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
    WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << dtype_name(dtype)
                                   << (in_place ? ", one rank in place: nothing to do" : ", one rank: a copy"));
    return;
  }
  // The one decision (tune/decide.hpp): algorithm, executor, protocol, instances and
  // micro-batch, in integers; the environment was read at creation.
  const uint64_t payload = std::max(send_bytes, recv_bytes);
  // The receive buffer's memory window (runtime/windows.cpp): looked up only while windows
  // are registered, and only for the collectives windows take to the copy engines.
  const weftWindow* w = windows_.empty() || !zero_cta_collective(c) ? nullptr : window_of(r, recv_bytes);
  const WindowKind wk = w == nullptr                                       ? WindowKind::None
                        : w->mapped && (w->flags & kWinSymmetric) != 0 ? WindowKind::Symmetric
                                                                         : WindowKind::Default;
  const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
  const Call call{c, payload, in_place, wk, rooted ? root : 0};
  const Decision d = decider_->decide(call);
  const Launch* l = &d;
  if (d.executor == algo::Executor::CopyEngineDirect) {
    // Copy engines straight into the peers' symmetric windows (runtime/zero_copy.cpp).
    run_window_direct(c, *w, s, r, bytes, root, in_place, stream);
    note_launch(stream);
    return;
  }
  if (d.executor == algo::Executor::CopyEngineExchange) {
    // Copy engines into registered buffers or windows (exec/ce_runner.hpp); where any rank
    // cannot, every rank runs the decision's fallback instead (logged at INFO).
    if (run_copy_engine(c, s, r, count, dtype, reduces ? op : weftSum, in_place, stream, root)) {
      note_launch(stream);
      return;
    }
    l = &d.fallback;
  }
  if (l->note != ProtocolNote::None)
    WEFT_LOG(Debug, "COLL", what() << ": " << describe(l->note, l->chosen, layout_.cfg.slot_bytes, layout_.cfg.ll_slot_bytes));
  if (l->executor == algo::Executor::OneShot) {
    if (trace_cap_ > 0)
      start_trace(nullptr, nullptr, c, to_choice(*l), payload, "the one-shot kernel records no timestamps", stream);
    launch_oneshot_call(c, s, r, bytes, dtype, reduces ? op : weftSum, l->instances, root, stream);
    note_launch(stream);
    WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << dtype_name(dtype) << " with the one-shot kernel");
    return;
  }
  launch_plan_call(call, *l, s, r, count, esz, dtype, op, root, stream);
}

void Communicator::launch_plan_call(const Call& call, const Launch& l, const char* s, char* r, uint64_t count, size_t esz,
                                    int dtype, int op, int root, cudaStream_t stream) {
  const Collective c = call.collective;
  const bool reduces = c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
  const uint64_t payload = call.bytes;
  void* recv = r;
  auto what = [&] { return std::string(to_string(c)) + " on rank " + std::to_string(rank_); };
  CachedPlan& cp = plan_for(call, l, root);
  const exec::Protocol proto = static_cast<exec::Protocol>(l.protocol);
  const bool ll = proto == exec::kLL;
  // LL: half of an LL slot is data. LL128: its lines fill the Simple slot (make_geometry
  // counts whole lines of 120 data bytes per piece).
  const uint64_t cap = ll ? layout_.cfg.ll_slot_bytes / 2 : layout_.cfg.slot_bytes;
  // The most bytes per chunk slot and micro-batch (WEFT_MICROBATCH_BYTES, else the row's;
  // 0: sized by the slots).
  const uint64_t target = l.microbatch_bytes;
  // A window of micro-batches (WEFT_MB_WINDOW) needs chunks cut into at least that many,
  // where each block's piece keeps 64 KiB (smaller ones cost more per message than they hide).
  exec::Geometry g = make_geometry(cp.lp, count, static_cast<uint32_t>(esz), cap, target, proto, cp.mb_window,
                                   kWindowPieceBytes);

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
  a.conn_cache = cp.conn_cache;
  a.mb_window = cp.mb_window;
  a.mover_wide = cp.mover_wide ? 1 : 0;
  a.warm = cp.warm ? 1 : 0;
  a.ll_kernel = cp.ll_kernel && !a.net ? 1 : 0;  // exec_launch.cuh: untraced, not with the posting warp
  a.post_thread = cp.post_thread ? 1 : 0;
  if (cp.fits_inline) {
    const LoweredRank& lr = cp.lp.ranks[static_cast<size_t>(rank_)];
    a.inline_plan = 1;
    std::copy(lr.tbs.begin(), lr.tbs.end(), a.itbs);
    std::copy(lr.slots.begin(), lr.slots.end(), a.islots);
    std::copy(cp.conns_host.begin(), cp.conns_host.end(), a.iconns);
  }
  if (cp.roles > 1) {  // each role whole warps (exec_kernel splits the block evenly)
    a.roles = cp.roles;
    a.block_tbs = cp.block_tbs;
  }
  const int threads = exec_threads(g, proto, cp.roles);
  if (trace_cap_ > 0) start_trace(&a, &cp, c, to_choice(l), payload, "", stream);
  // The posting warp (WEFT_POST_WARP): untraced, one plan thread block per CUDA block, the interpreter.
  a.post_warp = cp.post_warp && cp.roles == 1 && a.trace == nullptr && !cp.gen ? 1 : 0;
  // Generated kernels: one plan thread block per CUDA block (plans never group under gen);
  // traced calls run the interpreter's traced instantiation (as LL128 and links across nodes
  // do: decide() gives them Executor::Interpreter).
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
  WEFT_LOG(Debug, "COLL", what() << ": " << count << " x " << dtype_name(dtype) << " with "
                               << algo::registry().at(l.algorithm).name() << "/" << algo::to_string(l.protocol) << " x"
                               << l.instances << ", " << g.nmb << " micro-batches of "
                               << g.mb << " elements, " << cp.num_tbs << " thread blocks in " << cp.num_blocks
                               << " CUDA blocks" << (generated != nullptr ? " (generated kernel)" : ""));
}

void Communicator::launch_oneshot_call(Collective c, const void* send, void* recv, uint64_t bytes, int dtype, int op,
                                       int blocks, int root, cudaStream_t stream) {
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
  a.root = root;
  switch (c) {
    case Collective::AllReduce: a.mode = exec::kOneShotAllReduce; break;
    case Collective::AllGather: a.mode = exec::kOneShotAllGather; break;
    case Collective::ReduceScatter: a.mode = exec::kOneShotReduceScatter; break;
    case Collective::Broadcast: a.mode = exec::kOneShotBroadcast; break;
    case Collective::Reduce: a.mode = exec::kOneShotReduce; break;
    case Collective::AllToAll: a.mode = exec::kOneShotAllToAll; break;
    default: fail(ErrorCode::Internal, "the one-shot kernel does not run " + std::string(to_string(c)));
  }
  a.op = static_cast<uint8_t>(op);
  a.dtype = static_cast<uint8_t>(dtype);
  // Every rank derives the same block count from the same arguments (the epochs rely on
  // it); the regions bound it below, and a block needs at least one word.
  const uint64_t words = (bytes + 7) / 8;
  const uint64_t per_block_max = static_cast<uint64_t>(exec::kOneShotThreads) * exec::kOneShotWordsPerThread;
  uint64_t nb = std::clamp<uint64_t>(static_cast<uint64_t>(std::max(1, blocks)), 1, exec::kOneShotBlocks);
  nb = std::max<uint64_t>(std::min<uint64_t>(nb, words), (words + per_block_max - 1) / per_block_max);
  // WEFT_ONESHOT_THREADS below 512: blocks of at most that many threads while the call
  // fits one word per thread in kOneShotBlocks of them.
  const uint64_t cap = static_cast<uint64_t>(oneshot_threads_);
  if (cap < exec::kOneShotThreads && words <= cap * exec::kOneShotBlocks) nb = std::max(nb, (words + cap - 1) / cap);
  a.words_per_block = (words + nb - 1) / nb;
  nb = (words + a.words_per_block - 1) / a.words_per_block;
  // One word per thread where the block's share allows, in whole warps.
  const uint64_t per_thread = (a.words_per_block + exec::kOneShotThreads - 1) / exec::kOneShotThreads;
  const uint64_t threads = std::clamp<uint64_t>((a.words_per_block + per_thread - 1) / per_thread, 32,
                                                exec::kOneShotThreads);
  // One word per thread: the kernel that polls every peer at once (WEFT_ONESHOT_POLL=all).
  a.one_word = per_thread == 1 && !oneshot_seq_ ? 1 : 0;
  launch_oneshot(a, static_cast<int>(nb), static_cast<int>((threads + 31) / 32 * 32), stream,
                 oneshot_pdl_ && nb <= static_cast<uint64_t>(exec::kOneShotPdlMaxBlocks));
}

}  // namespace weft
