#include "net/ucx_active.hpp"

#if WEFT_HAVE_UCX
#include <cstring>

#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::net {

AmReceiver::AmReceiver(const UcxApi& api, int rank, int nranks)
    : api_(api), rank_(rank), nranks_(nranks), inbox_(nranks), refused_(static_cast<size_t>(nranks > 0 ? nranks : 0)) {}

void AmReceiver::install(ucp_worker_h worker) {
  hooks_.push_back(std::make_unique<Hook>(Hook{this, worker}));
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kAmId;
  hp.cb = &AmReceiver::on_am;
  hp.arg = hooks_.back().get();
  const ucs_status_t s = api_.worker_set_am_recv_handler(worker, &hp);
  if (s != UCS_OK) fail(ErrorCode::System, std::string("UCX: cannot set weft's active-message handler: ") + api_.status_string(s));
}

std::string AmReceiver::refused(int peer) const {
  if (!any_refused_.load(std::memory_order_acquire)) return "";
  std::lock_guard<std::mutex> lock(refuse_mu_);
  if (peer >= 0 && peer < nranks_ && !refused_[static_cast<size_t>(peer)].empty())
    return "rank " + std::to_string(peer) + " sent " + refused_[static_cast<size_t>(peer)];
  return refused_unknown_;
}

bool AmReceiver::quiet(int peer) const {
  return rndv_open_.load(std::memory_order_relaxed) == 0 && inbox_.waiting(peer) == 0 && inbox_.early(peer) == 0;
}

namespace {
std::string out_of_order(uint64_t seq) { return "data message " + std::to_string(seq) + " twice, or too far ahead of those landed"; }
}  // namespace

void AmReceiver::landed(int peer, uint64_t seq) {
  if (!inbox_.landed(peer, seq)) refuse(peer, out_of_order(seq));
}

ucs_status_t AmReceiver::refuse(int peer, const std::string& why) {
  std::lock_guard<std::mutex> lock(refuse_mu_);
  std::string& slot = peer >= 0 ? refused_[static_cast<size_t>(peer)] : refused_unknown_;
  if (slot.empty()) {
    slot = peer >= 0 ? why : "a message naming no peer of this rank (" + why + ")";
    any_refused_.store(true, std::memory_order_release);
    WEFT_LOG(Warn, "NET", "UCX transport of rank " << rank_ << ": refused " << slot);
  }
  return UCS_ERR_INVALID_PARAM;
}

ucs_status_t AmReceiver::on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
  auto* hook = static_cast<Hook*>(arg);
  AmReceiver* self = hook->self;
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  ucs_status_t s = UCS_ERR_INVALID_PARAM;
  try {
    s = self->receive(hook->worker, header, header_length, data, length, rndv);
  } catch (const std::exception& e) {  // never through UCX's C frames
    self->refuse(-1, std::string("a message that could not be handled: ") + e.what());
  }
  // An error fails the sender's rendezvous; an eager message is simply dropped (UCX
  // accepts only UCS_OK for one whose data it does not keep).
  return rndv ? s : UCS_OK;
}

ucs_status_t AmReceiver::receive(ucp_worker_h worker, const void* header, size_t header_length, void* data, size_t length,
                                 bool rndv) {
  AmHeader h;
  if (header_length != sizeof h) return refuse(-1, "a header of " + std::to_string(header_length) + " bytes");
  std::memcpy(&h, header, sizeof h);
  if (h.tag != kAmTag || h.from < 0 || h.from >= nranks_ || h.from == rank_)
    return refuse(-1, "tag " + std::to_string(h.tag) + ", from rank " + std::to_string(h.from));
  const int p = h.from;
  if (!refused(p).empty()) return UCS_ERR_INVALID_PARAM;  // nothing more from a peer that sent garbage
  const std::string what = std::to_string(length) + " bytes for address " + std::to_string(h.address);
  if (h.kind == kAmData) {
    char* dst = inbox_.locate(h.address, length);
    if (dst == nullptr) return refuse(p, "data of " + what + ", outside the memory this rank registered");
    if (!inbox_.admissible(p, h.seq))
      return refuse(p, out_of_order(h.seq));
    if (rndv) return receive_rndv(worker, p, h.seq, data, dst, length);
    std::memcpy(dst, data, length);
    landed(p, h.seq);
    return UCS_OK;
  }
  if (h.kind != kAmWords) return refuse(p, "a message of unknown kind " + std::to_string(h.kind));
  if (rndv || h.words == 0 || h.words > kMaxAmWords || length != h.words * sizeof(uint64_t))
    return refuse(p, "a signal of " + std::to_string(h.words) + " words in " + what);
  auto* where = reinterpret_cast<uint64_t*>(inbox_.locate(h.address, length, sizeof(uint64_t)));
  if (where == nullptr) return refuse(p, "a signal of " + what + ", misaligned or outside the memory this rank registered");
  uint64_t values[kMaxAmWords];
  std::memcpy(values, data, length);
  if (!inbox_.signal(p, h.seq, h.after, where, values, h.words))
    return refuse(p, "signal " + std::to_string(h.seq) + " twice or too far ahead, or more than " +
                         std::to_string(AmInbox::kMaxWaiting) + " signals after data it never sent");
  return UCS_OK;
}

ucs_status_t AmReceiver::receive_rndv(ucp_worker_h worker, int peer, uint64_t seq, void* desc, char* dst, size_t length) {
  auto* ctx = new Rndv{this, peer, seq};
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.recv_am = &AmReceiver::on_rndv_done;
  rp.user_data = ctx;
  ucs_status_ptr_t r = api_.am_recv_data_nbx(worker, desc, dst, length, &rp);
  if (UCS_PTR_IS_PTR(r)) {
    ++rndv_open_;
    return UCS_OK;
  }
  delete ctx;
  if (r == nullptr) landed(peer, seq);
  else refuse(peer, std::string("a rendezvous whose data could not be received: ") + api_.status_string(UCS_PTR_STATUS(r)));
  return UCS_OK;
}

void AmReceiver::on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* ctx = static_cast<Rndv*>(user_data);
  AmReceiver* self = ctx->self;
  const int peer = ctx->peer;
  const uint64_t seq = ctx->seq;
  delete ctx;
  self->api_.request_free(request);
  if (status == UCS_OK) self->landed(peer, seq);
  else self->refuse(peer, std::string("a rendezvous whose data did not arrive: ") + self->api_.status_string(status));
  --self->rndv_open_;  // after landing: quiet() never sees a gap between the two
}

}  // namespace weft::net
#endif
