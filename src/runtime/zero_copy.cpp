// The CTA policy and the memory windows where a collective's path is chosen
// (runtime/cta_policy.hpp, runtime/windows.hpp; docs/runtime.md, "CTA policies").
//
// zero_copy_first runs before the selection's choice. AllGather, AllToAll and Broadcast
// whose receive buffers lie in windows run by copy engines: on symmetric windows mapped by
// every rank, straight from the window table with no exchange (the direct path,
// runtime/ce_direct.cpp); on default windows through the copy-engine executor's per-call
// exchange. Under the default and efficiency policies only from kWindowCopyEngineBytes; under
// the zero policy at every size, and on registered buffers too. Every test here reads what is
// the same on every rank (the policy, agreed; the payload; window ids and offsets, which
// NCCL's contract for symmetric windows makes equal), so every rank takes the same path.
#include <algorithm>

#include "runtime/ce_collectives.hpp"
#include "runtime/ce_plan.hpp"
#include "runtime/communicator.hpp"
#include "runtime/cta_policy.hpp"
#include "runtime/host_reduce.hpp"
#include "runtime/selection.hpp"
#include "runtime/window_rules.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/weft.h"

namespace weft {

namespace {

/// Payload (the larger buffer of the call) from which window collectives take copy engines
/// under the default and efficiency policies: below it, the rendezvous kernels and copy
/// launches cost more than the SM path's whole call.
constexpr uint64_t kWindowCopyEngineBytes = 4ull << 20;

}  // namespace

void Communicator::set_cta_policy(int policy) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  // Every rank sends its value even when it is out of range, so that all fail alike.
  int32_t mine = policy;
  std::vector<int32_t> all(static_cast<size_t>(nranks_));
  all[static_cast<size_t>(rank_)] = mine;
  boot_->allgather(all.data(), sizeof(int32_t), config::wait_seconds(timeout_s_));
  for (int q = 0; q < nranks_; ++q) {
    const int32_t p = all[static_cast<size_t>(q)];
    if (p < 0 || p > (kCtaEfficiency | kCtaZero))
      fail(ErrorCode::InvalidArgument, "rank " + std::to_string(q) + " passed CTA policy " + std::to_string(p) +
                                           " (0 to 3: default, efficiency, zero, both flags); no rank changed its policy");
    if (normalize_cta_policy(p, "weftCommSetCtaPolicy") != normalize_cta_policy(all[0], "weftCommSetCtaPolicy"))
      fail(ErrorCode::InvalidUsage, "the ranks disagree on the CTA policy: rank 0 passed " + std::to_string(all[0]) +
                                        ", rank " + std::to_string(q) + " " + std::to_string(p) +
                                        " (every rank passes the same); no rank changed its policy");
  }
  cta_policy_ = normalize_cta_policy(policy, "weftCommSetCtaPolicy");
  WEFT_LOG(Info, "COLL", "rank " << rank_ << ": CTA policy " << cta_policy_name(cta_policy_));
}

bool Communicator::zero_copy_first(Collective c, const char* send, char* recv, uint64_t count, int dtype, int root,
                                   bool in_place, uint64_t payload, cudaStream_t stream) {
  if (!zero_cta_collective(c) || !ce::direct(c) || net_ || nranks_ < 2 || nranks_ > ce::kMaxRanks) return false;
  const bool zero = cta_policy_ == kCtaZero;
  const uint64_t bytes = count * host::dtype_size(dtype);
  const uint64_t recv_bytes = c == Collective::Broadcast ? bytes : bytes * static_cast<uint64_t>(nranks_);
  const weftWindow* w = windows_.empty() ? nullptr : window_of(recv, recv_bytes);
  if (!zero && (w == nullptr || payload < kWindowCopyEngineBytes)) return false;
  if (w != nullptr && w->mapped && (w->flags & kWinSymmetric)) {
    // Symmetric: every rank's receive buffer lies at this offset of its window (NCCL's
    // contract); the peers' windows are as large as this one (checked at registration).
    const uint64_t offset = static_cast<uint64_t>(recv - w->ptr);
    CeCollectives::Direct d;
    d.c = c;
    d.send = send;
    d.recv = recv;
    d.bytes = bytes;
    d.root = root;
    d.in_place = in_place;
    d.peer_recv.resize(static_cast<size_t>(nranks_));
    for (int q = 0; q < nranks_; ++q) {
      if (offset + recv_bytes > w->peer_bytes[static_cast<size_t>(q)])
        fail(ErrorCode::Internal, "window " + std::to_string(w->id) + " of rank " + std::to_string(q) +
                                      " is smaller than this rank's");
      d.peer_recv[static_cast<size_t>(q)] = w->peer[static_cast<size_t>(q)] + offset;
    }
    d.tag = window_call_tag(static_cast<int>(c), w->id, offset, bytes, root);
    ensure_ce().run_direct(d, stream);
    WEFT_LOG(Debug, "COLL", to_string(c) << " on rank " << rank_ << ": " << count << " x " << host::dtype_name(dtype)
                                         << " by copy engines into symmetric window " << w->id << " at offset " << offset);
    return true;
  }
  // Default windows and registered buffers: the copy-engine executor's exchange decides on
  // every rank alike (false: every rank runs the selection's choice).
  return run_copy_engine(c, send, recv, count, dtype, weftSum, in_place, stream, root);
}

void Communicator::cap_blocks(Collective c, bool in_place, int root, Choice* ch) {
  if (ch->algorithm == kOneShot) {
    ch->instances = std::min(ch->instances, kEfficiencyBlocks);
    return;
  }
  // The most thread blocks of any rank, so that every rank derives the same instances.
  for (int guard = 0; guard < 8 && ch->instances > 1; ++guard) {
    const CachedPlan& cp = plan_for(c, *ch, in_place, root);
    size_t blocks = 0;
    for (const LoweredRank& lr : cp.lp.ranks) blocks = std::max(blocks, lr.tbs.size());
    const int next = efficiency_instances(ch->instances, static_cast<int>(blocks));
    if (next == ch->instances) return;
    ch->instances = next;
  }
}

}  // namespace weft
