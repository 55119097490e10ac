// Communicator::run_copy_engine: what the communicator lends the copy-engine runner
// (exec/ce_runner.hpp), which it builds at the first copy-engine call or window mapping.
#include <memory>
#include <utility>

#include "exec/ce_runner.hpp"
#include "plan/ce_plan.hpp"
#include "runtime/communicator.hpp"
#include "util/log.hpp"

namespace weft {

CeRunner& Communicator::ensure_ce() {
  if (ce_) return *ce_;
  CeContext x;
  x.rank = rank_;
  x.nranks = nranks_;
  x.device = device_;
  x.boot = boot_.get();
  x.timeout_s = timeout_s_;
  x.peer_device = peer_device_;
  x.error = error_dev_;
  x.error_claim = error_claim_;
  x.abort = abort_dev_;
  // Registered ranges: weftCommRegister's, and memory windows (any flags).
  x.registered = [this](const void* ptr, uint64_t len, uint64_t* base, uint64_t* bytes) {
    const uint64_t p = reinterpret_cast<uint64_t>(ptr);
    for (const auto& [h, r] : registrations_) {
      const uint64_t b = reinterpret_cast<uint64_t>(r->ptr);
      if (p >= b && p - b <= r->bytes && len <= r->bytes - (p - b)) {
        *base = b;
        *bytes = r->bytes;
        return true;
      }
    }
    if (const weftWindow* w = window_of(ptr, len)) {
      *base = reinterpret_cast<uint64_t>(w->ptr);
      *bytes = w->bytes;
      return true;
    }
    return false;
  };
  x.on_error = [this](const std::string& why) { on_network_error(why); };
  ce_ = std::make_unique<CeRunner>(std::move(x));
  return *ce_;
}

bool Communicator::run_copy_engine(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op,
                                   bool in_place, cudaStream_t stream, int root) {
  if (!ce::supports(c) || nranks_ < 2 || nranks_ > ce::kMaxRanks) {
    WEFT_LOG(Debug, "CE", "rank " << rank_ << ": " << to_string(c) << " on " << nranks_
                                  << " ranks has no copy-engine path; SM path");
    return false;  // every rank alike, before any collective setup
  }
  if (ranks_share_process_) {
    // A copy-engine call agrees with its peers on the host first (buffers, mappings). One
    // thread that drives several ranks in a group (weftCommInitAll, ncclCommInitAll, nccl-tests
    // -g) would wait there for a rank it has not called yet: those communicators use SM blocks.
    WEFT_LOG(Debug, "CE", "rank " << rank_ << ": " << to_string(c)
                                  << ": ranks of this communicator share a process; SM path");
    return false;  // every rank alike: all computed the flag from the same records
  }
  return ensure_ce().run(c, send, recv, count, dtype, op, in_place, stream, root);
}

}  // namespace weft
