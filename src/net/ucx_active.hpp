// The receiving side of the UCX transport's active-message mode (WEFT_NET_PROTO=am,
// net/ucx_transport.hpp): weft's handler on the worker peers' messages arrive on, which
// checks every header, writes data into this rank's registered memory (eager: copied in the
// handler; rendezvous: received into place) and hands signals to an AmInbox
// (net/am_inbox.hpp), which writes them after the data their sender sent before them.
//
// The handler is installed on every worker peers' messages arrive on: the transport's own
// (the proxy's thread progresses it) and each lane's (net/ucx_lanes.hpp: a thread each), so
// it runs on several threads at once (AmInbox and the refusal record are thread-safe). A
// message that fails a check is dropped and recorded: refused(peer) says why, and the
// transport turns that into a Remote error on every later operation with that peer.
// Internal to the network transport: needs UCX's headers.
#pragma once

#if WEFT_HAVE_UCX
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <memory>
#include <vector>

#include "net/am_inbox.hpp"
#include "net/ucx_api.hpp"

namespace weft::net {

// Every active message of weft starts with an AmHeader (handler id kAmId).
constexpr unsigned kAmId = 0x57;
constexpr uint32_t kAmTag = 0x57414d32;  // "WAM2"
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
  uint64_t seq = 0;      // kAmData: the message's number; kAmWords: the signal's (net/am_inbox.hpp)
};

/// The sender's side of the numbering AmInbox checks, one per peer: every data message and
/// every signal gets the next number of its kind, and a signal carries how many data
/// messages went before it. The transport's own path and the lanes both number with it.
struct AmNumbering {
  uint64_t data_sent = 0, signals_sent = 0;
  AmHeader data(int from, uint64_t address) {
    AmHeader h;
    h.kind = kAmData;
    h.from = from;
    h.address = address;
    h.seq = data_sent++;
    return h;
  }
  AmHeader words(int from, uint64_t address, uint32_t n) {
    AmHeader h;
    h.kind = kAmWords;
    h.from = from;
    h.words = n;
    h.address = address;
    h.after = data_sent;
    h.seq = signals_sent++;
    return h;
  }
};

class AmReceiver {
 public:
  AmReceiver(const UcxApi& api, int rank, int nranks);
  AmReceiver(const AmReceiver&) = delete;
  AmReceiver& operator=(const AmReceiver&) = delete;

  /// Sets weft's handler on `worker` (peers' messages arriving there land through this
  /// receiver); a rendezvous is received on the worker it arrived on. Before any traffic.
  void install(ucp_worker_h worker);
  void add_memory(uint64_t base, uint64_t bytes) { inbox_.add_memory(base, bytes); }
  /// "" when nothing of `peer` (nor of an unknown sender) was refused; else why.
  std::string refused(int peer) const;
  /// Nothing of `peer` under way here (a rendezvous, a signal waiting for data, data beyond
  /// a gap): while false, the owner of a worker keeps progressing it.
  bool quiet(int peer) const;

 private:
  struct Hook {
    AmReceiver* self;
    ucp_worker_h worker;
  };
  struct Rndv {
    AmReceiver* self;
    int peer;
    uint64_t seq;
  };
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data, size_t length,
                            const ucp_am_recv_param_t* param);
  static void on_rndv_done(void* request, ucs_status_t status, size_t length, void* user_data);
  ucs_status_t receive(ucp_worker_h worker, const void* header, size_t header_length, void* data, size_t length,
                       bool rndv);
  ucs_status_t receive_rndv(ucp_worker_h worker, int peer, uint64_t seq, void* desc, char* dst, size_t length);
  void landed(int peer, uint64_t seq);
  ucs_status_t refuse(int peer, const std::string& why);  ///< peer -1: no known sender

  const UcxApi& api_;
  int rank_, nranks_;
  std::vector<std::unique_ptr<Hook>> hooks_;
  AmInbox inbox_;
  std::atomic<uint64_t> rndv_open_{0};
  mutable std::mutex refuse_mu_;
  std::atomic<bool> any_refused_{false};
  std::vector<std::string> refused_;  // index: rank
  std::string refused_unknown_;
};

}  // namespace weft::net
#endif
