#include "net/ucx_lanes.hpp"

#if WEFT_HAVE_UCX
#include <algorithm>
#include <chrono>
#include <cstring>

#include "proxy/affinity.hpp"
#include "util/error.hpp"
#include "util/log.hpp"

namespace weft::net {

namespace {
using Clock = std::chrono::steady_clock;
constexpr uint32_t kLaneTag = 0x57554c31;  // "WUL1": a lane's worker address
constexpr size_t kLaneBlock = 4096;
constexpr uint64_t kPieceAlign = 4096;
}  // namespace

/// What the proxy's thread hands a lane: data, words, or a flush mark.
struct UcxLanes::Op {
  enum Kind { Data, Words, Mark } kind = Data;
  int peer = 0;
  std::unique_ptr<AmHeader> header;
  const void* data = nullptr;
  uint64_t bytes = 0;
  std::unique_ptr<uint64_t[]> words;  // Words: owned copies
  uint64_t ticket = 0;                // Mark
};

/// Lane l's endpoint to one peer. `failed` and `landed` are read by the proxy's thread;
/// everything else is the lane thread's.
struct UcxLanes::Link {
  int rank = 0;
  const UcxApi* api = nullptr;
  ucp_ep_h ep = nullptr;
  std::atomic<int> failed{UCS_OK};
  struct Pending {
    void* request;
    std::unique_ptr<AmHeader> header;
    std::unique_ptr<uint64_t[]> words;
  };
  std::vector<Pending> pending;
  std::deque<std::pair<uint64_t, void*>> marks;  // (ticket, flush request), oldest first
  std::atomic<uint64_t> landed{0};

  void fail_with(ucs_status_t s) {
    int ok = UCS_OK;
    failed.compare_exchange_strong(ok, static_cast<int>(s));
  }
  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* l = static_cast<Link*>(arg);
    l->fail_with(status);
    WEFT_LOG(Warn, "NET", "UCX lane endpoint to rank " << l->rank << " failed: " << l->api->status_string(status));
  }
};

struct UcxLanes::Lane {
  int index = 0;
  ucp_worker_h worker = nullptr;
  std::vector<std::unique_ptr<Link>> links;  // index: rank (null for this rank)
  std::mutex mu;
  std::vector<Op> queue;
  std::atomic<uint64_t> queued{0}, done{0};
  std::atomic<bool> busy{false};
  std::atomic<bool> stop{false};
  std::thread thread;
};

UcxLanes::UcxLanes(const UcxApi& api, ucp_context_h context, int rank, int nranks, AmReceiver& rx, LaneConfig config)
    : api_(api), context_(context), rank_(rank), nranks_(nranks), rx_(rx), config_(config),
      senders_(static_cast<size_t>(nranks)) {
  if (config_.lanes < 1 || config_.lanes > kMaxLanes)
    fail(ErrorCode::InvalidArgument, "WEFT_NET_LANES=" + std::to_string(config_.lanes) + ": expected 0 to " +
                                         std::to_string(kMaxLanes));
  const bool split = config_.split && config_.lanes >= 2;
  for (int r = 0; r < nranks; ++r) {
    Sender& s = senders_[static_cast<size_t>(r)];
    for (int l = 0; l < config_.lanes; ++l)
      if (!split || (l % 2) == (rank < r ? 0 : 1)) s.data_lanes.push_back(l);
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // set up here, then driven by its thread alone
  for (int l = 0; l < config_.lanes; ++l) {
    auto lane = std::make_unique<Lane>();
    lane->index = l;
    const ucs_status_t s = api_.worker_create(context_, &wp, &lane->worker);
    if (s != UCS_OK)
      fail(ErrorCode::System, "UCX: cannot create the worker of lane " + std::to_string(l) + " on rank " +
                                  std::to_string(rank) + ": " + api_.status_string(s));
    lanes_.push_back(std::move(lane));
    rx_.install(lanes_.back()->worker);
  }
}

UcxLanes::~UcxLanes() {
  close(false);
  for (auto& lane : lanes_)
    if (lane->worker != nullptr) api_.worker_destroy(lane->worker);
}

void UcxLanes::connect(const AllGather& allgather, double wait_s) {
  const size_t L = lanes_.size();
  std::vector<char> blocks(kLaneBlock * L * static_cast<size_t>(nranks_), 0);
  for (size_t l = 0; l < L; ++l) {
    ucp_address_t* address = nullptr;
    size_t len = 0;
    const ucs_status_t s = api_.worker_get_address(lanes_[l]->worker, &address, &len);
    if (s != UCS_OK) fail(ErrorCode::System, "UCX: cannot get a lane worker's address: " + std::string(api_.status_string(s)));
    if (len == 0 || len > kLaneBlock - 8) {
      api_.worker_release_address(lanes_[l]->worker, address);
      fail(ErrorCode::Internal, "UCX lane worker address of " + std::to_string(len) + " bytes does not fit weft's block");
    }
    char* mine = blocks.data() + kLaneBlock * (static_cast<size_t>(rank_) * L + l);
    const uint32_t h[2] = {kLaneTag, static_cast<uint32_t>(len)};
    std::memcpy(mine, h, sizeof h);
    std::memcpy(mine + 8, address, len);
    api_.worker_release_address(lanes_[l]->worker, address);
  }
  allgather(blocks.data(), kLaneBlock * L);
  for (size_t l = 0; l < L; ++l) {
    Lane& lane = *lanes_[l];
    lane.links.resize(static_cast<size_t>(nranks_));
    for (int r = 0; r < nranks_; ++r) {
      if (r == rank_) continue;
      const char* b = blocks.data() + kLaneBlock * (static_cast<size_t>(r) * L + l);
      uint32_t h[2];
      std::memcpy(h, b, sizeof h);
      if (h[0] != kLaneTag || h[1] == 0 || h[1] > kLaneBlock - 8)
        fail(ErrorCode::Remote, "rank " + std::to_string(r) + " sent a malformed UCX address for lane " + std::to_string(l) +
                                    " (tag " + std::to_string(h[0]) + ", " + std::to_string(h[1]) + " bytes)");
      auto link = std::make_unique<Link>();
      link->rank = r;
      link->api = &api_;
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.address = reinterpret_cast<const ucp_address_t*>(b + 8);
      ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
      ep.err_handler.cb = &Link::on_error;
      ep.err_handler.arg = link.get();
      const ucs_status_t s = api_.ep_create(lane.worker, &ep, &link->ep);
      if (s != UCS_OK)
        fail(ErrorCode::Remote, "UCX: rank " + std::to_string(rank_) + " cannot reach lane " + std::to_string(l) + " of rank " +
                                    std::to_string(r) + ": " + api_.status_string(s));
      lane.links[static_cast<size_t>(r)] = std::move(link);
    }
  }
  for (auto& lane : lanes_) {
    Lane* p = lane.get();
    p->thread = std::thread([this, p] { run(*p); });
  }
  // Finish every connection's wire-up now, while both sides' threads progress.
  const auto end = Clock::now() + std::chrono::duration<double>(wait_s);
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const uint64_t t = mark(r);
    while (!landed(r, t)) {
      if (const ucs_status_t s = failed(r); s != UCS_OK)
        fail(ErrorCode::Remote, "UCX: the lanes to rank " + std::to_string(r) + " failed while connecting: " + api_.status_string(s));
      if (Clock::now() > end)
        fail(ErrorCode::Timeout, "UCX: the lanes to rank " + std::to_string(r) + " did not connect within " +
                                     std::to_string(wait_s) + " s: rank " + std::to_string(r) + " is stalled or unreachable");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void UcxLanes::enqueue(int l, Op op) {
  Lane& lane = *lanes_[static_cast<size_t>(l)];
  std::lock_guard<std::mutex> lock(lane.mu);
  lane.queue.push_back(std::move(op));
  lane.queued.fetch_add(1, std::memory_order_release);
}

void UcxLanes::put(int peer, uint64_t address, const void* src, uint64_t bytes) {
  Sender& s = senders_.at(static_cast<size_t>(peer));
  const uint64_t n_lanes = s.data_lanes.size();
  uint64_t pieces = std::max<uint64_t>(1, std::min<uint64_t>(n_lanes, bytes / std::max<uint64_t>(config_.stripe_bytes, 1)));
  uint64_t piece = (bytes + pieces - 1) / pieces;
  piece = std::max<uint64_t>((piece + kPieceAlign - 1) / kPieceAlign * kPieceAlign, 1);
  if (bytes == 0) pieces = 1;
  else pieces = (bytes + piece - 1) / piece;
  for (uint64_t i = 0; i < pieces; ++i) {
    const uint64_t off = i * piece, len = std::min(piece, bytes - off);
    Op op;
    op.kind = Op::Data;
    op.peer = peer;
    op.header = std::make_unique<AmHeader>(s.numbering.data(rank_, address + off));
    op.data = static_cast<const char*>(src) + off;
    op.bytes = len;
    enqueue(s.data_lanes[s.cursor++ % n_lanes], std::move(op));
  }
}

void UcxLanes::words(int peer, uint64_t address, const uint64_t* values, uint64_t n) {
  Sender& s = senders_.at(static_cast<size_t>(peer));
  for (uint64_t done = 0; done < n;) {
    const uint64_t k = std::min<uint64_t>(n - done, kMaxAmWords);
    Op op;
    op.kind = Op::Words;
    op.peer = peer;
    op.header = std::make_unique<AmHeader>(s.numbering.words(rank_, address + done * sizeof(uint64_t), static_cast<uint32_t>(k)));
    op.words = std::make_unique<uint64_t[]>(k);
    std::memcpy(op.words.get(), values + done, k * sizeof(uint64_t));
    op.bytes = k * sizeof(uint64_t);
    enqueue(s.data_lanes[s.cursor % s.data_lanes.size()], std::move(op));
    done += k;
  }
}

uint64_t UcxLanes::mark(int peer) {
  Sender& s = senders_.at(static_cast<size_t>(peer));
  const uint64_t ticket = ++s.marked;
  for (int l = 0; l < count(); ++l) {
    Op op;
    op.kind = Op::Mark;
    op.peer = peer;
    op.ticket = ticket;
    enqueue(l, std::move(op));
  }
  return ticket;
}

bool UcxLanes::landed(int peer, uint64_t ticket) const {
  for (const auto& lane : lanes_) {
    const Link* link = lane->links.at(static_cast<size_t>(peer)).get();
    if (link == nullptr || link->landed.load(std::memory_order_acquire) < ticket) return false;
  }
  return true;
}

bool UcxLanes::idle() const {
  for (const auto& lane : lanes_)
    if (lane->busy.load(std::memory_order_relaxed) ||
        lane->done.load(std::memory_order_acquire) != lane->queued.load(std::memory_order_acquire))
      return false;
  return true;
}

ucs_status_t UcxLanes::failed(int peer) const {
  for (const auto& lane : lanes_) {
    if (static_cast<size_t>(peer) >= lane->links.size()) continue;
    const Link* link = lane->links[static_cast<size_t>(peer)].get();
    if (link != nullptr && link->failed.load(std::memory_order_acquire) != UCS_OK)
      return static_cast<ucs_status_t>(link->failed.load(std::memory_order_acquire));
  }
  return UCS_OK;
}

void UcxLanes::execute(Lane& lane, Op& op) {
  Link* link = lane.links[static_cast<size_t>(op.peer)].get();
  if (link == nullptr || link->ep == nullptr || link->failed.load(std::memory_order_relaxed) != UCS_OK) return;
  ucp_request_param_t param{};
  if (op.kind == Op::Mark) {
    ucs_status_ptr_t r = api_.ep_flush_nbx(link->ep, &param);
    if (UCS_PTR_IS_ERR(r)) return link->fail_with(UCS_PTR_STATUS(r));
    if (r == nullptr && link->marks.empty()) link->landed.store(op.ticket, std::memory_order_release);
    else link->marks.emplace_back(op.ticket, r);
    return;
  }
  const void* data = op.kind == Op::Words ? static_cast<const void*>(op.words.get()) : op.data;
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  const auto peer = static_cast<size_t>(op.peer);
  const bool rndv = op.kind == Op::Data && op.bytes >= config_.rndv_bytes &&
                    (peer >= config_.rndv_peers.size() || config_.rndv_peers[peer]);
  param.flags = rndv ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
  ucs_status_ptr_t r = api_.am_send_nbx(link->ep, kAmId, op.header.get(), sizeof(AmHeader), data, op.bytes, &param);
  if (UCS_PTR_IS_ERR(r)) return link->fail_with(UCS_PTR_STATUS(r));
  if (r != nullptr) link->pending.push_back(Link::Pending{r, std::move(op.header), std::move(op.words)});
}

bool UcxLanes::reap(Lane& lane) {
  bool inflight = false;
  for (auto& lp : lane.links) {
    if (!lp) continue;
    Link& link = *lp;
    size_t kept = 0;
    for (auto& q : link.pending) {
      const ucs_status_t s = api_.request_check_status(q.request);
      if (s == UCS_INPROGRESS) {
        link.pending[kept++] = std::move(q);
        continue;
      }
      api_.request_free(q.request);
      if (s != UCS_OK) link.fail_with(s);
    }
    link.pending.resize(kept);
    while (!link.marks.empty()) {
      auto [t, r] = link.marks.front();
      if (r != nullptr) {
        const ucs_status_t s = api_.request_check_status(r);
        if (s == UCS_INPROGRESS) break;
        api_.request_free(r);
        if (s != UCS_OK) link.fail_with(s);
      }
      link.marks.pop_front();
      link.landed.store(t, std::memory_order_release);
    }
    inflight |= !link.pending.empty() || !link.marks.empty();
  }
  return inflight;
}

void UcxLanes::place(const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> lock(place_mu_);
  cpus_ = cpus;
  placement_.fetch_add(1, std::memory_order_release);
}

void UcxLanes::run(Lane& lane) {
  std::vector<Op> local;
  auto last = Clock::now();
  uint64_t placed = 0;
  while (!lane.stop.load(std::memory_order_relaxed)) {
    if (const uint64_t p = placement_.load(std::memory_order_acquire); p != placed) {
      placed = p;
      std::lock_guard<std::mutex> lock(place_mu_);
      if (!cpus_.empty() && !proxy::pin_this_thread(cpus_))
        WEFT_LOG(Warn, "NET", "lane " << lane.index << " of rank " << rank_ << ": the system refused to pin it to CPUs "
                                     << proxy::format_cpu_list(cpus_));
    }
    {
      std::lock_guard<std::mutex> lock(lane.mu);
      local.swap(lane.queue);
    }
    for (Op& op : local) execute(lane, op);
    unsigned events = 0;
    for (int i = 0; i < 16; ++i) {
      const unsigned n = api_.worker_progress(lane.worker);
      if (n == 0) break;
      events += n;
    }
    const bool inflight = reap(lane);
    const bool worked = !local.empty() || events != 0;
    lane.done.fetch_add(local.size(), std::memory_order_release);
    local.clear();
    lane.busy.store(inflight || worked, std::memory_order_relaxed);
    const auto now = Clock::now();
    if (worked || inflight) {
      last = now;
      if (!worked) std::this_thread::yield();
      continue;
    }
    const auto idle_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last).count());
    if (idle_ns < 2'000) continue;
    if (idle_ns < config_.spin_ns) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void UcxLanes::stop_threads() {
  for (auto& lane : lanes_) lane->stop.store(true);
  for (auto& lane : lanes_)
    if (lane->thread.joinable()) lane->thread.join();
}

void UcxLanes::close(bool force) {
  if (closed_) return;
  closed_ = true;
  stop_threads();
  std::vector<std::pair<Lane*, ucs_status_ptr_t>> closing;
  for (auto& lane : lanes_) {
    lane->queue.clear();
    for (auto& lp : lane->links) {
      if (!lp || lp->ep == nullptr) continue;
      for (auto& q : lp->pending) api_.request_free(q.request);
      lp->pending.clear();
      for (auto& [t, r] : lp->marks)
        if (r != nullptr) api_.request_free(r);
      lp->marks.clear();
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = (force || lp->failed.load() != UCS_OK) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
      ucs_status_ptr_t r = api_.ep_close_nbx(lp->ep, &param);
      lp->ep = nullptr;
      lp->fail_with(UCS_ERR_CANCELED);  // closed here: no more operations
      if (UCS_PTR_IS_PTR(r)) closing.emplace_back(lane.get(), r);
    }
  }
  const auto end = Clock::now() + std::chrono::duration<double>(std::min(config_.timeout_s, 10.0));
  // Every lane's worker progressed in turn: a peer closing its lanes in another order
  // needs this side's progress on each of them.
  for (bool open = !closing.empty(); open && Clock::now() < end;) {
    open = false;
    for (auto& lane : lanes_) api_.worker_progress(lane->worker);
    for (auto& [lane, r] : closing) open |= api_.request_check_status(r) == UCS_INPROGRESS;
  }
  for (auto& [lane, r] : closing) api_.request_free(r);
}

std::string UcxLanes::describe() const {
  const bool split = config_.split && lanes_.size() >= 2;
  std::string s = std::to_string(lanes_.size()) + (lanes_.size() == 1 ? " lane" : " lanes") +
                  " (WEFT_NET_LANES), each a UCX worker with a connection to every peer and a thread that sends and "
                  "receives on it";
  if (split) s += "; data to higher ranks on the even lanes, to lower ranks on the odd ones (WEFT_NET_LANE_SPLIT)";
  s += "; puts of 2 x " + std::to_string(config_.stripe_bytes) + " bytes or more striped over the data lanes (WEFT_NET_STRIPE_BYTES)";
  return s;
}

}  // namespace weft::net
#endif
