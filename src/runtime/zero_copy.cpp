// The CTA policy's setter and decide()'s CopyEngineDirect on memory windows
// (tune/cta_policy.hpp, runtime/windows.hpp; docs/runtime.md, "Memory windows and CTA
// policies"). Which calls take the copy engines is decide()'s (tune/decide.cpp, rule 9):
// AllGather, AllToAll and Broadcast whose receive buffers lie in windows, from
// kWindowCopyEngineBytes under the default and efficiency policies and at every size under
// the zero policy (registered buffers too). This file runs the symmetric windows' calls:
// straight from the window table with no exchange (the direct path, exec/ce_direct.cpp).
#include <string>

#include "exec/ce_runner.hpp"
#include "plan/ce_plan.hpp"
#include "runtime/communicator.hpp"
#include "runtime/window_rules.hpp"
#include "tune/cta_policy.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft {

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
  decider_->set_cta_policy(cta_policy_);
  WEFT_LOG(Info, "COLL", "rank " << rank_ << ": CTA policy " << cta_policy_name(cta_policy_));
}

void Communicator::run_window_direct(Collective c, const weftWindow& w, const char* send, char* recv, uint64_t bytes,
                                     int root, bool in_place, cudaStream_t stream) {
  // Every rank's receive buffer lies at this offset of its window (NCCL's contract for
  // symmetric windows; the ranks compare the call's tag before any copy), and the peers'
  // windows are as large as this one (checked at registration).
  const uint64_t recv_bytes = c == Collective::Broadcast ? bytes : bytes * static_cast<uint64_t>(nranks_);
  const uint64_t offset = static_cast<uint64_t>(recv - w.ptr);
  if (nranks_ > ce::kMaxRanks) fail(ErrorCode::Internal, "a direct copy-engine call on more than 8 ranks");
  CeRunner::Direct d;
  d.c = c;
  d.send = send;
  d.recv = recv;
  d.bytes = bytes;
  d.root = root;
  d.in_place = in_place;
  for (int q = 0; q < nranks_; ++q) {
    if (offset + recv_bytes > w.peer_bytes[static_cast<size_t>(q)])
      fail(ErrorCode::Internal, "window " + std::to_string(w.id) + " of rank " + std::to_string(q) +
                                    " is smaller than this rank's");
    d.peer_recv[static_cast<size_t>(q)] = w.peer[static_cast<size_t>(q)] + offset;
  }
  d.tag = ce::call_tag(static_cast<int>(c), w.id, offset, bytes, root);
  ensure_ce().run_direct(d, stream);
  WEFT_LOG(Debug, "COLL", to_string(c) << " on rank " << rank_ << ": " << bytes << " bytes per block by copy engines "
                                       << "into symmetric window " << w.id << " at offset " << offset);
}

}  // namespace weft
