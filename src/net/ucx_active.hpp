// The receiving side of the UCX transport's active-message mode (WEFT_NET_PROTO=am,
// net/ucx_transport.hpp): weft's handler on the worker peers' messages arrive on, which
// checks every header, writes data into this rank's registered memory (eager: copied in the
// handler; rendezvous: received into place) and hands signals to an AmInbox
// (net/am_inbox.hpp), which writes them after the data their sender sent before them.
//
// The worker is either the transport's own (the proxy's thread progresses it) or, with
// WEFT_NET_RECV_THREAD, a second worker of the same context that start()'s thread alone
// progresses. A message that fails a check is dropped and recorded: refused(peer) says why,
// and the transport turns that into a Remote error on every later operation with that peer.
// Internal to the network transport: needs UCX's headers.
#pragma once

#if WEFT_HAVE_UCX
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/am_inbox.hpp"
#include "net/ucx_api.hpp"

namespace weft::net {

// Every active message of weft starts with an AmHeader (handler id kAmId).
constexpr unsigned kAmId = 0x57;
constexpr uint32_t kAmTag = 0x57414d31;  // "WAM1"
constexpr uint32_t kAmData = 1;          // the data is the bytes for `address`
constexpr uint32_t kAmWords = 2;         // the data is `words` 8-byte words for `address`
constexpr uint32_t kMaxAmWords = 4096;
struct AmHeader {
  uint32_t tag = kAmTag;
  uint32_t kind = 0;
  int32_t from = 0;      // the sender's rank
  uint32_t words = 0;    // kAmWords
  uint64_t address = 0;  // where on the receiver (inside memory it registered)
  uint64_t after = 0;    // kAmWords: data messages the sender had sent the receiver before these words
};

class AmReceiver {
 public:
  /// `own`: non-null: a worker of its own, created with these parameters, that start()'s
  /// thread progresses; null: `shared`, the transport's worker, progressed by its owner.
  AmReceiver(const UcxApi& api, ucp_context_h context, int rank, int nranks, const ucp_worker_params_t* own,
             ucp_worker_h shared);
  ~AmReceiver();  ///< stops the thread, destroys its own worker
  AmReceiver(const AmReceiver&) = delete;
  AmReceiver& operator=(const AmReceiver&) = delete;

  ucp_worker_h worker() const { return own_ != nullptr ? own_ : shared_; }
  bool threaded() const { return own_ != nullptr; }
  void add_memory(uint64_t base, uint64_t bytes) { inbox_.add_memory(base, bytes); }
  /// Starts the thread (own worker only): progress while messages come and for `spin_ns`
  /// after the last, then 50 us sleeps.
  void start(uint64_t spin_ns);
  void stop();
  /// "" when nothing of `peer` (nor of an unknown sender) was refused; else why.
  std::string refused(int peer) const;
  /// Nothing of `peer` under way here (a rendezvous, a signal waiting for data): while false,
  /// the owner of a shared worker keeps progressing it.
  bool quiet(int peer) const;

 private:
  struct Rndv {
    AmReceiver* self;
    int peer;
  };
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param);
  static void on_rndv_done(void* request, ucs_status_t status, size_t length, void* user_data);
  ucs_status_t receive(const void* header, size_t header_length, void* data, size_t length, bool rndv);
  ucs_status_t receive_rndv(int peer, void* desc, char* dst, size_t length);
  ucs_status_t refuse(int peer, const std::string& why);  ///< peer -1: no known sender
  void loop(uint64_t spin_ns);

  const UcxApi& api_;
  int rank_, nranks_;
  ucp_worker_h own_ = nullptr, shared_ = nullptr;
  AmInbox inbox_;
  std::atomic<uint64_t> rndv_open_{0};
  mutable std::mutex refuse_mu_;
  std::atomic<bool> any_refused_{false};
  std::vector<std::string> refused_;  // index: rank
  std::string refused_unknown_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
};

}  // namespace weft::net
#endif
