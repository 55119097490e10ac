// Communicator::run_copy_engine: what the communicator lends the copy-engine runner
// (exec/ce_runner.hpp), which it builds at the first copy-engine call.
#include <memory>
#include <utility>

#include "exec/ce_runner.hpp"
#include "plan/ce_plan.hpp"
#include "runtime/communicator.hpp"
#include "util/log.hpp"

namespace weft {

bool Communicator::run_copy_engine(Collective c, const void* send, void* recv, uint64_t count, int dtype, int op,
                                   bool in_place, cudaStream_t stream) {
  if (!ce::supports(c) || nranks_ < 2 || nranks_ > ce::kMaxRanks) {
    WEFT_LOG(Debug, "CE", "rank " << rank_ << ": " << to_string(c) << " on " << nranks_
                                  << " ranks has no copy-engine plan; SM path");
    return false;  // every rank alike, before any collective setup
  }
  if (!ce_) {
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
      return false;
    };
    x.on_error = [this](const std::string& why) { on_network_error(why); };
    ce_ = std::make_unique<CeRunner>(std::move(x));
  }
  return ce_->run(c, send, recv, count, dtype, op, in_place, stream);
}

}  // namespace weft
