#include "net/ucx_active.hpp"

#if WEFT_HAVE_UCX
#include <chrono>
#include <cstring>

#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::net {

AmReceiver::AmReceiver(const UcxApi& api, ucp_context_h context, int rank, int nranks, const ucp_worker_params_t* own,
                       ucp_worker_h shared)
    : api_(api), rank_(rank), nranks_(nranks), shared_(shared), inbox_(nranks),
      refused_(static_cast<size_t>(nranks > 0 ? nranks : 0)) {
  if (own != nullptr) {
    const ucs_status_t s = api_.worker_create(context, own, &own_);
    if (s != UCS_OK)
      fail(ErrorCode::System, "UCX: cannot create the receiving worker on rank " + std::to_string(rank) + ": " +
                                  api_.status_string(s));
  }
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = kAmId;
  hp.cb = &AmReceiver::on_am;
  hp.arg = this;
  const ucs_status_t s = api_.worker_set_am_recv_handler(worker(), &hp);
  if (s != UCS_OK) {
    if (own_ != nullptr) api_.worker_destroy(own_);
    fail(ErrorCode::System, std::string("UCX: cannot set weft's active-message handler: ") + api_.status_string(s));
  }
}

AmReceiver::~AmReceiver() {
  stop();
  if (own_ != nullptr) api_.worker_destroy(own_);
}

void AmReceiver::start(uint64_t spin_ns) {
  if (own_ == nullptr || thread_.joinable()) return;
  stop_.store(false);
  thread_ = std::thread([this, spin_ns] { loop(spin_ns); });
}

void AmReceiver::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  thread_.join();
}

void AmReceiver::loop(uint64_t spin_ns) {
  using Clock = std::chrono::steady_clock;
  auto last = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    unsigned n = 0;
    for (int i = 0; i < 16; ++i) {
      const unsigned k = api_.worker_progress(own_);
      if (k == 0) break;
      n += k;
    }
    const auto now = Clock::now();
    if (n != 0 || rndv_open_.load(std::memory_order_relaxed) != 0) {
      last = now;
      continue;
    }
    const auto idle_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
    if (idle_ns < 2'000) continue;
    if (idle_ns < spin_ns) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::string AmReceiver::refused(int peer) const {
  if (!any_refused_.load(std::memory_order_acquire)) return "";
  std::lock_guard<std::mutex> lock(refuse_mu_);
  if (peer >= 0 && peer < nranks_ && !refused_[static_cast<size_t>(peer)].empty())
    return "rank " + std::to_string(peer) + " sent " + refused_[static_cast<size_t>(peer)];
  return refused_unknown_;
}

bool AmReceiver::quiet(int peer) const {
  return rndv_open_.load(std::memory_order_relaxed) == 0 && (threaded() || inbox_.waiting(peer) == 0);
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
  auto* self = static_cast<AmReceiver*>(arg);
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  ucs_status_t s = UCS_ERR_INVALID_PARAM;
  try {
    s = self->receive(header, header_length, data, length, rndv);
  } catch (const std::exception& e) {  // never through UCX's C frames
    self->refuse(-1, std::string("a message that could not be handled: ") + e.what());
  }
  // An error fails the sender's rendezvous; an eager message is simply dropped (UCX
  // accepts only UCS_OK for one whose data it does not keep).
  return rndv ? s : UCS_OK;
}

ucs_status_t AmReceiver::receive(const void* header, size_t header_length, void* data, size_t length, bool rndv) {
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
    if (rndv) return receive_rndv(p, data, dst, length);
    std::memcpy(dst, data, length);
    inbox_.landed(p);
    return UCS_OK;
  }
  if (h.kind != kAmWords) return refuse(p, "a message of unknown kind " + std::to_string(h.kind));
  if (rndv || h.words == 0 || h.words > kMaxAmWords || length != h.words * sizeof(uint64_t))
    return refuse(p, "a signal of " + std::to_string(h.words) + " words in " + what);
  auto* where = reinterpret_cast<uint64_t*>(inbox_.locate(h.address, length, sizeof(uint64_t)));
  if (where == nullptr) return refuse(p, "a signal of " + what + ", misaligned or outside the memory this rank registered");
  uint64_t values[kMaxAmWords];
  std::memcpy(values, data, length);
  if (!inbox_.signal(p, h.after, where, values, h.words))
    return refuse(p, "more than " + std::to_string(AmInbox::kMaxWaiting) + " signals after data it never sent");
  return UCS_OK;
}

ucs_status_t AmReceiver::receive_rndv(int peer, void* desc, char* dst, size_t length) {
  auto* ctx = new Rndv{this, peer};
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.recv_am = &AmReceiver::on_rndv_done;
  rp.user_data = ctx;
  ucs_status_ptr_t r = api_.am_recv_data_nbx(worker(), desc, dst, length, &rp);
  if (UCS_PTR_IS_PTR(r)) {
    ++rndv_open_;
    return UCS_OK;
  }
  delete ctx;
  if (r == nullptr) inbox_.landed(peer);
  else refuse(peer, std::string("a rendezvous whose data could not be received: ") + api_.status_string(UCS_PTR_STATUS(r)));
  return UCS_OK;
}

void AmReceiver::on_rndv_done(void* request, ucs_status_t status, size_t, void* user_data) {
  auto* ctx = static_cast<Rndv*>(user_data);
  AmReceiver* self = ctx->self;
  const int peer = ctx->peer;
  delete ctx;
  self->api_.request_free(request);
  --self->rndv_open_;
  if (status == UCS_OK) self->inbox_.landed(peer);
  else self->refuse(peer, std::string("a rendezvous whose data did not arrive: ") + self->api_.status_string(status));
}

}  // namespace weft::net
#endif
