#include "net/ucx_transport.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "net/lane_choice.hpp"
#include "net/tcp_rendezvous.hpp"
#include "net/ucx_active.hpp"
#include "net/ucx_lanes.hpp"
#include "proxy/affinity.hpp"
#include "net/ucx_api.hpp"
#include "bootstrap/bootstrap.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::net {

namespace {
[[maybe_unused]] std::string rank_name(int r) { return "rank " + std::to_string(r); }

/// "UCX_TLS='tcp', UCX_NET_DEVICES unset": UCX's own variables that decide what it can reach.
[[maybe_unused]] std::string ucx_settings() {
  auto v = [](const char* n) {
    const char* e = std::getenv(n);
    return std::string(n) + (e != nullptr ? "='" + std::string(e) + "'" : " unset");
  };
  return v("UCX_TLS") + ", " + v("UCX_NET_DEVICES");
}
}  // namespace

#if WEFT_HAVE_UCX

namespace {
/// UCX's TCP transport cuts every message it copies into TX_SEG_SIZE pieces (8 KiB by
/// default), each a system call on both sides and, for RMA puts (active messages inside
/// UCX), an acknowledgement each; its receive segment (64 KiB) bounds a zero-copy message.
/// weft asks for WEFT_NET_TCP_SEG_BYTES for both, unless the user set either UCX variable
/// or UCX's own variables leave TCP out (UCX warns about settings no transport uses):
/// UCX_TLS without tcp (or all), UCX_NET_DEVICES naming only ports (mlx5_0:1), no interface.
/// Returns the bytes to ask for (0: none) and says why in `why`.
int64_t tcp_segment_bytes(std::string* why) {
  auto items = [](const char* list) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* c = list; ; ++c) {
      if (*c == ',' || *c == '\0') {
        out.push_back(cur);
        cur.clear();
        if (*c == '\0') break;
      } else {
        cur += *c;
      }
    }
    return out;
  };
  const int64_t seg = config::get_int("WEFT_NET_TCP_SEG_BYTES");
  if (seg == 0) return *why = "UCX's own (WEFT_NET_TCP_SEG_BYTES=0)", 0;
  if (std::getenv("UCX_TCP_TX_SEG_SIZE") != nullptr || std::getenv("UCX_TCP_RX_SEG_SIZE") != nullptr)
    return *why = "UCX_TCP_TX_SEG_SIZE / UCX_TCP_RX_SEG_SIZE as set", 0;
  if (const char* tls = std::getenv("UCX_TLS"); tls != nullptr && *tls != '\0') {
    const bool exclude = *tls == '^';
    bool named = false;
    for (const std::string& t : items(tls + (exclude ? 1 : 0))) named |= t == "tcp" || (!exclude && t == "all");
    if (named == exclude) return *why = "UCX's own (UCX_TLS leaves TCP out)", 0;
  }
  if (const char* dev = std::getenv("UCX_NET_DEVICES"); dev != nullptr && *dev != '\0') {
    bool netdev = false;
    for (const std::string& d : items(dev)) netdev |= d == "all" || (!d.empty() && d.find(':') == std::string::npos);
    if (!netdev) return *why = "UCX's own (UCX_NET_DEVICES names no network interface)", 0;
  }
  *why = std::to_string(seg) + " bytes (WEFT_NET_TCP_SEG_BYTES)";
  return seg;
}

/// Asks UCX for tcp_segment_bytes(); returns what it did, for the log.
std::string set_tcp_segments(const UcxApi& api, ucp_config_t* cfg) {
  std::string why;
  const int64_t seg = tcp_segment_bytes(&why);
  if (seg == 0) return "TCP segments: " + why;
  const std::string v = std::to_string(seg);
  for (const char* name : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {  // the TCP transport's own names
    const ucs_status_t s = api.config_modify(cfg, name, v.c_str());
    if (s != UCS_OK) return std::string("UCX refused UCX_TCP_") + name + "=" + v + ": " + api.status_string(s);
  }
  return "TCP segments of " + why;
}
}  // namespace

namespace {

using Clock = std::chrono::steady_clock;

// Exchanged blocks: a tag, a length, then the bytes; every field checked on arrival.
constexpr uint32_t kAddressTag = 0x57554131;   // "WUA1": a worker address (RMA puts)
constexpr uint32_t kAddressTagAm = 0x57554133; // "WUA3": a worker address (active messages; lanes in the length word's high half)
constexpr uint32_t kMemoryTag = 0x57524b31;    // "WRK1": a registration
constexpr size_t kAddressBlock = 4096;
constexpr size_t kAddressRoom = kAddressBlock - 8 - 16;  // the header before, the lane offer after
constexpr uint32_t kMaxLanes = UcxLanes::kMaxLanes;
constexpr size_t kMemoryBlock = 2048;
constexpr size_t kMemoryHeader = 24;           // tag, rkey length, address, bytes
constexpr uint64_t kMaxRegistration = 1ull << 48;

struct Pending {
  void* request = nullptr;
  std::unique_ptr<uint64_t> value;    // a signal's value stays put until its operation completes
  std::unique_ptr<AmHeader> header;   // so does an active message's header
};

}  // namespace

struct UcxTransport::Impl {
  struct Peer {
    Impl* owner = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    ucs_status_t failed = UCS_OK;
    std::vector<Pending> pending;
    std::deque<std::pair<uint64_t, void*>> marks;  // (ticket, its flush request), oldest first
    uint64_t marked = 0, landed = 0;
    AmNumbering numbering;  // active-message mode without lanes: the messages sent to this peer
    bool rndv = true;       // active messages of rndv_bytes or more go by rendezvous (net/tcp_rendezvous.hpp)
  };

  const UcxApi* api = nullptr;
  int rank = 0, nranks = 0;
  AllGather allgather;
  double timeout_s = 0;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  bool cuda = false;
  bool order_landed = true;  // WEFT_NET_ORDER: signals after landing (else a fence each)
  bool recent = false;       // the last progress() handled events
  bool am = false;           // WEFT_NET_PROTO=am: active messages (else RMA puts)
  uint64_t rndv_bytes = 0;   // am: messages of at least this size go by rendezvous
  // am: where peers' messages arrive and land (net/ucx_active.hpp), on `worker` and on
  // every lane's worker.
  std::unique_ptr<AmReceiver> rx;
  // am with WEFT_NET_LANES > 0: the workers and threads that carry the data (net/ucx_lanes.hpp).
  std::unique_ptr<UcxLanes> lanes;
  std::vector<std::unique_ptr<Peer>> peers;  // index: rank (null for this rank)
  bool stalled = false;  // an operation timed out: close_all forces every endpoint closed
  std::vector<ucp_mem_h> memories;
  std::vector<ucp_rkey_h> rkeys;

  // Also runs when the constructor throws part way (a malformed block from a peer).
  ~Impl() {
    if (api == nullptr) return;
    for (ucp_rkey_h k : rkeys) api->rkey_destroy(k);
    if (worker != nullptr) close_all(false);  // the lanes' threads and endpoints first, then this worker's
    lanes.reset();
    rx.reset();  // after the endpoints closed: peers' closing flushes need its progress until then
    for (ucp_mem_h h : memories) api->mem_unmap(context, h);
    if (worker != nullptr) api->worker_destroy(worker);
    if (context != nullptr) api->cleanup(context);
  }

  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* p = static_cast<Peer*>(arg);
    if (p->failed == UCS_OK) p->failed = status;
    WEFT_LOG(Warn, "NET", "UCX endpoint to rank " << p->rank << " failed: " << p->owner->api->status_string(status));
  }

  std::string status(ucs_status_t s) const { return api->status_string(s); }

  Peer& peer(int r) const {
    if (r < 0 || r >= nranks || r == rank || !peers[static_cast<size_t>(r)])
      fail(ErrorCode::InvalidArgument, "UCX transport of rank " + std::to_string(rank) + ": no endpoint to rank " + std::to_string(r));
    return *peers[static_cast<size_t>(r)];
  }

  void check(const Peer& p) const {
    if (rx) {
      const std::string why = rx->refused(p.rank);
      if (!why.empty())
        fail(ErrorCode::Remote, "UCX transport of rank " + std::to_string(rank) + ": " + why +
                                    "; the message was dropped and the link to it is no longer trusted");
    }
    const ucs_status_t failed = p.failed != UCS_OK || !lanes ? p.failed : lanes->failed(p.rank);
    if (failed == UCS_ERR_UNREACHABLE)
      fail(ErrorCode::Remote, "UCX endpoint to " + rank_name(p.rank) + " has failed (" + status(failed) + "): rank " +
                                  std::to_string(rank) + " cannot reach it with " + ucx_settings() +
                                  "; set UCX_TLS and UCX_NET_DEVICES to a network every host shares");
    if (failed == UCS_ERR_INVALID_PARAM && am)
      fail(ErrorCode::Remote, "UCX endpoint to " + rank_name(p.rank) + " has failed (" + status(failed) + "): " +
                                  rank_name(p.rank) + " refused a rendezvous of this rank (its log says why: an "
                                  "address outside the memory it registered, or an earlier malformed message)");
    if (failed != UCS_OK)
      fail(ErrorCode::Remote, "UCX endpoint to " + rank_name(p.rank) + " has failed (" + status(failed) +
                                  "): the peer died, closed its endpoint or cannot be reached");
  }

  void progress() {
    unsigned events = 0;
    for (int i = 0; i < 16; ++i) {
      const unsigned n = api->worker_progress(worker);
      if (n == 0) break;
      events += n;
    }
    recent = events != 0;
  }

  bool idle(const Peer& p) const {
    // The proxy keeps polling while a rendezvous or a signal waiting for data is open, and
    // while a lane has work.
    return p.pending.empty() && p.marks.empty() && !recent && (!rx || rx->quiet(p.rank)) && (!lanes || lanes->idle());
  }

  /// Frees the finished requests of `p`; throws Remote when one failed.
  void reap(Peer& p) {
    size_t kept = 0;
    ucs_status_t bad = UCS_OK;
    for (Pending& q : p.pending) {
      ucs_status_t s = api->request_check_status(q.request);
      if (s == UCS_INPROGRESS) {
        p.pending[kept++] = std::move(q);
        continue;
      }
      api->request_free(q.request);
      if (s != UCS_OK && bad == UCS_OK) bad = s;
    }
    p.pending.resize(kept);
    if (bad != UCS_OK) {
      if (p.failed == UCS_OK) p.failed = bad;
      check(p);
    }
  }

  /// Waits at most `wait_s` until `request` (from an nbx call) completes.
  void wait(Peer& p, ucs_status_ptr_t request, const char* what, double wait_s) {
    if (request == nullptr) return;
    if (UCS_PTR_IS_ERR(request)) {
      if (p.failed == UCS_OK) p.failed = UCS_PTR_STATUS(request);
      fail(ErrorCode::Remote, std::string("UCX ") + what + " to " + rank_name(p.rank) + " failed: " + status(UCS_PTR_STATUS(request)));
    }
    const auto end = Clock::now() + std::chrono::duration<double>(wait_s);
    ucs_status_t s;
    while ((s = api->request_check_status(request)) == UCS_INPROGRESS) {
      if (p.failed != UCS_OK) break;
      if (Clock::now() > end) {
        api->request_free(request);  // released by UCX once it ends
        stalled = true;              // close_all forces: a flushing close to it would wait in vain
        fail(ErrorCode::Timeout, std::string("UCX ") + what + " to " + rank_name(p.rank) + " did not complete within " +
                                     std::to_string(wait_s) + " s: " + rank_name(p.rank) + " is stalled or unreachable");
      }
      progress();
    }
    if (s == UCS_INPROGRESS) {  // the endpoint failed meanwhile
      api->request_free(request);
      check(p);
    }
    api->request_free(request);
    if (s != UCS_OK) {
      if (p.failed == UCS_OK) p.failed = s;
      check(p);
    }
  }

  void post(Peer& p, ucs_status_ptr_t r, Pending keep, const char* what) {
    if (UCS_PTR_IS_ERR(r)) {
      if (p.failed == UCS_OK) p.failed = UCS_PTR_STATUS(r);
      fail(ErrorCode::Remote, std::string("UCX ") + what + " to " + rank_name(p.rank) + " failed: " + status(UCS_PTR_STATUS(r)));
    }
    if (r != nullptr) {
      keep.request = r;
      p.pending.push_back(std::move(keep));
    }
    if (p.pending.size() >= 1024) {  // bound the queue: completions must keep up
      progress();
      reap(p);
    }
  }

  void put(Peer& p, const proxy::RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) {
    check(p);
    if (lanes) return lanes->put(p.rank, dst.address + off, src, bytes);
    if (am) {
      am_send(p, p.numbering.data(rank, dst.address + off), src, bytes, p.rndv && bytes >= rndv_bytes, nullptr, "put");
      return;
    }
    ucp_request_param_t param{};
    post(p, api->put_nbx(p.ep, src, bytes, dst.address + off, static_cast<ucp_rkey_h>(const_cast<void*>(dst.key)), &param),
         Pending{}, "put");
  }

  /// Active-message mode: sends `h` (numbered by p.numbering) with `bytes` of `data`, by
  /// rendezvous or eagerly; `value` (where `data` may point) stays alive until the send completes.
  void am_send(Peer& p, const AmHeader& h, const void* data, uint64_t bytes, bool rndv, std::unique_ptr<uint64_t> value,
               const char* what) {
    Pending keep;
    keep.header = std::make_unique<AmHeader>(h);
    keep.value = std::move(value);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = rndv ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    const AmHeader* header = keep.header.get();
    post(p, api->am_send_nbx(p.ep, kAmId, header, sizeof(AmHeader), data, bytes, &param), std::move(keep), what);
  }

  /// Active-message mode: `n` words for dst + off, applied by the peer after every data
  /// message sent before them (so no fence and no wait for landing here).
  void am_words(Peer& p, const proxy::RemoteMemory& dst, uint64_t off, const uint64_t* values, uint64_t n,
                std::unique_ptr<uint64_t> value) {
    check(p);
    if (lanes) return lanes->words(p.rank, dst.address + off, values, n);  // copies them
    for (uint64_t done = 0; done < n;) {
      const uint64_t k = std::min<uint64_t>(n - done, kMaxAmWords);
      const AmHeader h = p.numbering.words(rank, dst.address + off + done * sizeof(uint64_t), static_cast<uint32_t>(k));
      am_send(p, h, values + done, k * sizeof(uint64_t), false, done + k == n ? std::move(value) : nullptr, "signal");
      done += k;
    }
  }

  void write_u64(Peer& p, const proxy::RemoteMemory& dst, uint64_t off, uint64_t value) {
    check(p);
    if (am) {
      auto v = std::make_unique<uint64_t>(value);
      const uint64_t* data = v.get();
      return am_words(p, dst, off, data, 1, std::move(v));
    }
    ucs_status_t f = api->worker_fence(worker);  // the signal lands after every earlier put
    if (f != UCS_OK) fail(ErrorCode::Remote, "UCX fence before a signal to " + rank_name(p.rank) + " failed: " + status(f));
    auto v = std::make_unique<uint64_t>(value);
    ucp_request_param_t param{};
    ucs_status_ptr_t r = api->put_nbx(p.ep, v.get(), sizeof(uint64_t), dst.address + off,
                                      static_cast<ucp_rkey_h>(const_cast<void*>(dst.key)), &param);
    post(p, r, Pending{nullptr, std::move(v), nullptr}, "signal");
  }

  /// A signal whose puts have landed (or that follows none): no fence.
  void write_u64_landed(Peer& p, const proxy::RemoteMemory& dst, uint64_t off, uint64_t value) {
    if (am) return write_u64(p, dst, off, value);
    check(p);
    auto v = std::make_unique<uint64_t>(value);
    ucp_request_param_t param{};
    ucs_status_ptr_t r = api->put_nbx(p.ep, v.get(), sizeof(uint64_t), dst.address + off,
                                      static_cast<ucp_rkey_h>(const_cast<void*>(dst.key)), &param);
    post(p, r, Pending{nullptr, std::move(v), nullptr}, "signal");
  }

  void write_words(Peer& p, const proxy::RemoteMemory& dst, uint64_t off, const uint64_t* values, uint64_t n) {
    if (am) return am_words(p, dst, off, values, n, nullptr);
    check(p);
    ucs_status_t f = api->worker_fence(worker);  // the words land after every earlier put
    if (f != UCS_OK) fail(ErrorCode::Remote, "UCX fence before a signal to " + rank_name(p.rank) + " failed: " + status(f));
    ucp_request_param_t param{};
    post(p, api->put_nbx(p.ep, values, n * sizeof(uint64_t), dst.address + off,
                         static_cast<ucp_rkey_h>(const_cast<void*>(dst.key)), &param),
         Pending{}, "signal");
  }

  /// A non-blocking flush of everything posted so far; at most kMarks outstanding (beyond
  /// that the oldest is waited for, at most `wait_s`).
  static constexpr size_t kMarks = 256;
  uint64_t mark(Peer& p, double wait_s) {
    check(p);
    if (lanes) return lanes->mark(p.rank);
    if (p.marks.size() >= kMarks) {
      auto [t, r] = p.marks.front();
      p.marks.pop_front();
      wait(p, static_cast<ucs_status_ptr_t>(r), "flush", wait_s);
      p.landed = t;
    }
    ucp_request_param_t param{};
    ucs_status_ptr_t r = api->ep_flush_nbx(p.ep, &param);
    if (UCS_PTR_IS_ERR(r)) {
      if (p.failed == UCS_OK) p.failed = UCS_PTR_STATUS(r);
      check(p);
    }
    ++p.marked;
    if (r == nullptr && p.marks.empty()) p.landed = p.marked;  // done at once, and so is every earlier one
    else p.marks.emplace_back(p.marked, r);
    return p.marked;
  }

  bool landed(Peer& p, uint64_t ticket) {
    if (lanes) {
      progress();  // the transport's own worker: wire-up, keepalive
      check(p);
      return lanes->landed(p.rank, ticket);
    }
    if (p.landed >= ticket) return true;
    progress();
    while (!p.marks.empty()) {
      auto [t, r] = p.marks.front();
      if (r != nullptr) {
        const ucs_status_t s = api->request_check_status(r);
        if (s == UCS_INPROGRESS) break;
        api->request_free(r);
        if (s != UCS_OK) {
          p.marks.pop_front();
          if (p.failed == UCS_OK) p.failed = s;
          check(p);
        }
      }
      p.marks.pop_front();
      p.landed = t;
    }
    reap(p);
    check(p);
    return p.landed >= ticket;
  }

  void flush(Peer& p, double wait_s) {
    check(p);
    if (lanes) return flush_lanes(p, wait_s);
    ucp_request_param_t param{};
    wait(p, api->ep_flush_nbx(p.ep, &param), "flush", wait_s);
    reap(p);
  }

  /// Everything queued to `p` on the lanes handed to UCX and flushed, within `wait_s`.
  void flush_lanes(Peer& p, double wait_s) {
    const uint64_t t = lanes->mark(p.rank);
    const auto end = Clock::now() + std::chrono::duration<double>(wait_s);
    while (!landed(p, t)) {
      if (Clock::now() > end) {
        stalled = true;
        fail(ErrorCode::Timeout, "UCX flush to " + rank_name(p.rank) + " did not complete within " + std::to_string(wait_s) +
                                     " s: " + rank_name(p.rank) + " is stalled or unreachable");
      }
      std::this_thread::yield();
    }
  }

  void close_all(bool force) {
    // After a timeout a peer may hold requests that never end; a flushing close would leave
    // them to worker_destroy, which a UCX built with assertions aborts on (ucp_ep.c: proto_reqs
    // not empty). A forced close discards them.
    force = force || stalled;
    if (lanes) lanes->close(force);
    std::vector<std::pair<Peer*, ucs_status_ptr_t>> closing;
    for (auto& p : peers) {
      if (!p || p->ep == nullptr) continue;
      for (Pending& q : p->pending) api->request_free(q.request);
      p->pending.clear();
      for (auto& [t, r] : p->marks)
        if (r != nullptr) api->request_free(r);
      p->marks.clear();
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = (force || p->failed != UCS_OK) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      ucs_status_ptr_t r = api->ep_close_nbx(p->ep, &param);
      p->ep = nullptr;
      if (p->failed == UCS_OK) p->failed = UCS_ERR_CANCELED;  // closed here: no more operations
      if (UCS_PTR_IS_PTR(r)) closing.emplace_back(p.get(), r);
    }
    const auto end = Clock::now() + std::chrono::duration<double>(std::min(timeout_s, 10.0));
    for (auto& [p, r] : closing) {
      while (api->request_check_status(r) == UCS_INPROGRESS && Clock::now() < end) progress();
      api->request_free(r);
    }
  }
};

namespace {
/// UCX's lanes of `ep` as ucp_ep_print_info reports them, "; "-separated, one space between
/// words ("lane[0]: 1:tcp/lo.0 md[0] -> ... am am_bw#0"); empty where UCX cannot say.
std::string lane_description(const UcxApi& api, ucp_ep_h ep) {
  if (api.ep_print_info == nullptr || ep == nullptr) return "";
  char* text = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return "";
  api.ep_print_info(ep, f);
  std::fclose(f);
  std::string out;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    const char* end = std::strchr(line, '\n');
    std::string l(line, end != nullptr ? static_cast<size_t>(end - line) : std::strlen(line));
    const size_t at = l.find("lane[");
    if (at != std::string::npos) {
      std::string t = l.substr(at);
      std::string squeezed;
      for (char c : t)
        if (c != ' ' || squeezed.empty() || squeezed.back() != ' ') squeezed += c;
      out += (out.empty() ? "" : "; ") + squeezed;
    }
    line = end != nullptr ? end + 1 : nullptr;
  }
  std::free(text);
  return out;
}

/// Exchanges the transport worker's address (with the mode and this rank's lane offer,
/// net/lane_choice.hpp) and connects to every peer's; every block checked. Returns the lanes
/// every rank runs (0 in put mode).
int connect_peers(UcxTransport::Impl& m, const LaneOffer& offer) {
  const UcxApi& api = *m.api;
  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  ucs_status_t s = api.worker_get_address(m.worker, &address, &address_len);
  if (s != UCS_OK) fail(ErrorCode::System, "UCX: cannot get the worker's address: " + m.status(s));
  if (address_len == 0 || address_len > kAddressRoom) {
    api.worker_release_address(m.worker, address);
    fail(ErrorCode::Internal, "UCX worker address of " + std::to_string(address_len) + " bytes does not fit weft's " +
                                  std::to_string(kAddressRoom) + "-byte room");
  }
  std::vector<char> blocks(kAddressBlock * static_cast<size_t>(m.nranks), 0);
  char* mine = blocks.data() + kAddressBlock * static_cast<size_t>(m.rank);
  // Low half of the second word: the address's length; high half: the lanes (am only).
  uint32_t header[2] = {m.am ? kAddressTagAm : kAddressTag, static_cast<uint32_t>(address_len) | (offer.lanes << 16)};
  std::memcpy(mine, header, sizeof header);
  std::memcpy(mine + 8, address, address_len);
  // The block's last 16 bytes: the machine, the CPUs and whether the lanes are to be chosen.
  const uint32_t cpus_auto[2] = {offer.cpus, offer.automatic ? 1u : 0u};
  std::memcpy(mine + kAddressBlock - 16, &offer.machine, 8);
  std::memcpy(mine + kAddressBlock - 8, cpus_auto, 8);
  api.worker_release_address(m.worker, address);
  m.allgather(blocks.data(), kAddressBlock);

  const std::string me = "rank " + std::to_string(m.rank);
  m.peers.resize(static_cast<size_t>(m.nranks));
  std::vector<LaneOffer> offers(static_cast<size_t>(m.nranks));
  for (int r = 0; r < m.nranks; ++r) {
    const char* b = blocks.data() + kAddressBlock * static_cast<size_t>(r);
    uint32_t h[2];
    std::memcpy(h, b, sizeof h);
    const uint32_t len = h[1] & 0xffff, their_lanes = h[1] >> 16;
    if ((h[0] == kAddressTag || h[0] == kAddressTagAm) && h[0] != (m.am ? kAddressTagAm : kAddressTag) && len != 0 &&
        len <= kAddressRoom)
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(r) + " moves data by " + (m.am ? "RMA puts" : "active messages") +
                                        ", " + me + " by " + (m.am ? "active messages" : "RMA puts") +
                                        ": set WEFT_NET_PROTO alike on every rank (and use one UCX build, with or "
                                        "without CUDA support, everywhere)");
    uint32_t cpus_auto[2];
    std::memcpy(cpus_auto, b + kAddressBlock - 8, 8);
    if (h[0] != (m.am ? kAddressTagAm : kAddressTag) || len == 0 || len > kAddressRoom || cpus_auto[1] > 1 ||
        their_lanes > kMaxLanes)
      fail(ErrorCode::Remote, "rank " + std::to_string(r) + " sent a malformed UCX worker address block (tag " +
                                  std::to_string(h[0]) + ", " + std::to_string(len) + " bytes of address, at most " +
                                  std::to_string(kAddressRoom) + "; " + std::to_string(their_lanes) + " lanes, at most " +
                                  std::to_string(kMaxLanes) + "; choice flag " + std::to_string(cpus_auto[1]) + ")");
    LaneOffer& o = offers[static_cast<size_t>(r)];
    o.automatic = cpus_auto[1] == 1;
    o.lanes = their_lanes;
    std::memcpy(&o.machine, b + kAddressBlock - 16, 8);
    o.cpus = cpus_auto[0];
  }
  const int lanes = agree_lanes(offers, m.rank);
  for (int r = 0; r < m.nranks; ++r) {
    if (r == m.rank) continue;
    const char* b = blocks.data() + kAddressBlock * static_cast<size_t>(r);
    auto p = std::make_unique<UcxTransport::Impl::Peer>();
    p->owner = &m;
    p->rank = r;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(b + 8);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &UcxTransport::Impl::on_error;
    ep.err_handler.arg = p.get();
    s = api.ep_create(m.worker, &ep, &p->ep);
    if (s != UCS_OK)
      fail(ErrorCode::Remote, "UCX: " + me + " cannot reach rank " + std::to_string(r) + ": " + m.status(s) + " (" +
                                  ucx_settings() + " on " + me +
                                  "): the two ranks' UCX share no transport and device that connect them; set "
                                  "UCX_TLS and UCX_NET_DEVICES alike on every host, to a network they share "
                                  "(`ucx_info -d` on each host lists its devices)");
    m.peers[static_cast<size_t>(r)] = std::move(p);
  }
  return lanes;
}
}  // namespace

UcxTransport::UcxTransport(int rank, int nranks, AllGather allgather, double timeout_s) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  std::string why;
  m.api = ucx_api(&why);
  if (m.api == nullptr) fail(ErrorCode::InvalidUsage, why);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    fail(ErrorCode::InvalidArgument, "UCX transport: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  m.rank = rank;
  m.nranks = nranks;
  m.allgather = std::move(allgather);
  m.timeout_s = config::wait_seconds(timeout_s >= 0 ? timeout_s : config::get_seconds("WEFT_TIMEOUT"));
  const std::string order = config::get_string("WEFT_NET_ORDER");
  if (order != "landed" && order != "fence")
    fail(ErrorCode::InvalidArgument, "WEFT_NET_ORDER='" + order + "': expected landed or fence");
  m.order_landed = order == "landed";
  const std::string proto = config::get_string("WEFT_NET_PROTO");
  if (proto != "am" && proto != "put")
    fail(ErrorCode::InvalidArgument, "WEFT_NET_PROTO='" + proto + "': expected am or put");
  m.rndv_bytes = static_cast<uint64_t>(config::get_int("WEFT_NET_RNDV_BYTES"));
  const UcxApi& api = *m.api;
  const bool want_am = proto == "am" && api.has_am();
  const int64_t want_lanes = want_am ? config::get_int("WEFT_NET_LANES") : 0;  // -1: chosen in connect_peers

  ucp_config_t* cfg = nullptr;
  ucs_status_t s = api.config_read(nullptr, nullptr, &cfg);
  if (s != UCS_OK) fail(ErrorCode::System, "UCX: cannot read its configuration (UCX_* variables): " + m.status(s));
  const std::string segments = set_tcp_segments(api, cfg);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_RMA | (want_am ? UCP_FEATURE_AM : 0);
  // Workers on several threads share the context: where lanes may run. A rank's own share
  // bounds the chosen count (the smallest over the ranks), so no lane can run where it is 0.
  const LaneOffer offer = local_lane_offer(want_lanes);
  params.mt_workers_shared = offer.automatic ? (auto_lanes(offer.cpus, 1) > 0 ? 1 : 0) : (offer.lanes > 0 ? 1 : 0);
  s = api.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &m.context);
  api.config_release(cfg);
  if (s != UCS_OK)
    fail(s == UCS_ERR_NO_DEVICE || s == UCS_ERR_UNREACHABLE ? ErrorCode::InvalidUsage : ErrorCode::System,
         "UCX: ucp_init failed on rank " + std::to_string(rank) + ": " + m.status(s) + " (" + ucx_settings() +
             "): UCX found none of the transports and devices these name on this host; `ucx_info -d` lists what it "
             "has: set UCX_NET_DEVICES to a device every host has (an interface such as eth0 for TCP, mlx5_0:1 for "
             "InfiniBand) and UCX_TLS to transports they share, or unset them");
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (api.context_query(m.context, &attr) == UCS_OK) m.cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  // Active messages copy eager data on the host: only where the memory is host memory.
  m.am = want_am && !m.cuda;

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the owner sets up, then the proxy thread alone drives it
  s = api.worker_create(m.context, &wp, &m.worker);
  if (s != UCS_OK) fail(ErrorCode::System, "UCX: cannot create a worker on rank " + std::to_string(rank) + ": " + m.status(s));
  if (m.am) {
    m.rx = std::make_unique<AmReceiver>(api, rank, nranks);
    m.rx->install(m.worker);
  }
  const int lanes = connect_peers(m, m.am ? offer : local_lane_offer(0));
  int eager_only = 0;  // peers whose data goes over TCP get no rendezvous (net/tcp_rendezvous.hpp)
  for (auto& p : m.peers)
    if (p && m.am && !(p->rndv = rendezvous_allowed(data_over_tcp(lane_description(api, p->ep))))) ++eager_only;
  if (lanes > 0) {
    LaneConfig lc;
    lc.lanes = lanes;
    lc.split = config::get_bool("WEFT_NET_LANE_SPLIT");
    lc.stripe_bytes = static_cast<uint64_t>(config::get_int("WEFT_NET_STRIPE_BYTES"));
    lc.rndv_bytes = m.rndv_bytes;
    for (auto& p : m.peers) lc.rndv_peers.push_back(!p || p->rndv);
    lc.spin_ns = static_cast<uint64_t>(config::get_int("WEFT_PROXY_SPIN_US")) * 1000;
    lc.timeout_s = m.timeout_s;
    m.lanes = std::make_unique<UcxLanes>(api, m.context, rank, nranks, *m.rx, lc);
    m.lanes->connect(m.allgather, std::min(m.timeout_s, 30.0));
  }
  WEFT_LOG(Info, "NET", "UCX transport of rank " << rank << ": " << nranks - 1 << " endpoints, CUDA memory "
                                                  << (m.cuda ? "registered directly" : "not supported by this UCX")
                                                  << "; data by " << (m.am ? "active messages" : "RMA puts") << "; "
                                                  << (m.lanes ? m.lanes->describe()
                                                              : std::string("sent and received by the proxy's thread"))
                                                  << "; " << segments
                                                  << (eager_only == 0 ? std::string()
                                                                      : "; no rendezvous to the " + std::to_string(eager_only) +
                                                                            " peer(s) reached over TCP (WEFT_NET_TCP_RNDV=0)"));
}

UcxTransport::~UcxTransport() = default;

int UcxTransport::rank() const { return impl_->rank; }
int UcxTransport::nranks() const { return impl_->nranks; }
bool UcxTransport::supports_cuda_memory() const { return impl_->cuda; }

std::vector<char> UcxTransport::register_local(void* ptr, uint64_t bytes, bool cuda) {
  Impl& m = *impl_;
  const UcxApi& api = *m.api;
  if (ptr == nullptr || bytes == 0 || bytes > kMaxRegistration)
    fail(ErrorCode::InvalidArgument, "UCX register_memory: " + std::to_string(bytes) + " bytes at " + (ptr ? "an address" : "null"));
  if (cuda && !m.cuda)
    fail(ErrorCode::InvalidUsage, "this UCX cannot register CUDA device memory (it was built without CUDA support); "
                                  "stage the transfer through page-locked host memory");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = ptr;
  mp.length = bytes;
  if (cuda) {
    mp.field_mask |= UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    mp.memory_type = UCS_MEMORY_TYPE_CUDA;
  }
  ucp_mem_h memh = nullptr;
  ucs_status_t s = api.mem_map(m.context, &mp, &memh);
  if (s != UCS_OK) fail(ErrorCode::System, "UCX cannot register " + std::to_string(bytes) + " bytes: " + m.status(s));
  m.memories.push_back(memh);
  if (m.am) m.rx->add_memory(reinterpret_cast<uint64_t>(ptr), bytes);
  void* rkey = nullptr;
  size_t rkey_len = 0;
  s = api.rkey_pack(m.context, memh, &rkey, &rkey_len);
  if (s != UCS_OK) fail(ErrorCode::System, "UCX cannot pack a memory key: " + m.status(s));
  if (rkey_len > kMemoryBlock - kMemoryHeader) {
    api.rkey_buffer_release(rkey);
    fail(ErrorCode::Internal, "UCX memory key of " + std::to_string(rkey_len) + " bytes does not fit weft's block");
  }
  std::vector<char> block(kMemoryHeader + rkey_len, 0);
  uint32_t h[2] = {kMemoryTag, static_cast<uint32_t>(rkey_len)};
  uint64_t where[2] = {reinterpret_cast<uint64_t>(ptr), bytes};
  std::memcpy(block.data(), h, sizeof h);
  std::memcpy(block.data() + 8, where, sizeof where);
  std::memcpy(block.data() + kMemoryHeader, rkey, rkey_len);
  api.rkey_buffer_release(rkey);
  return block;
}

proxy::RemoteMemory UcxTransport::remote_memory(int r, const void* block, size_t block_bytes) {
  Impl& m = *impl_;
  const char* b = static_cast<const char*>(block);
  const std::string who = "rank " + std::to_string(r);
  uint32_t t[2] = {0, 0};
  uint64_t w[2] = {0, 0};
  if (block_bytes >= kMemoryHeader) {
    std::memcpy(t, b, sizeof t);
    std::memcpy(w, b + 8, sizeof w);
  }
  if (block_bytes < kMemoryHeader || t[0] != kMemoryTag || t[1] == 0 || t[1] > block_bytes - kMemoryHeader ||
      t[1] > kMemoryBlock - kMemoryHeader)
    fail(ErrorCode::Remote, who + " sent a malformed memory registration (tag " + std::to_string(t[0]) + ", key of " +
                                std::to_string(t[1]) + " bytes in a block of " + std::to_string(block_bytes) + ")");
  if (w[0] == 0 || w[1] == 0 || w[1] > kMaxRegistration || w[0] + w[1] < w[0])
    fail(ErrorCode::Remote, who + " sent a memory registration of " + std::to_string(w[1]) + " bytes at " +
                                std::to_string(w[0]) + ", outside what weft accepts");
  Impl::Peer& p = m.peer(r);
  ucp_rkey_h key = nullptr;
  const ucs_status_t s = m.api->ep_rkey_unpack(p.ep, b + kMemoryHeader, &key);
  if (s != UCS_OK) fail(ErrorCode::Remote, who + "'s memory key cannot be unpacked: " + m.status(s));
  m.rkeys.push_back(key);
  return proxy::RemoteMemory{w[0], w[1], key};
}

std::vector<proxy::RemoteMemory> UcxTransport::register_memory(void* ptr, uint64_t bytes, bool cuda) {
  Impl& m = *impl_;
  const std::vector<char> block = register_local(ptr, bytes, cuda);
  std::vector<char> blocks(kMemoryBlock * static_cast<size_t>(m.nranks), 0);
  std::memcpy(blocks.data() + kMemoryBlock * static_cast<size_t>(m.rank), block.data(), block.size());
  m.allgather(blocks.data(), kMemoryBlock);
  std::vector<proxy::RemoteMemory> out(static_cast<size_t>(m.nranks));
  for (int r = 0; r < m.nranks; ++r)
    out[static_cast<size_t>(r)] = r == m.rank ? proxy::RemoteMemory{reinterpret_cast<uint64_t>(ptr), bytes, nullptr}
                                              : remote_memory(r, blocks.data() + kMemoryBlock * static_cast<size_t>(r),
                                                              kMemoryBlock);
  return out;
}

namespace {

class UcxEndpoint : public proxy::Endpoint {
 public:
  UcxEndpoint(UcxTransport::Impl* t, UcxTransport::Impl::Peer* p) : t_(t), p_(p) {}
  std::string peer() const override { return rank_name(p_->rank); }
  void put(const proxy::RemoteMemory& dst, uint64_t off, const void* src, uint64_t bytes) override { t_->put(*p_, dst, off, src, bytes); }
  void write_u64(const proxy::RemoteMemory& dst, uint64_t off, uint64_t v) override { t_->write_u64(*p_, dst, off, v); }
  void flush(double timeout_s) override { t_->flush(*p_, config::wait_seconds(timeout_s)); }
  void write_words(const proxy::RemoteMemory& dst, uint64_t off, const uint64_t* values, uint64_t n) override {
    t_->write_words(*p_, dst, off, values, n);
  }
  uint64_t mark(double timeout_s) override { return t_->mark(*p_, config::wait_seconds(timeout_s)); }
  bool landed(uint64_t ticket) override { return t_->landed(*p_, ticket); }
  bool signals_after_landing() const override { return t_->order_landed && !t_->am; }
  void write_u64_landed(const proxy::RemoteMemory& dst, uint64_t off, uint64_t v) override {
    t_->write_u64_landed(*p_, dst, off, v);
  }
  bool idle() const override { return t_->idle(*p_); }
  void progress() override {
    t_->progress();
    t_->reap(*p_);
    t_->check(*p_);
  }

 private:
  UcxTransport::Impl* t_;
  UcxTransport::Impl::Peer* p_;
};

}  // namespace

std::shared_ptr<proxy::Endpoint> UcxTransport::endpoint(int peer) {
  return std::make_shared<UcxEndpoint>(impl_.get(), &impl_->peer(peer));
}

void UcxTransport::progress() {
  impl_->progress();
  for (auto& p : impl_->peers)
    if (p) impl_->check(*p);
}

void UcxTransport::progress_worker() { impl_->progress(); }

void UcxTransport::check_peer(int peer) const { impl_->check(impl_->peer(peer)); }

void UcxTransport::place_threads(const std::string& pci_bus_id) {
  if (!impl_->lanes) return;
  std::string why;
  try {
    impl_->lanes->place(proxy::proxy_cpus(pci_bus_id, &why));
  } catch (const Error& e) {  // a malformed WEFT_PROXY_CPUS: said once by the proxy too
    why = std::string("not pinned: ") + e.what();
  }
  WEFT_LOG(Info, "NET", "UCX lanes of rank " << impl_->rank << ": threads " << why);
}

void UcxTransport::abort() { impl_->close_all(true); }

std::string UcxTransport::describe_peer(int peer) const { return lane_description(*impl_->api, impl_->peer(peer).ep); }

bool UcxTransport::rendezvous_to(int peer) const { return impl_->am && impl_->peer(peer).rndv; }

std::string UcxTransport::version() const {
  return impl_->api->version_string != nullptr ? impl_->api->version_string() : "";
}

namespace {
/// "data by active messages, ..." or "data by RMA puts, signals ordered ...", and the TCP
/// segments weft asks for: what UcxTransport's constructor will choose.
std::string describe_data_path(const UcxApi& api, bool cuda) {
  const bool am = config::get_string("WEFT_NET_PROTO") == "am" && api.has_am() && !cuda;
  std::string segments;
  tcp_segment_bytes(&segments);
  const int64_t lanes = am ? config::get_int("WEFT_NET_LANES") : 0;
  const std::string threads =
      lanes == 0 ? std::string("sent and received by the proxy's thread (WEFT_NET_LANES=0)")
                 : "lanes: " + describe_lane_rule(lanes) + "; each lane a UCX worker, a connection per peer and a thread" +
                       (lanes != 1 && config::get_bool("WEFT_NET_LANE_SPLIT") ? ", half sending, half receiving on 2 ranks"
                                                                              : ", each both ways") +
                       ", puts of 2 x " + std::to_string(config::get_int("WEFT_NET_STRIPE_BYTES")) +
                       " bytes or more striped over them";
  const std::string tcp_rndv = config::get_bool("WEFT_NET_TCP_RNDV") ? "rendezvous over TCP too (WEFT_NET_TCP_RNDV=1)"
                                                                        : "none by rendezvous over TCP (WEFT_NET_TCP_RNDV=0)";
  return std::string(am ? "data by active messages (WEFT_NET_PROTO=am), signals applied by the receiver after their data, " +
                              tcp_rndv + "; " + threads
                        : std::string("data by RMA puts, signals ordered ") +
                              (config::get_string("WEFT_NET_ORDER") == "fence" ? "by a UCX fence" : "after their puts land")) +
         "; UCX's TCP segments: " + segments;
}
}  // namespace

std::string ucx_describe() {
  std::string why;
  const UcxApi* api = ucx_api(&why);
  if (api == nullptr) return "network transport unavailable: " + why;
  const std::string version = api->version_string != nullptr ? api->version_string() : "(version unknown)";
  ucp_config_t* cfg = nullptr;
  if (api->config_read(nullptr, nullptr, &cfg) != UCS_OK) return "UCX " + version + ": cannot read its configuration";
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  ucp_context_h context = nullptr;
  const ucs_status_t s = api->init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &context);
  api->config_release(cfg);
  if (s != UCS_OK) return "UCX " + version + ": ucp_init fails here: " + api->status_string(s) + " (" + ucx_settings() + ")";
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  const bool cuda = api->context_query(context, &attr) == UCS_OK && (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  api->cleanup(context);
  const std::string mode = config::get_string("WEFT_NET_GPU_MEMORY");
  const bool direct = cuda && mode != "host";
  return "UCX " + version + " (" + ucx_settings() + "): CUDA memory " + (cuda ? "registrable" : "not registrable") +
         ", so links between nodes " +
         (direct ? "put from and into GPU memory directly"
                 : std::string("stage through page-locked host memory") + (cuda ? " (WEFT_NET_GPU_MEMORY=host)" : "")) +
         "; " + describe_data_path(*api, cuda);
}

#else  // built without UCX's headers

struct UcxTransport::Impl {};

UcxTransport::UcxTransport(int, int, AllGather, double) { fail(ErrorCode::InvalidUsage, ucx_unavailable_reason()); }
UcxTransport::~UcxTransport() = default;
int UcxTransport::rank() const { return 0; }
int UcxTransport::nranks() const { return 0; }
bool UcxTransport::supports_cuda_memory() const { return false; }
std::vector<proxy::RemoteMemory> UcxTransport::register_memory(void*, uint64_t, bool) { return {}; }
std::vector<char> UcxTransport::register_local(void*, uint64_t, bool) { return {}; }
proxy::RemoteMemory UcxTransport::remote_memory(int, const void*, size_t) { return {}; }
std::shared_ptr<proxy::Endpoint> UcxTransport::endpoint(int) { return nullptr; }
void UcxTransport::progress() {}
void UcxTransport::check_peer(int) const {}
void UcxTransport::place_threads(const std::string&) {}
void UcxTransport::abort() {}
std::string UcxTransport::describe_peer(int) const { return ""; }
bool UcxTransport::rendezvous_to(int) const { return false; }
std::string UcxTransport::version() const { return ""; }
std::string ucx_describe() { return "network transport unavailable: " + ucx_unavailable_reason(); }

#endif

std::unique_ptr<UcxTransport> transport_over(Bootstrap& boot, double allgather_wait_s, double timeout_s) {
  Bootstrap* b = &boot;
  return std::make_unique<UcxTransport>(
      boot.rank(), boot.nranks(), [b, allgather_wait_s](void* d, size_t k) { b->allgather(d, k, allgather_wait_s); },
      timeout_s);
}

}  // namespace weft::net
