#include "exec/ce_runner.hpp"

#include <algorithm>
#include <cstring>

#include "exec/ce.hpp"
#include "exec/device_memory.hpp"
#include "exec/executor.hpp"
#include "proxy/copy_engine.hpp"
#include "proxy/proxy.hpp"
#include "bootstrap/bootstrap.hpp"
#include "util/cuda_check.hpp"
#include "exec/host_reduce.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {

std::string handle_key(const cudaIpcMemHandle_t& h) { return std::string(h.reserved, sizeof(h.reserved)); }

constexpr uint64_t kMaxMemory = device::ProxyTrigger::kMaxField;  // a proxy memory is below 4 GiB

}  // namespace

/// What each rank tells the others at every copy-engine call.
struct CeRunner::Record {
  uint32_t ok = 0;                  ///< this rank can run the call by copy engines
  uint32_t pad = 0;
  cudaIpcMemHandle_t out_handle{};  ///< the allocation holding its receive buffer
  uint64_t out_alloc = 0;           ///< that allocation's address in its process
  uint64_t out_alloc_bytes = 0;     ///< and size
  uint64_t reg_offset = 0;          ///< the registration's start in the allocation
  uint64_t reg_bytes = 0;
  uint64_t recv_offset = 0;         ///< the receive buffer's start in the registration
  cudaIpcMemHandle_t scratch_handle{};
  uint64_t scratch = 0, scratch_bytes = 0;
};

CeRunner::CeRunner(CeContext ctx) : ctx_(std::move(ctx)) {
  RelaxedCapture relaxed;
  DeviceGuard guard(ctx_.device);
  const int R = ctx_.nranks, me = ctx_.rank;
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&sig_), 2 * static_cast<size_t>(R) * sizeof(uint64_t)));
  {  // on a private stream: the caller's may be capturing a graph
    cudaStream_t s = nullptr;
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaError_t e = cudaMemsetAsync(sig_, 0, 2 * static_cast<size_t>(R) * sizeof(uint64_t), s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    WEFT_CUDA_CHECK(e);
  }
  struct SigInfo {
    cudaIpcMemHandle_t handle;
    uint64_t address;
  };
  std::vector<SigInfo> all(static_cast<size_t>(R));
  WEFT_CUDA_CHECK(cudaIpcGetMemHandle(&all[static_cast<size_t>(me)].handle, sig_));
  all[static_cast<size_t>(me)].address = reinterpret_cast<uint64_t>(sig_);
  ctx_.boot->allgather(all.data(), sizeof(SigInfo), config::wait_seconds(ctx_.timeout_s));

  proxy::ProxyOptions po;
  po.name = "copy-engine proxy of rank " + std::to_string(me) + " (GPU " + std::to_string(ctx_.device) + ")";
  po.timeout_s = ctx_.timeout_s;
  po.memory = proxy::cuda_fifo_memory(ctx_.device);
  po.on_error = ctx_.on_error;
  proxy_ = std::make_unique<proxy::Proxy>(po);
  const uint32_t local_sig = proxy_->add_local_memory(sig_, 2 * static_cast<uint64_t>(R) * sizeof(uint64_t));
  ++memories_;
  conns_.resize(static_cast<size_t>(R));
  channels_.resize(static_cast<size_t>(R));
  for (int q = 0; q < R; ++q) {
    if (q == me) continue;
    const SigInfo& si = all[static_cast<size_t>(q)];
    const uint64_t sig_bytes = 2 * static_cast<uint64_t>(R) * sizeof(uint64_t);
    char* peer_sig = map_peer(q, si.handle, si.address, sig_bytes, sig_bytes);
    auto conn = std::make_shared<proxy::CopyEngineEndpoint>(ctx_.device, "rank " + std::to_string(q), ctx_.timeout_s);
    conns_[static_cast<size_t>(q)] = conn;
    const uint32_t rs = proxy_->add_remote_memory(
        conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(peer_sig), 2 * static_cast<uint64_t>(R) * sizeof(uint64_t), nullptr});
    ++memories_;
    remote_[{q, reinterpret_cast<uint64_t>(peer_sig), 2 * static_cast<uint64_t>(R) * sizeof(uint64_t)}] = rs;
    channels_[static_cast<size_t>(q)] = proxy_->make_port_channel(proxy::PortChannelSpec{
        conn, local_sig, rs, rs, static_cast<uint64_t>(me) * sizeof(uint64_t), sig_ + q, sig_ + R + q});
  }
  proxy_->start();
  WEFT_LOG(Info, "CE", "rank " << me << ": copy-engine collectives ready (proxy thread, " << R - 1
                                << " copy-engine endpoints)");
}

CeRunner::~CeRunner() {
  DeviceGuard guard(ctx_.device);
  if (proxy_) proxy_->stop();
  proxy_.reset();
  conns_.clear();  // each waits for its stream
  for (const ce::PeerMapping& m : maps_) cudaIpcCloseMemHandle(reinterpret_cast<void*>(m.local));
  for (void* p : scratch_) cudaFree(p);
  if (sig_) cudaFree(sig_);
  cudaGetLastError();
}

char* CeRunner::map_peer(int peer, const cudaIpcMemHandle_t& handle, uint64_t address, uint64_t bytes,
                              uint64_t alloc_bytes) {
  // A rank of this process: its address is valid here (peer access is enabled at creation).
  if (ctx_.peer_device[static_cast<size_t>(peer)] >= 0) return reinterpret_cast<char*>(address);
  auto key = std::make_tuple(peer, handle_key(handle));
  auto it = mapped_.find(key);
  if (it != mapped_.end()) return it->second;
  // A handle not seen before whose allocation overlaps one mapped earlier: the peer freed
  // that one and allocated over its addresses (the graph test does, between cases). The old
  // mapping no longer reaches the peer's memory and keeps the driver from opening the new
  // handle ("resource already mapped"): close it, and forget what was reached through it.
  // The peer freed it after its last call, whose copies into it this rank's proxy had
  // finished (a peer waits for the signals behind them), so no queued copy targets it.
  const std::vector<size_t> stale = ce::stale_mappings(maps_, peer, address, std::max<uint64_t>(alloc_bytes, 1));
  for (size_t k = stale.size(); k-- > 0;) {
    const ce::PeerMapping m = maps_[stale[k]];
    for (auto mi = mapped_.begin(); mi != mapped_.end();) {
      const uint64_t v = reinterpret_cast<uint64_t>(mi->second);
      if (std::get<0>(mi->first) == peer && v >= m.local_base && v - m.local_base < m.local_bytes) mi = mapped_.erase(mi);
      else ++mi;
    }
    cudaIpcCloseMemHandle(reinterpret_cast<void*>(m.local));
    cudaGetLastError();
    maps_.erase(maps_.begin() + static_cast<std::ptrdiff_t>(stale[k]));
    WEFT_LOG(Debug, "CE", "rank " << ctx_.rank << ": rank " << peer << " allocated over a buffer it freed (0x" << std::hex
                                  << m.peer_address << std::dec << "); its old mapping closed");
  }
  void* p = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e == cudaErrorAlreadyMapped) {
    // The driver maps a peer's whole chunk: a small cudaMalloc of the peer sub-allocated in
    // a chunk this process opened already (for a buffer freed since, or another live one)
    // has a handle of its own that cannot be opened again. Reach it through that mapping.
    cudaGetLastError();
    const int k = ce::covering_mapping(maps_, peer, address, bytes);
    if (k >= 0) {
      const ce::PeerMapping& m = maps_[static_cast<size_t>(k)];
      char* here = reinterpret_cast<char*>(m.local + (address - m.peer_address));
      WEFT_LOG(Debug, "CE", "rank " << ctx_.rank << ": rank " << peer << "'s allocation at 0x" << std::hex << address
                                    << std::dec << " lies in a chunk mapped already; reached through it");
      mapped_[key] = here;
      return here;
    }
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(ErrorCode::UnhandledCuda, "rank " + std::to_string(ctx_.rank) + ": cannot map rank " + std::to_string(peer) +
                                       "'s buffer for the copy engines (" + cudaGetErrorString(e) + ")");
  }
  ce::PeerMapping m;
  m.peer = peer;
  m.peer_address = address;
  m.peer_bytes = std::max<uint64_t>(alloc_bytes, bytes);
  m.local = reinterpret_cast<uint64_t>(p);
  if (!exec::allocation_range(p, &m.local_base, &m.local_bytes)) {
    cudaGetLastError();
    m.local_base = m.local;
    m.local_bytes = bytes;
  }
  maps_.push_back(m);
  mapped_[key] = static_cast<char*>(p);
  return static_cast<char*>(p);
}

void CeRunner::add_memories(const std::function<void()>& adds) {
  // The proxy's tables change only while it is stopped; queued triggers wait meanwhile.
  proxy_->stop();
  try {
    adds();
  } catch (...) {
    proxy_->start();
    throw;
  }
  proxy_->start();
}

CeRunner::LocalMem CeRunner::local_memory(const void* ptr, uint64_t bytes,
                                                    std::vector<std::function<void()>>& adds) {
  uint64_t base = 0, size = 0;
  if (!exec::allocation_range(ptr, &base, &size) || size > kMaxMemory) {  // the range itself
    base = reinterpret_cast<uint64_t>(ptr);
    size = std::max<uint64_t>(bytes, 1);
  }
  auto key = std::make_pair(base, size);
  auto it = local_.find(key);
  if (it == local_.end()) {
    const uint32_t id = memories_++;
    it = local_.emplace(key, id).first;
    adds.push_back([this, base, size, id] {
      if (proxy_->add_local_memory(reinterpret_cast<const void*>(base), size) != id)
        fail(ErrorCode::Internal, "copy-engine proxy: memory ids out of step");
    });
  }
  return LocalMem{reinterpret_cast<const char*>(base), it->second};
}

uint32_t CeRunner::remote_memory(int peer, char* ptr, uint64_t bytes, std::vector<std::function<void()>>& adds) {
  auto key = std::make_tuple(peer, reinterpret_cast<uint64_t>(ptr), bytes);
  auto it = remote_.find(key);
  if (it != remote_.end()) return it->second;
  const uint32_t id = memories_++;
  remote_[key] = id;
  std::shared_ptr<proxy::Endpoint> conn = conns_[static_cast<size_t>(peer)];
  adds.push_back([this, conn, ptr, bytes, id] {
    if (proxy_->add_remote_memory(conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(ptr), bytes, nullptr}) != id)
      fail(ErrorCode::Internal, "copy-engine proxy: memory ids out of step");
  });
  return id;
}

void CeRunner::note_fallback(const std::string& why) {
  // INFO the first time for each reason, DEBUG after.
  if (fallbacks_[why]++ == 0)
    WEFT_LOG(Info, "CE", "rank " << ctx_.rank << ": " << why << "; this call and others like it run on the SM path");
  else
    WEFT_LOG(Debug, "CE", "rank " << ctx_.rank << ": " << why << "; SM path");
}

void CeRunner::map_call(Collective c, const std::vector<Record>& all, uint64_t scratch_need, const void* recv,
                             uint64_t recv_bytes, const void* in_ptr, uint64_t in_bytes,
                             std::vector<std::function<void()>>& adds, LocalMem* out_mem, LocalMem* in_mem,
                             std::vector<std::array<uint32_t, 3>>* dst_mem, std::vector<uint64_t>* dst_base) {
  const int R = ctx_.nranks, me = ctx_.rank;
  *out_mem = local_memory(recv, recv_bytes, adds);
  *in_mem = in_ptr != nullptr ? local_memory(in_ptr, in_bytes, adds) : *out_mem;
  for (int q = 0; q < R; ++q) {
    if (q == me) continue;
    const Record& rq = all[static_cast<size_t>(q)];
    char* alloc_q = map_peer(q, rq.out_handle, rq.out_alloc, rq.reg_offset + rq.reg_bytes, rq.out_alloc_bytes);
    (*dst_mem)[static_cast<size_t>(q)][1] = remote_memory(q, alloc_q + rq.reg_offset, rq.reg_bytes, adds);
    (*dst_base)[static_cast<size_t>(q)] = rq.recv_offset;
    if (c == Collective::AllReduce) {
      if (rq.scratch_bytes < scratch_need)
        fail(ErrorCode::Internal, "copy-engine scratch out of step with rank " + std::to_string(q));
      char* s = map_peer(q, rq.scratch_handle, rq.scratch, rq.scratch_bytes, rq.scratch_bytes);
      (*dst_mem)[static_cast<size_t>(q)][2] = remote_memory(q, s, rq.scratch_bytes, adds);
    }
  }
}

std::string CeRunner::local_record(Collective c, const void* recv, const ce::Geometry& g, Record* mine) {
  const int R = ctx_.nranks;
  const std::string coll(to_string(c));
  std::string why;
  uint64_t reg = 0, reg_bytes = 0, alloc = 0, alloc_bytes = 0;
  // Worst case: a local memory for each buffer, the peers' receive buffers and scratch.
  const uint32_t need = 2 + 2 * static_cast<uint32_t>(R - 1);
  if (!ce::supports(c) || R < 2 || R > ce::kMaxRanks)
    why = coll + " on " + std::to_string(R) + " ranks has no copy-engine plan (AllGather and AllReduce, 2 to " +
          std::to_string(ce::kMaxRanks) + " ranks)";
  else if (!ctx_.registered(recv, g.total[1], &reg, &reg_bytes))
    why = coll + "'s receive buffer is not registered (weftCommRegister): copy engines write into peers' registered "
                 "buffers only";
  else if (reg_bytes > kMaxMemory || g.total[2] > kMaxMemory)
    why = coll + ": a registration or scratch of 4 GiB or more is beyond the copy-engine proxy's 32-bit offsets";
  else if (memories_ + need > device::ProxyTrigger::kMaxMemIds)
    why = coll + ": the copy-engine proxy's table of " + std::to_string(device::ProxyTrigger::kMaxMemIds) +
          " memories is full (too many distinct buffers)";
  else if (!exec::allocation_range(recv, &alloc, &alloc_bytes) || cudaIpcGetMemHandle(&mine->out_handle, reinterpret_cast<void*>(alloc)) != cudaSuccess) {
    cudaGetLastError();
    why = coll + "'s receive buffer cannot be shared through CUDA IPC (not from cudaMalloc?)";
  }
  // Every rank grows its scratch at the same call (the same arguments), registered or not.
  if (ce::supports(c) && g.total[2] > scratch_bytes_ && g.total[2] <= kMaxMemory) {
    void* p = nullptr;
    WEFT_CUDA_CHECK(cudaMalloc(&p, g.total[2]));
    WEFT_CUDA_CHECK(cudaIpcGetMemHandle(&scratch_handle_, p));
    scratch_.push_back(p);  // earlier ones may still be written by peers' queued copies
    scratch_bytes_ = g.total[2];
  }
  if (why.empty()) {
    mine->ok = 1;
    mine->out_alloc = alloc;
    mine->out_alloc_bytes = alloc_bytes;
    mine->reg_offset = reg - alloc;
    mine->reg_bytes = reg_bytes;
    mine->recv_offset = reinterpret_cast<uint64_t>(recv) - reg;
    mine->scratch_handle = scratch_handle_;
    mine->scratch = scratch_.empty() ? 0 : reinterpret_cast<uint64_t>(scratch_.back());
    mine->scratch_bytes = scratch_bytes_;
  }
  return why;
}

bool CeRunner::map_agreed(Collective c, const std::vector<Record>& all, const ce::Geometry& g, const void* recv,
                               const char* in_ptr, CallMemories* mem) {
  // Memories: this rank's buffers (sources of puts), the peers' registrations and scratch.
  // Opening a peer's memory may fail on one rank only. Then this rank's tables are rolled
  // back (no memory id is left promised to the proxy) and, whenever the records hold
  // anything not mapped at an earlier call, the ranks agree: all run the call by copy
  // engines, or all return false (the SM path), so no rank waits for a peer that gave up.
  const int R = ctx_.nranks, me = ctx_.rank;
  std::vector<std::function<void()>> adds;
  mem->dst.assign(static_cast<size_t>(R), {});
  mem->dst_base.assign(static_cast<size_t>(R), 0);
  const std::string records(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(Record));
  std::string map_error;
  {
    const auto saved_local = local_;
    const auto saved_remote = remote_;
    const uint32_t saved_memories = memories_;
    try {
      map_call(c, all, g.total[2], recv, g.total[1], in_ptr, g.total[0], adds, &mem->out, &mem->in, &mem->dst,
               &mem->dst_base);
    } catch (const std::exception& e) {
      map_error = e.what();
      local_ = saved_local;
      remote_ = saved_remote;
      memories_ = saved_memories;
      adds.clear();
    }
  }
  if (records != agreed_) {  // the same on every rank: all compare the same records
    std::vector<uint32_t> oks(static_cast<size_t>(R));
    oks[static_cast<size_t>(me)] = map_error.empty() ? 1 : 0;
    ctx_.boot->allgather(oks.data(), sizeof(uint32_t), config::wait_seconds(ctx_.timeout_s));
    int bad = -1;
    for (int q = 0; q < R && bad < 0; ++q)
      if (oks[static_cast<size_t>(q)] == 0) bad = q;
    if (bad >= 0) {
      if (!map_error.empty()) WEFT_LOG(Warn, "CE", map_error << "; every rank runs this call on the SM path");
      if (!adds.empty()) add_memories([&] {  // ids promised here stay in step with the proxy
        for (auto& f : adds) f();
      });
      note_fallback(std::string(to_string(c)) + ": rank " + std::to_string(bad) +
                    " cannot map its peers' buffers (its log says why)");
      agreed_.clear();  // the failed attempt may have closed stale mappings: agree again next time
      return false;
    }
    agreed_ = records;
  } else if (!map_error.empty()) {
    fail(ErrorCode::Internal, map_error);  // unreachable: these records were all mapped before
  }
  if (!adds.empty())
    add_memories([&] {
      for (auto& f : adds) f();
    });
  return true;
}

void CeRunner::launch_program(const std::vector<ce::Step>& prog, const ce::Geometry& g, const char* in_ptr,
                                   void* recv, int dtype, int op, const CallMemories& mem, cudaStream_t stream) {
  const int R = ctx_.nranks, me = ctx_.rank;
  char* scratch = scratch_.empty() ? nullptr : static_cast<char*>(scratch_.back());
  auto ptr = [&](const BufferRange& b) -> char* {
    char* base = b.buffer == Buffer::Input ? const_cast<char*>(in_ptr) : b.buffer == Buffer::Output ? static_cast<char*>(recv) : scratch;
    return base + g.offset(b);
  };

  exec::CeTriggerArgs ta{};
  for (int q = 0; q < R; ++q) ta.ch[q] = channels_[static_cast<size_t>(q)];
  ta.rank = me;
  ta.timeout_ns = static_cast<uint64_t>(ctx_.timeout_s * 1e9);
  ta.error_claim = ctx_.error_claim;
  ta.error = ctx_.error;
  ta.abort = ctx_.abort;
  blocks_ = Blocks{};
  auto launch_triggers = [&] {
    if (ta.nsteps == 0) return;
    exec::launch_ce_triggers(ta, stream);
    ++blocks_.trigger_launches;
    ta.nsteps = 0;
  };
  // A run of local steps with one destination: dst := a (op) sources.
  LocalRun run;
  for (const ce::Step& s : prog) {
    if (s.op == ce::StepOp::Copy || s.op == ce::StepOp::Reduce) {
      launch_triggers();
      char* d = ptr(s.dst);
      if (d != run.dst) {
        finish_local(&run, dtype, op, stream);
        run.dst = d;
        run.a = d;
        run.bytes = g.length(s.dst, s.count);
      }
      if (s.op == ce::StepOp::Copy) run.a = ptr(s.src);
      else run.src.push_back(ptr(s.src));
      continue;
    }
    finish_local(&run, dtype, op, stream);
    exec::CeDevStep d{};
    d.peer = static_cast<uint8_t>(std::max(0, s.peer));
    d.rank = static_cast<uint16_t>(std::max(0, s.peer));
    switch (s.op) {
      case ce::StepOp::Signal: d.op = exec::kCeSignal; break;
      case ce::StepOp::Wait: d.op = exec::kCeWait; break;
      case ce::StepOp::Flush:
        d.op = exec::kCeFlush;
        d.peer = static_cast<uint8_t>(me == 0 ? 1 : 0);  // any channel: a flush covers the whole FIFO
        break;
      default: {
        d.op = exec::kCePut;
        const LocalMem& src = s.src.buffer == Buffer::Output ? mem.out : mem.in;
        d.src_mem = static_cast<uint16_t>(src.id);
        d.src_off = static_cast<uint64_t>(ptr(s.src) - src.base);
        d.dst_mem = static_cast<uint16_t>(mem.dst[static_cast<size_t>(s.peer)][static_cast<size_t>(s.dst.buffer)]);
        d.dst_off = (s.dst.buffer == Buffer::Output ? mem.dst_base[static_cast<size_t>(s.peer)] : 0) + g.offset(s.dst);
        d.bytes = g.length(s.src, s.count);
        if (d.bytes == 0) d.src_off = d.dst_off = 0;  // an empty chunk still signals; its offset may lie past the end
        break;
      }
    }
    if (ta.nsteps == exec::kCeMaxSteps) launch_triggers();
    ta.steps[ta.nsteps++] = d;
  }
  finish_local(&run, dtype, op, stream);
  launch_triggers();
}

void CeRunner::finish_local(LocalRun* run, int dtype, int op, cudaStream_t stream) {
  if (run->dst == nullptr) return;
  if (run->bytes > 0 && run->src.empty()) {
    if (run->a != run->dst) WEFT_CUDA_CHECK(cudaMemcpyAsync(run->dst, run->a, run->bytes, cudaMemcpyDeviceToDevice, stream));
  } else if (run->bytes > 0) {
    for (size_t k = 0; k < run->src.size(); k += exec::kCeMaxSources) {
      exec::CeReduceArgs ra{};
      ra.dst = run->dst;
      ra.a = k == 0 ? run->a : run->dst;
      ra.nsrc = static_cast<int32_t>(std::min<size_t>(exec::kCeMaxSources, run->src.size() - k));
      for (int i = 0; i < ra.nsrc; ++i) ra.src[i] = run->src[k + static_cast<size_t>(i)];
      ra.bytes = run->bytes;
      ra.dtype = static_cast<uint8_t>(dtype);
      ra.op = static_cast<uint8_t>(combining_op(op));
      const uint64_t per_block = uint64_t(exec::kCeReduceThreads) * 16 * 4;
      const int blocks = static_cast<int>(std::clamp<uint64_t>((run->bytes + per_block - 1) / per_block, 1, ce::kMaxReduceBlocks));
      exec::launch_ce_reduce(ra, blocks, stream);
      blocks_.reduce_blocks = std::max(blocks_.reduce_blocks, blocks);
    }
  }
  run->dst = nullptr;
  run->src.clear();
}

bool CeRunner::run(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op, bool in_place,
                        cudaStream_t stream) {
  RelaxedCapture relaxed;
  DeviceGuard guard(ctx_.device);
  const int R = ctx_.nranks, me = ctx_.rank;
  const ce::Geometry g = ce::make_geometry(c, R, count, host::dtype_size(dtype));
  const std::string coll(to_string(c));

  // This rank's part of the record, and why it cannot take part if so; every rank's.
  Record mine;
  const std::string why = local_record(c, recv, g, &mine);
  std::vector<Record> all(static_cast<size_t>(R));
  all[static_cast<size_t>(me)] = mine;
  ctx_.boot->allgather(all.data(), sizeof(Record), config::wait_seconds(ctx_.timeout_s));
  if (!why.empty()) {
    note_fallback(why);
    return false;
  }
  for (int q = 0; q < R; ++q)
    if (all[static_cast<size_t>(q)].ok == 0) {
      note_fallback(coll + ": rank " + std::to_string(q) + " cannot run it by copy engines (its log says why)");
      return false;
    }

  const char* in_ptr = static_cast<const char*>(in_place ? recv : send);
  if (c == Collective::AllGather && in_place) in_ptr = nullptr;  // the plan reads its output chunk
  CallMemories mem;
  if (!map_agreed(c, all, g, recv, in_ptr, &mem)) return false;

  auto& progs = programs_[{static_cast<int>(c), in_place, g.pieces}];
  if (progs.empty()) progs = ce::lower_ce_plan(ce::ce_plan(c, R, in_place, g.pieces));
  launch_program(progs[static_cast<size_t>(me)], g, in_ptr, recv, dtype, op, mem, stream);
  if (c == Collective::AllReduce && divides(op)) launch_divide(recv, count, dtype, R, stream);
  WEFT_LOG(Debug, "CE", "rank " << me << ": " << coll << " of " << count << " x " << host::dtype_name(dtype)
                                << " by copy engines: " << blocks_.trigger_launches
                                << " trigger launches of one thread, reduce on " << blocks_.reduce_blocks
                                << " thread blocks, none moving data between GPUs");
  return true;
}

}  // namespace weft
