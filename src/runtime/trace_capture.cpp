// Measured traces on the runtime's side (docs/traces.md): arming the next call, the traced
// launch's buffer, and reading it back as one rank's MeasuredRank (sim/measured_trace.hpp);
// and the internal C entry points `weft bench --trace` reaches them through
// (runtime/trace_api.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ir/trace_record.hpp"
#include "runtime/c_api_internal.hpp"
#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "runtime/trace_api.h"
#include "sim/measured_trace.hpp"
#include "weft/weft.h"

namespace weft {

void Communicator::arm_trace(uint32_t records_per_block) {
  std::lock_guard<std::mutex> lock(mu_);
  if (records_per_block == 0 || records_per_block > 1'000'000)
    fail(ErrorCode::InvalidArgument, "a trace holds 1 to 1000000 records per thread block, not " +
                                         std::to_string(records_per_block));
  trace_cap_ = records_per_block;
  trace_meta_.clear();
}

void Communicator::start_trace(exec::ExecArgs* a, const CachedPlan* cp, Collective c, const Choice& ch,
                               uint64_t payload, const std::string& why_not, cudaStream_t stream) {
  const uint32_t cap = trace_cap_;
  trace_cap_ = 0;  // one call per arm_trace
  sim::MeasuredRank m;
  m.rank = rank_;
  m.nranks = nranks_;
  m.collective = std::string(to_string(c));
  m.algorithm = describe_choice(ch);
  m.protocol = ch.protocol;
  m.bytes = payload;
  m.fifo_depth = layout_.cfg.depth;
  std::string why = why_not;
  if (why.empty() && a->dtype != weftFloat32) why = "only float32 calls are traced (the traced kernel is built for it)";
  if (why.empty() && a->net) why = "calls across (emulated) nodes are not traced";
  if (!why.empty() || cp == nullptr) {
    m.kernel = cp == nullptr ? ch.algorithm : "interpreter (untraced)";
    m.note = why;
    trace_meta_ = sim::measured_rank_to_json(m);
    return;
  }
  const LoweredRank& lr = cp->lp.ranks[static_cast<size_t>(rank_)];
  for (size_t t = 0; t < lr.tbs.size(); ++t)
    for (int32_t j = 0; j < lr.tbs[t].nslots; ++j) {
      const exec::DevSlot& s = lr.slots[static_cast<size_t>(lr.tbs[t].slot_begin + j)];
      sim::MeasuredSlot ms;
      ms.tb = static_cast<int32_t>(t);
      ms.local = j;
      ms.prim = static_cast<Primitive>(s.prim);
      if (s.send_conn >= 0) {
        ms.send_peer = lr.conns[static_cast<size_t>(s.send_conn)].peer;
        ms.send_conn = lr.conns[static_cast<size_t>(s.send_conn)].pool_index;
      }
      if (s.recv_conn >= 0) {
        ms.recv_peer = lr.conns[static_cast<size_t>(s.recv_conn)].peer;
        ms.recv_conn = lr.conns[static_cast<size_t>(s.recv_conn)].pool_index;
      }
      m.slots.push_back(ms);
    }
  m.kernel = "interpreter";
  m.microbatches = a->geo.nmb;
  const uint64_t bytes = static_cast<uint64_t>(cp->num_tbs) * exec::trace_region_bytes(cap);
  if (trace_buf_ != nullptr) WEFT_CUDA_CHECK(cudaFree(trace_buf_));
  trace_buf_ = nullptr;
  WEFT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&trace_buf_), bytes));
  // Blocks without slots return before touching their region: they read back as empty. On
  // the call's stream, ahead of its kernel.
  WEFT_CUDA_CHECK(cudaMemsetAsync(trace_buf_, 0, bytes, stream));
  trace_bytes_ = bytes;
  trace_buf_cap_ = cap;
  a->trace = trace_buf_;
  a->trace_cap = cap;
  trace_meta_ = sim::measured_rank_to_json(m);
}

std::string Communicator::take_trace(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (trace_meta_.empty())
    fail(ErrorCode::InvalidUsage, "rank " + std::to_string(rank_) + ": no traced call has run since the trace was armed");
  sim::MeasuredRank m = sim::measured_rank_from_json(trace_meta_, "the traced call");
  trace_meta_.clear();
  if (trace_buf_ == nullptr) return sim::measured_rank_to_json(m);
  DeviceGuard guard(device_);
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<char> host(trace_bytes_);
  WEFT_CUDA_CHECK(cudaMemcpy(host.data(), trace_buf_, trace_bytes_, cudaMemcpyDeviceToHost));
  WEFT_CUDA_CHECK(cudaFree(trace_buf_));
  trace_buf_ = nullptr;
  m.blocks = sim::blocks_from_trace_buffer(host.data(), trace_bytes_, trace_buf_cap_);
  return sim::measured_rank_to_json(m);
}

}  // namespace weft

using weft::api_guard;
using weft::communicator_of;

extern "C" {

weftResult_t weftTraceArm(weftComm_t comm, uint32_t records_per_block) {
  return api_guard("weftTraceArm", [&] { communicator_of(comm).arm_trace(records_per_block); });
}

weftResult_t weftTraceTake(weftComm_t comm, weftStream_t stream, char** json) {
  return api_guard("weftTraceTake", [&] {
    if (json == nullptr) weft::fail(weft::ErrorCode::InvalidArgument, "json is null");
    *json = nullptr;
    const std::string text = communicator_of(comm).take_trace(reinterpret_cast<cudaStream_t>(stream));
    char* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out == nullptr) throw std::bad_alloc();
    std::memcpy(out, text.c_str(), text.size() + 1);
    *json = out;
  });
}

void weftTraceFree(char* json) { std::free(json); }

}  // extern "C"
