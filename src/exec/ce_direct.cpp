// The copy-engine runner's direct path (exec/ce_runner.hpp, run_direct):
// AllGather, AllToAll and Broadcast as copies the calling thread issues itself, straight into
// the peers' receive buffers, between two one-thread rendezvous kernels (exec/ce.hpp,
// CeSyncArgs). Push, as NCCL's copy-engine collectives: each rank writes its blocks into
// every peer.
#include <cuda_runtime.h>

#include <algorithm>

#include "exec/ce.hpp"
#include "exec/ce_runner.hpp"
#include "util/config.hpp"
#include "util/cuda_check.hpp"
#include "util/log.hpp"

namespace weft {

namespace {

/// Copies at least this long are cut into one piece per stream when WEFT_CE_STREAMS > 1.
constexpr size_t kSplitBytes = 4u << 20;

/// A Broadcast of at least this many bytes on more than 2 ranks runs in two phases (scatter,
/// then every rank forwards its part), so that the root's copy engines send the payload about
/// once instead of once per peer (broadcast_phases).
constexpr uint64_t kTwoPhaseBroadcastBytes = 1u << 20;

bool legacy_stream(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

}  // namespace

void CeRunner::batch(const std::vector<Copy>& copies, size_t first, size_t n, cudaStream_t stream,
                          bool capturing) {
  if (n == 0) return;
  // cudaMemcpyBatchAsync takes neither captured streams nor the legacy default stream.
  if (batch_ok_ && !capturing && !legacy_stream(stream)) {
    std::vector<void*> dst(n);
    std::vector<const void*> src(n);
    std::vector<size_t> bytes(n);
    for (size_t i = 0; i < n; ++i) {
      dst[i] = copies[first + i].dst;
      src[i] = copies[first + i].src;
      bytes[i] = copies[first + i].bytes;
    }
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attr_index = 0;
    const cudaError_t e = cudaMemcpyBatchAsync(dst.data(), src.data(), bytes.data(), n, &attr, &attr_index, 1, stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotSupported && e != cudaErrorInvalidValue) WEFT_CUDA_CHECK(e);
    cudaGetLastError();
    batch_ok_ = false;  // a driver without batches: one copy at a time from now on
    WEFT_LOG(Info, "CE", "rank " << ctx_.rank << ": cudaMemcpyBatchAsync refused (" << cudaGetErrorString(e)
                                 << "); copy-engine calls issue one cudaMemcpyAsync per copy");
  }
  for (size_t i = first; i < first + n; ++i)
    WEFT_CUDA_CHECK(cudaMemcpyAsync(copies[i].dst, copies[i].src, copies[i].bytes, cudaMemcpyDefault, stream));
}

void CeRunner::issue_copies(std::vector<Copy> copies, cudaStream_t stream) {
  copies.erase(std::remove_if(copies.begin(), copies.end(), [](const Copy& c) { return c.bytes == 0; }), copies.end());
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  WEFT_CUDA_CHECK(cudaStreamIsCapturing(stream, &cs));
  const bool capturing = cs != cudaStreamCaptureStatusNone;
  const size_t k = side_.size() + 1;
  if (k == 1 || copies.empty()) return batch(copies, 0, copies.size(), stream, capturing);
  // Cut the long copies into k pieces, then deal all of them to the k streams in turn.
  std::vector<std::vector<Copy>> per(k);
  size_t next = 0;
  for (const Copy& c : copies) {
    const size_t pieces = c.bytes >= kSplitBytes ? k : 1;
    const size_t piece = (c.bytes / pieces + 4095) / 4096 * 4096;
    for (size_t off = 0; off < c.bytes; off += piece) {
      const size_t n = std::min(piece, c.bytes - off);
      per[next++ % k].push_back(Copy{static_cast<char*>(c.dst) + off, static_cast<const char*>(c.src) + off, n});
    }
  }
  WEFT_CUDA_CHECK(cudaEventRecord(fork_, stream));
  for (size_t i = 1; i < k; ++i) WEFT_CUDA_CHECK(cudaStreamWaitEvent(side_[i - 1], fork_, 0));
  batch(per[0], 0, per[0].size(), stream, capturing);
  for (size_t i = 1; i < k; ++i) {
    batch(per[i], 0, per[i].size(), side_[i - 1], capturing);
    WEFT_CUDA_CHECK(cudaEventRecord(join_[i - 1], side_[i - 1]));
    WEFT_CUDA_CHECK(cudaStreamWaitEvent(stream, join_[i - 1], 0));
  }
}

const char* CeRunner::staged_input(const Direct& d, cudaStream_t stream) {
  // In-place AllToAll: block q of the buffer goes to rank q while rank q writes its block
  // for this rank there. Send from a copy taken before the rendezvous.
  const uint64_t total = d.bytes * static_cast<uint64_t>(ctx_.nranks);
  if (total > stage_bytes_) {
    void* p = nullptr;
    WEFT_CUDA_CHECK(cudaMalloc(&p, total));
    stage_.push_back(p);  // earlier ones may be read by captured graphs
    stage_bytes_ = total;
  }
  WEFT_CUDA_CHECK(cudaMemcpyAsync(stage_.back(), d.recv, total, cudaMemcpyDeviceToDevice, stream));
  return static_cast<const char*>(stage_.back());
}

void CeRunner::make_side_streams() {
  const int k = static_cast<int>(config::get_int("WEFT_CE_STREAMS"));
  WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  for (int i = 1; i < k; ++i) {
    cudaStream_t s = nullptr;
    cudaEvent_t e = nullptr;
    WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    side_.push_back(s);
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    join_.push_back(e);
  }
}

void CeRunner::run_direct(const Direct& d, cudaStream_t stream) {
  RelaxedCapture relaxed;
  DeviceGuard guard(ctx_.device);
  const int R = ctx_.nranks, me = ctx_.rank;
  if (R > ce::kMaxRanks) fail(ErrorCode::Internal, "copy-engine direct call on more than ce::kMaxRanks ranks");
  if (fork_ == nullptr) make_side_streams();
  const uint64_t b = d.bytes;
  const uint64_t mine = static_cast<uint64_t>(me) * b;
  const char* in = d.send;
  if (d.c == Collective::AllToAll && d.in_place) in = staged_input(d, stream);
  const bool two_phase = d.c == Collective::Broadcast && R > 2 && b >= kTwoPhaseBroadcastBytes;
  std::vector<Copy> copies;
  switch (d.c) {
    case Collective::AllGather:
      if (!d.in_place) copies.push_back(Copy{d.recv + mine, in, b});
      for (int j = 1; j < R; ++j) {
        const int q = (me + j) % R;
        copies.push_back(Copy{d.peer_recv[static_cast<size_t>(q)] + mine, d.in_place ? d.recv + mine : in, b});
      }
      break;
    case Collective::AllToAll:
      copies.push_back(Copy{d.recv + mine, in + mine, b});
      for (int j = 1; j < R; ++j) {
        const int q = (me + j) % R;
        copies.push_back(Copy{d.peer_recv[static_cast<size_t>(q)] + mine, in + static_cast<uint64_t>(q) * b, b});
      }
      break;
    case Collective::Broadcast:
      if (two_phase || me != d.root) break;
      if (!d.in_place) copies.push_back(Copy{d.recv, in, b});
      for (int j = 1; j < R; ++j) copies.push_back(Copy{d.peer_recv[static_cast<size_t>((me + j) % R)], in, b});
      break;
    default: fail(ErrorCode::Internal, "copy-engine direct path: " + std::string(to_string(d.c)) + " is not one of its");
  }
  std::vector<std::vector<Copy>> phases;
  if (two_phase) phases = broadcast_phases(d, in);
  else phases.push_back(std::move(copies));
  const size_t nphases = phases.size();
  const size_t ncopies = run_phases(std::move(phases), d.tag, stream);
  WEFT_LOG(Debug, "CE", "rank " << me << ": " << to_string(d.c) << " of " << b << " bytes per block by copy engines, "
                                << ncopies << " copies in " << nphases << " phase(s) on " << side_.size() + 1
                                << " stream(s) between " << nphases + 1 << " one-thread rendezvous kernels");
}

size_t CeRunner::run_phases(std::vector<std::vector<Copy>> phases, uint64_t tag, cudaStream_t stream) {
  const int R = ctx_.nranks, me = ctx_.rank;
  exec::CeSyncArgs sa{};
  const uint64_t words = 4 * static_cast<uint64_t>(R) + 1;  // sig_: port channels' 2R, inbox 2R, epoch
  for (int q = 0; q < R; ++q)
    if (q != me) sa.remote[q] = peer_sig_[static_cast<size_t>(q)] + 2 * R + 2 * me;
  sa.inbox = sig_ + 2 * R;
  sa.epoch = sig_ + words - 1;
  sa.tag = tag;
  sa.nranks = R;
  sa.rank = me;
  sa.timeout_ns = static_cast<uint64_t>(ctx_.timeout_s * 1e9);
  sa.error_claim = ctx_.error_claim;
  sa.error = ctx_.error;
  sa.abort = ctx_.abort;
  // The first rendezvous: every peer is in this call (the tag is checked), so its buffer may
  // be written; each later one: every peer's copies of the phase before have landed.
  sa.check_tag = 1;
  size_t ncopies = 0;
  for (std::vector<Copy>& copies : phases) {
    exec::launch_ce_sync(sa, stream);
    sa.check_tag = 0;
    ncopies += copies.size();
    issue_copies(std::move(copies), stream);
  }
  exec::launch_ce_sync(sa, stream);
  blocks_ = Blocks{};
  blocks_.trigger_launches = static_cast<int>(phases.size()) + 1;
  return ncopies;
}

std::vector<std::vector<CeRunner::Copy>> CeRunner::broadcast_phases(const Direct& d, const char* in) const {
  // Part q (of R, 256-byte aligned) of the payload belongs to rank q. Phase 1: the root copies
  // part q into rank q's receive buffer (and the whole payload into its own, out of place).
  // Phase 2, after a rendezvous: every rank copies its part from its receive buffer into every
  // other rank's but the root's (the root its own part into every peer). The root's engines
  // send the payload (R - 1) / R twice instead of R - 1 times; on 4 x H200 the one-phase copy
  // ran at 0.36-0.55x NCCL's broadcast from 2 MiB (docs/results-2026-11-28.md, round 4).
  const int R = ctx_.nranks, me = ctx_.rank;
  const uint64_t b = d.bytes;
  const uint64_t part = ((b + static_cast<uint64_t>(R) - 1) / static_cast<uint64_t>(R) + 255) / 256 * 256;
  auto lo = [&](int q) { return std::min(b, static_cast<uint64_t>(q) * part); };
  auto len = [&](int q) { return std::min(b, lo(q) + part) - lo(q); };
  std::vector<std::vector<Copy>> phases(2);
  if (me == d.root) {
    if (!d.in_place) phases[0].push_back(Copy{d.recv, in, b});
    for (int q = 0; q < R; ++q)
      if (q != me) phases[0].push_back(Copy{d.peer_recv[static_cast<size_t>(q)] + lo(q), in + lo(q), len(q)});
  }
  const char* mine = (me == d.root ? in : d.recv) + lo(me);
  for (int j = 1; j < R; ++j) {
    const int q = (me + j) % R;
    if (q != d.root) phases[1].push_back(Copy{d.peer_recv[static_cast<size_t>(q)] + lo(me), mine, len(me)});
  }
  return phases;
}

}  // namespace weft
