// ncclCommShrink (nccl/comm.hpp). The excluded ranks do not call it and may be gone, so the
// parent's collectives and its bootstrap ring (which passes through them) cannot carry the
// new communicator's unique id. The first surviving rank makes the id and posts it to every
// other survivor's mailbox in the parent's memory (runtime/mailbox.cpp, CUDA IPC within the
// host); each survivor waits for it (bounded by WEFT_TIMEOUT) and checks that the leader
// excluded the same ranks.
#include <algorithm>
#include <cstring>

#include "nccl/comm.hpp"
#include "runtime/c_api_internal.hpp"
#include "runtime/communicator.hpp"
#include "util/log.hpp"

namespace weft::nccl {

namespace {

/// The leader's message.
struct ShrinkMessage {
  uint64_t exclusions = 0;  ///< hash of the sorted excluded ranks
  uint32_t nranks = 0;      ///< of the new communicator
  uint32_t leader = 0;
  char id[NCCL_UNIQUE_ID_BYTES] = {};
};
static_assert(sizeof(ShrinkMessage) <= weft::Communicator::kMailboxPayload);

uint64_t hash_ranks(const std::vector<int>& ranks) {
  uint64_t h = 1469598103934665603ull;
  for (int r : ranks) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(r));
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::vector<int> shrink_survivors(int nranks, int me, const int* exclude, int count) {
  if (count <= 0)
    fail(ErrorCode::InvalidArgument, "excludeRanksCount " + std::to_string(count) +
                                         " is not positive (to keep every rank, use ncclCommSplit)");
  if (exclude == nullptr) fail(ErrorCode::InvalidArgument, "excludeRanksList is NULL");
  std::vector<char> out(static_cast<size_t>(nranks), 0);
  for (int i = 0; i < count; ++i) {
    const int r = exclude[i];
    if (r < 0 || r >= nranks)
      fail(ErrorCode::InvalidArgument, "excludeRanksList[" + std::to_string(i) + "] = " + std::to_string(r) +
                                           " is not a rank of the communicator (0.." + std::to_string(nranks - 1) + ")");
    if (out[static_cast<size_t>(r)])
      fail(ErrorCode::InvalidArgument, "excludeRanksList names rank " + std::to_string(r) + " twice");
    out[static_cast<size_t>(r)] = 1;
  }
  if (out[static_cast<size_t>(me)])
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(me) +
                                         " is in excludeRanksList: excluded ranks do not call ncclCommShrink");
  std::vector<int> keep;
  for (int r = 0; r < nranks; ++r)
    if (!out[static_cast<size_t>(r)]) keep.push_back(r);
  return keep;
}

void shrink(ncclComm& parent, const int* exclude, int count, ncclComm_t* newcomm, const CommOptions& options,
            int flags) {
  if (flags != NCCL_SHRINK_DEFAULT && flags != NCCL_SHRINK_ABORT)
    fail(ErrorCode::InvalidArgument, "shrinkFlags " + std::to_string(flags) +
                                         " is neither NCCL_SHRINK_DEFAULT (0) nor NCCL_SHRINK_ABORT (1)");
  const std::vector<int> keep = shrink_survivors(parent.nranks, parent.rank, exclude, count);
  std::vector<int> excluded(exclude, exclude + count);
  std::sort(excluded.begin(), excluded.end());
  weft::Communicator& pc = weft::communicator_of(parent.weft);
  for (int q : keep)
    if (!pc.reaches(q))
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(q) +
                                        " runs on another host: weft shrinks communicators within one host only; "
                                        "create the new communicator with ncclGetUniqueId and ncclCommInitRank");
  if (flags == NCCL_SHRINK_ABORT) pc.revoke("ncclCommShrink with NCCL_SHRINK_ABORT stopped the parent's work");
  const uint64_t seq = ++parent.shrinks;
  const int leader = keep.front();
  ShrinkMessage m;
  if (parent.rank == leader) {
    weftUniqueId wid;
    check_weft(weftGetUniqueId(&wid));
    m.exclusions = hash_ranks(excluded);
    m.nranks = static_cast<uint32_t>(keep.size());
    m.leader = static_cast<uint32_t>(leader);
    std::memcpy(m.id, wid.internal, sizeof(m.id));
    for (int q : keep)
      if (q != leader) pc.mailbox_post(q, seq, &m, sizeof(m));
  } else {
    pc.mailbox_wait(leader, seq, &m, sizeof(m));
    // Bytes from another process: checked before use.
    if (m.exclusions != hash_ranks(excluded) || m.nranks != keep.size() || m.leader != static_cast<uint32_t>(leader))
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(leader) +
                                        " (the first surviving rank) excluded other ranks than this one; every "
                                        "surviving rank passes the same excludeRanksList");
  }
  ncclUniqueId id;
  std::memcpy(id.internal, m.id, sizeof(id.internal));
  const int new_rank = static_cast<int>(std::find(keep.begin(), keep.end(), parent.rank) - keep.begin());
  auto* c = new ncclComm;
  c->options = options;
  try {
    init_comm(c, static_cast<int>(keep.size()), id, new_rank, parent.device);
  } catch (...) {
    release(c, true);
    throw;
  }
  WEFT_LOG(Info, "NCCL", "rank " << parent.rank << " is rank " << new_rank << " of " << keep.size()
                                 << " after excluding " << count << " rank(s)");
  *newcomm = c;
}

}  // namespace weft::nccl
