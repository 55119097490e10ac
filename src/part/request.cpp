#include "part/request.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "part/resync.hpp"
#include "proxy/copy_engine.hpp"
#include "util/cuda_check.hpp"
#include "util/log.hpp"

namespace weft::part {

namespace {

/// A mailbox message carrying `d`'s description.
MailMessage describe_in_message(const RequestDesc& d) {
  MailMessage m;
  m.tag = d.tag;
  m.dtype = d.dtype;
  m.partitions = d.partitions;
  m.elem_bytes = d.elem_bytes;
  m.count = d.count;
  return m;
}

/// The peer's request as its message describes it (the twin of `d`).
RequestDesc peer_desc(const RequestDesc& d, const MailMessage& m) {
  RequestDesc theirs = d;
  theirs.dir = d.dir == Direction::Send ? Direction::Recv : Direction::Send;
  theirs.partitions = m.partitions;
  theirs.count = m.count;
  theirs.dtype = m.dtype;
  theirs.elem_bytes = m.elem_bytes;
  return theirs;
}

}  // namespace

RequestImpl::RequestImpl(ContextImpl& ctx, const RequestDesc& d, void* buf)
    : ctx_(ctx), st_(d, ctx.rank()), buf_(static_cast<char*>(buf)), tracing_(ctx.trace_epochs() > 0) {
  if (buf == nullptr) fail(ErrorCode::InvalidArgument, describe(d, ctx.rank()) + ": the buffer is null");
  host_index_ = ctx_.alloc_words();
  host_ = ctx_.words(ctx_.rank(), host_index_);
  if (is_send()) {
    ctl_ = static_cast<uint64_t*>(ctx_.alloc_device(kCtlWords * sizeof(uint64_t)));
    DeviceGuard g(ctx_.device());
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&err_host_), sizeof(DeviceErrorRecord), cudaHostAllocMapped));
    *err_host_ = DeviceErrorRecord{};
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&err_dev_), err_host_, 0));
    proxy_ = ctx_.path() == TransferPath::Proxy;
    if (proxy_) {
      // One flag per transport partition; threshold 1 has the most (one per partition).
      const size_t bytes = d.partitions * sizeof(uint64_t);
      WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&ready_host_), bytes, cudaHostAllocMapped));
      std::memset(ready_host_, 0, bytes);
      WEFT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&ready_dev_), ready_host_, 0));
    }
  } else {
    flags_ = static_cast<uint64_t*>(ctx_.alloc_device((kFlagFirst + d.partitions) * sizeof(uint64_t)));
  }
}

RequestImpl::~RequestImpl() {
  const int peer = st_.desc().peer;
  if (job_ != nullptr) ctx_.engine().remove(job_);  // before its memory goes
  if (recv_job_ != nullptr) ctx_.engine().remove_recv(recv_job_);
  if (ready_host_) cudaFreeHost(ready_host_);
  if (words_) cudaFreeHost(words_);
  if (mirror_) cudaFreeHost(mirror_);
  ctx_.unmap(peer, remote_buf_);
  ctx_.unmap(peer, reinterpret_cast<char*>(remote_flags_));
  ctx_.free_device(ctl_);
  ctx_.free_device(flags_);
  if (err_host_) cudaFreeHost(err_host_);
}

uint32_t RequestImpl::threshold() const { return dreq_ ? dreq_->threshold() : 1; }

void RequestImpl::check_device_error() {
  if (err_host_ == nullptr || reinterpret_cast<volatile DeviceErrorRecord*>(err_host_)->valid == 0) return;
  const DeviceErrorRecord rec = *err_host_;
  err_host_->valid = 0;
  const uint64_t zero = 0;
  ctx_.write(ctl_ + kCtlClaim, &zero, sizeof(zero));
  errored_ = true;  // the next start resyncs the device's counters and stamps
  // The engine delivers what was readied, then stops, before the count is resynced at start.
  if (job_ != nullptr) ctx_.engine().finish_epoch(job_);
  // The epoch is over: its misused partitions were never sent, so it cannot complete.
  st_.complete();
  fail(ErrorCode::InvalidUsage, describe_device_error(st_.desc(), ctx_.rank(), rec.code, rec.partition, rec.epoch));
}

void RequestImpl::start() {
  const auto t_in = tracing_ ? EpochTrace::Clock::now() : EpochTrace::Clock::time_point{};
  check_device_error();
  st_.start();
  const uint64_t e = st_.epoch();
  if (is_send() && errored_) {
    // A misused epoch left the device's counts off: set them to the completed epochs (the
    // only CUDA calls of a start, and only after a misuse).
    if (dreq_) dreq_->resync_counters(e - 1);
    if (job_ != nullptr) expected_sent_ = delivered() + host_sent_;
  }
  errored_ = false;
  __atomic_store_n(host_ + kWordStarted, e, __ATOMIC_RELEASE);
  if (tracing_) {
    trace_ = EpochTrace{};
    trace_.start_in = t_in;
    trace_.start_out = EpochTrace::Clock::now();
  }
}

void RequestImpl::prepare_phase(Phase ph) {
  const RequestDesc& d = st_.desc();
  const bool first = !st_.set_up();
  switch (ph) {
    case Phase::Offer: {
      st_.begin_prepare();
      if (tracing_ && !st_.prepared()) trace_.prep_in = EpochTrace::Clock::now();
      if (!first || !is_send()) return;
      MailMessage m = describe_in_message(d);
      m.word_slot = host_index_;
      m.staged = proxy_ && ctx_.crosses_network(d.peer) && ctx_.stage_network() ? 1 : 0;
      offer_ = ctx_.post_offer(d.peer, m);
      return;
    }
    case Phase::Answer:
      if (first && !is_send()) answer_offer();
      return;
    case Phase::Finish:
      if (first && is_send()) finish_setup();
      return;
    case Phase::Ready: {
      if (is_send() || st_.prepared()) return;  // a second pbuf_prepare in one epoch does nothing more
      const uint64_t e = st_.epoch();
      if (recv_job_ != nullptr) ctx_.engine().set_recv_epoch(recv_job_, e);  // before the sender may send
      __atomic_store_n(peer_words_ + kWordReady, e, __ATOMIC_RELEASE);
      st_.prepare_done();
      if (tracing_) trace_.prep_out = EpochTrace::Clock::now();
      return;
    }
    case Phase::AwaitReady:
      if (is_send() && !st_.prepared()) await_ready();
      return;
  }
}

void RequestImpl::answer_offer() {
  const RequestDesc& d = st_.desc();
  MailMessage offer;
  const uint32_t idx = ctx_.match_offer(d.peer, d.tag, &offer, describe(d, ctx_.rank()));
  const RequestDesc theirs = peer_desc(d, offer);
  MailMessage reply = describe_in_message(d);
  const bool same = theirs.partitions == d.partitions && theirs.count == d.count && theirs.dtype == d.dtype;
  reply.status = same ? 0 : 1;
  if (same) {
    reply.data = ctx_.export_memory(buf_);
    reply.ctrl = ctx_.export_memory(flags_);
    if (!internal_ && ctx_.crosses_network(d.peer)) {
      bool staged = offer.staged != 0 || ctx_.stage_network();
      reply.key_slot = publish_keys(&staged, &reply) + 1;
      reply.staged = staged ? 1 : 0;
    }
  }
  ctx_.post_reply(d.peer, idx, reply);
  check_match(d, theirs, ctx_.rank());  // throws when they differ; the sender learns it from the reply
  peer_words_ = ctx_.words(d.peer, offer.word_slot);
  st_.setup_done();
}

void RequestImpl::finish_setup() {
  const RequestDesc& d = st_.desc();
  MailMessage reply = ctx_.wait_reply(d.peer, offer_, describe(d, ctx_.rank()));
  check_match(d, peer_desc(d, reply), ctx_.rank());
  remote_buf_ = ctx_.map(d.peer, reply.data);
  remote_flags_ = reinterpret_cast<uint64_t*>(ctx_.map(d.peer, reply.ctrl));
  if (proxy_) attach_engine(reply);
  st_.setup_done();
  if (dreq_) dreq_->refresh();
}

void RequestImpl::await_ready() {
  const uint64_t e = st_.epoch();
  Poller poll(ctx_.timeout_s());
  while (__atomic_load_n(host_ + kWordReady, __ATOMIC_ACQUIRE) < e)
    if (!poll.next())
      fail(ErrorCode::Timeout, describe(st_.desc(), ctx_.rank()) + ": the receiver did not become ready for epoch " +
                                   std::to_string(e) + " within " + std::to_string(poll.seconds()) +
                                   " s (WEFT_TIMEOUT; it must start and pbuf_prepare its request)");
  if (tracing_) {
    trace_.ready_seen = EpochTrace::Clock::now();
    trace_.waited_ready = true;
  }
  const uint64_t thr = threshold();
  if (thr != threshold_written_) {  // the first epoch with this threshold only
    ctx_.write(remote_flags_ + kFlagThreshold, &thr, sizeof(thr));
    threshold_written_ = static_cast<uint32_t>(thr);
  }
  if (job_ != nullptr) {
    ctx_.engine().set_epoch(job_, e, static_cast<uint32_t>(thr));
    expected_sent_ += transports();
  }
  st_.prepare_done();
  // Last: from here the device may pready partitions of epoch e.
  __atomic_store_n(host_ + kWordPrepared, e, __ATOMIC_RELEASE);
  if (tracing_) trace_.prep_out = EpochTrace::Clock::now();
}

void RequestImpl::pbuf_prepare() {
  for (Phase ph : {Phase::Offer, Phase::Answer, Phase::Finish, Phase::Ready, Phase::AwaitReady}) prepare_phase(ph);
}

void RequestImpl::pready(uint32_t p) {
  check_device_error();
  if (is_send() && dreq_ != nullptr)
    fail(ErrorCode::InvalidUsage, describe(st_.desc(), ctx_.rank()) +
                                      ": host pready on a request that has a device request (use the device pready, "
                                      "or free the device request first)");
  const uint32_t readied = st_.pready(p);
  const uint64_t pb = st_.desc().partition_bytes(), off = pb * p, e = st_.epoch();
  ctx_.copy(remote_buf_ + off, buf_ + off, pb);
  // Without a device request the threshold is 1: every partition is a transport partition.
  ctx_.write(remote_flags_ + kFlagFirst + p, &e, sizeof(e));
  ++host_sent_;
  // The copies above are synchronous: the last partition's pready completes the epoch.
  if (readied == st_.desc().partitions) __atomic_store_n(host_ + kWordDone, e, __ATOMIC_RELEASE);
}

bool RequestImpl::parrived(uint32_t p) {
  st_.check_parrived(p);
  if (!st_.active()) return true;
  uint64_t thr = 0, flag = 0;
  ctx_.read(&thr, flags_ + kFlagThreshold, sizeof(thr));
  if (thr == 0) return false;
  ctx_.read(&flag, flags_ + kFlagFirst + transport_of_peer(p, thr, st_.desc().partitions), sizeof(flag));
  return arrived_in(flag, st_.epoch());
}

bool RequestImpl::test() {
  check_device_error();
  st_.check_wait();
  if (!st_.active()) return true;
  const uint64_t e = st_.epoch();
  bool done = false;
  if (is_send()) {
    // The progression engine's count across nodes; else the done word (device, engine or host pready).
    done = job_ != nullptr && ctx_.crosses_network(st_.desc().peer)
               ? delivered() + host_sent_ >= expected_sent_
               : __atomic_load_n(host_ + kWordDone, __ATOMIC_ACQUIRE) >= e;
    if (!done && job_ != nullptr) ctx_.engine().check();  // a failed engine: its error, naming the peer
  } else if (!ctx_.crosses_network(st_.desc().peer)) {
    done = __atomic_load_n(peer_words_ + kWordDone, __ATOMIC_ACQUIRE) >= e;
  } else {
    if (recv_job_ != nullptr) {
      // Staged: this rank's engine stores the epoch into the request's own done word once every
      // run of it is in the buffer with its flags (part/engine.hpp RecvJob): a host read. A
      // sender's host pready writes the flags instead: they are copied at most every 20 us.
      ctx_.engine().check();  // a staged receive's engine failed: its error
      const auto now = std::chrono::steady_clock::now();
      if (__atomic_load_n(host_ + kWordDone, __ATOMIC_ACQUIRE) >= e) {
        st_.complete();
        return true;
      }
      if (now - flags_read_ < std::chrono::microseconds(kStagedFlagReadUs)) return false;
      flags_read_ = now;
    }
    // Across (emulated) nodes the flags are all that comes (UCX writing GPU memory), or a
    // staged receive's check above found no done word: read the flag block.
    // Only the words the threshold last seen there needs (one copy per poll, not the whole
    // block); again when the block names a threshold with more transport partitions.
    const uint32_t U = st_.desc().partitions;
    flag_block_.resize(kFlagFirst + U);  // grows once
    uint64_t words = flag_words_to_read(U, seen_threshold_);
    ctx_.read(flag_block_.data(), flags_, words * sizeof(uint64_t));
    uint64_t thr = flag_block_[kFlagThreshold];
    if (flag_words_to_read(U, thr) > words) {
      words = flag_words_to_read(U, thr);
      ctx_.read(flag_block_.data(), flags_, words * sizeof(uint64_t));
      thr = flag_block_[kFlagThreshold];
    }
    seen_threshold_ = thr;
    // The threshold comes from the peer: its transport partitions as flag_words_to_read counts
    // them (64-bit, at most U), never a truncated value.
    const uint64_t T = flag_words_to_read(U, thr) - kFlagFirst;
    done = thr != 0 && kFlagFirst + T <= words;
    for (uint64_t t = 0; done && t < T; ++t) done = flag_block_[kFlagFirst + t] >= e;
  }
  if (done) st_.complete();
  return done;
}

void RequestImpl::wait() {
  if (tracing_) trace_.wait_in = EpochTrace::Clock::now();
  Poller poll(ctx_.timeout_s());
  while (!test())
    if (!poll.next())
      fail(ErrorCode::Timeout, describe(st_.desc(), ctx_.rank()) + ": epoch " + std::to_string(st_.epoch()) +
                                   " did not complete within " + std::to_string(poll.seconds()) +
                                   " s (WEFT_TIMEOUT): " +
                                   (is_send() ? "not every partition was readied" : "not every partition arrived"));
  if (tracing_) finish_trace(poll.polls());
}

void RequestImpl::finish_trace(uint64_t polls) {
  const auto now = EpochTrace::Clock::now();
  trace_.wait_out = now;
  trace_.polls = polls;
  const uint64_t e = st_.epoch();
  if (job_ != nullptr) {  // the engine's steps of this epoch so far
    trace_.has_engine = true;
    trace_.engine = ProgressEngine::trace_of(job_);
  }
  if (trace_wanted(ctx_.trace_epochs(), e) && e == trace_epoch_ + 1) {
    EpochTraceRecord r;
    r.kind = is_send() ? EpochTraceRecord::kSend : EpochTraceRecord::kRecv;
    r.rank = ctx_.rank();
    r.peer = st_.desc().peer;
    r.tag = st_.desc().tag;
    r.epoch = e;
    r.t = trace_;
    r.prev_end = prev_end_;
    emit_epoch_trace(describe(st_.desc(), ctx_.rank()), r);
  }
  trace_epoch_ = e;
  prev_end_ = now;
}

uint64_t RequestImpl::delivered() {
  ctx_.engine().check();  // a failed engine delivers nothing more: its error, naming the peer
  return job_->completed.load(std::memory_order_acquire);
}

namespace {
// A key slot: [u32 length][block] for the buffer, then the same for the flag block.
void put_block(char*& at, const std::vector<char>& b) {
  const uint32_t n = static_cast<uint32_t>(b.size());
  std::memcpy(at, &n, sizeof n);
  std::memcpy(at + sizeof n, b.data(), b.size());
  at += sizeof n + b.size();
}
}  // namespace

uint32_t RequestImpl::publish_keys(bool* staged, MailMessage* reply) {
  const uint32_t slot = ctx_.alloc_key_slot();
  const RequestDesc& d = st_.desc();
  const std::string who = describe(d, ctx_.rank());
  const uint64_t flag_bytes = (kFlagFirst + uint64_t{d.partitions}) * sizeof(uint64_t);
  std::vector<char> data, flags;
  if (!*staged) {
    try {
      ctx_.engine().exclusive([&] {  // UCX calls do not overlap the engine's
        data = ctx_.ucx()->register_local(buf_, d.total_bytes(), true);
        flags = ctx_.ucx()->register_local(flags_, flag_bytes, true);
      });
    } catch (const Error& e) {
      WEFT_LOG(Info, "PART", who << ": UCX refused the receive buffer (" << e.what()
                                 << "); staging through page-locked memory instead");
      *staged = true;
    }
  }
  if (*staged) {
    // The network writes a page-locked mirror and a signal ring; this rank's engine copies
    // each signalled run into the buffer and raises its flags (part/engine.hpp).
    const uint64_t ring_bytes = uint64_t{kRecordWords} * d.partitions * sizeof(uint64_t);
    char* mirror = static_cast<char*>(ctx_.alloc_pinned(d.total_bytes()));
    auto* ring = static_cast<uint64_t*>(ctx_.alloc_pinned(ring_bytes));
    auto* words = static_cast<uint64_t*>(ctx_.alloc_pinned(d.partitions * sizeof(uint64_t)));
    ctx_.engine().exclusive([&] {
      data = ctx_.ucx()->register_local(mirror, d.total_bytes(), false);
      flags = ctx_.ucx()->register_local(ring, ring_bytes, false);
    });
    reply->mirror = reinterpret_cast<uint64_t>(mirror);
    reply->ring = reinterpret_cast<uint64_t>(ring);
    ProgressJobDesc jd;
    jd.who = who;
    jd.peer = d.peer;
    jd.partitions = d.partitions;
    jd.partition_bytes = d.partition_bytes();
    jd.send_bytes = jd.remote_bytes = d.total_bytes();
    jd.staged = true;
    ProgressEngine::Staging stg;
    stg.stage = std::make_shared<proxy::CopyEngineEndpoint>(
        ctx_.device(), "rank " + std::to_string(ctx_.rank()) + "'s receive buffer (staged from rank " +
                           std::to_string(d.peer) + ")",
        ctx_.timeout_s());
    stg.mirror = mirror;
    recv_job_ = ctx_.engine().add_recv(jd, std::move(stg), proxy::RemoteMemory{reinterpret_cast<uint64_t>(buf_), d.total_bytes(), nullptr},
                                       proxy::RemoteMemory{reinterpret_cast<uint64_t>(flags_), flag_bytes, nullptr}, ring, words,
                                       host_ + kWordDone,
                                       reinterpret_cast<uint64_t>(ctx_.words_device(host_index_) + kWordDone));
  }
  if (2 * sizeof(uint32_t) + data.size() + flags.size() > ContextImpl::kKeySlotBytes)
    fail(ErrorCode::Internal, who + ": UCX memory keys of " + std::to_string(data.size()) + " and " +
                                  std::to_string(flags.size()) + " bytes do not fit a key slot");
  char* at = ctx_.key_slot(ctx_.rank(), slot);
  put_block(at, data);
  put_block(at, flags);
  std::atomic_thread_fence(std::memory_order_release);  // before the reply that names the slot
  return slot;
}

void RequestImpl::attach_engine(const MailMessage& reply) {
  const RequestDesc& d = st_.desc();
  ProgressJobDesc jd;
  jd.who = describe(d, ctx_.rank());
  jd.peer = d.peer;
  jd.partitions = d.partitions;
  jd.threshold = 1;
  jd.partition_bytes = d.partition_bytes();
  jd.send_bytes = d.total_bytes();
  // The reply matched (check_match): the receiver has as many partitions of as many bytes.
  jd.remote_bytes = d.total_bytes();
  jd.remote_flag_words = kFlagFirst + d.partitions;
  proxy::RemoteMemory buf, flags;
  std::shared_ptr<proxy::Endpoint> conn;
  ProgressEngine::Staging staging;
  {
    // The engine's signal words (flag values, or staged signal records): page-locked, so the
    // copy engines read them asynchronously.
    DeviceGuard g(ctx_.device());
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&words_), uint64_t{kRecordWords} * d.partitions * sizeof(uint64_t),
                                  cudaHostAllocPortable));
  }
  if (ctx_.crosses_network(d.peer)) {
    // Another (emulated) node: UCX puts into the receiver's registered memory, with the keys
    // it left in its shared segment; every length and address is checked before use.
    if (reply.key_slot == 0)
      fail(ErrorCode::Remote, jd.who + ": rank " + std::to_string(d.peer) +
                                  " answered without memory keys for the network transport (is its context on the "
                                  "proxy path, with the same WEFT_EMULATE_NODES?)");
    std::atomic_thread_fence(std::memory_order_acquire);
    const char* at = ctx_.key_slot(d.peer, reply.key_slot - 1);
    const char* end = at + ContextImpl::kKeySlotBytes;
    auto take = [&](const char* what) {
      uint32_t n = 0;
      std::memcpy(&n, at, sizeof n);
      if (n > static_cast<uint64_t>(end - at) - sizeof n)
        fail(ErrorCode::Remote, jd.who + ": rank " + std::to_string(d.peer) + "'s key for its " + what + " claims " +
                                    std::to_string(n) + " bytes, beyond its key slot");
      std::vector<char> b(at + sizeof n, at + sizeof n + n);
      at += sizeof n + n;
      return b;
    };
    const std::vector<char> kb = take("buffer"), kf = take("flag block");
    ctx_.engine().exclusive([&] {
      buf = ctx_.ucx()->remote_memory(d.peer, kb.data(), kb.size());
      flags = ctx_.ucx()->remote_memory(d.peer, kf.data(), kf.size());
    });
    // Staged (reply.staged): the keys are those of the receiver's page-locked mirror and ring.
    jd.staged = reply.staged != 0;
    const uint64_t want_buf = jd.staged ? reply.mirror : reply.data.ptr, want_flags = jd.staged ? reply.ring : reply.ctrl.ptr;
    if (buf.address != want_buf || flags.address != want_flags)
      fail(ErrorCode::Remote, jd.who + ": rank " + std::to_string(d.peer) +
                                  "'s memory keys name other addresses than its reply");
    if (!jd.staged && ctx_.stage_network())
      fail(ErrorCode::Remote, jd.who + ": rank " + std::to_string(d.peer) +
                                  " answered for direct GPU puts, but this side asked to stage (this UCX cannot read "
                                  "GPU memory, or WEFT_PART_STAGE=1)");
    jd.remote_bytes = buf.bytes;
    jd.remote_flag_words = flags.bytes / sizeof(uint64_t);
    conn = ctx_.ucx()->endpoint(d.peer);
    if (jd.staged) {
      DeviceGuard g(ctx_.device());
      WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&mirror_), d.total_bytes(), cudaHostAllocPortable));
      staging.mirror = mirror_;
      staging.stage = std::make_shared<proxy::CopyEngineEndpoint>(
          ctx_.device(), "page-locked staging for rank " + std::to_string(d.peer), ctx_.timeout_s());
    }
  } else {
    buf.address = reinterpret_cast<uint64_t>(remote_buf_);
    buf.bytes = jd.remote_bytes;
    flags.address = reinterpret_cast<uint64_t>(remote_flags_);
    flags.bytes = jd.remote_flag_words * sizeof(uint64_t);
    // Within a node: the copy engines of this rank's GPU, into the receiver's buffer as mapped here.
    conn = std::make_shared<proxy::CopyEngineEndpoint>(ctx_.device(), "rank " + std::to_string(d.peer),
                                                         ctx_.timeout_s());
  }
  // The done word as the GPU addresses it (the segment is registered mapped): within a node the
  // copy engines' stream stores the epoch there after the epoch's last copy.
  job_ = ctx_.engine().add(jd, std::move(conn), buf_, buf, flags, ready_host_, words_, std::move(staging),
                           host_ + kWordDone, reinterpret_cast<uint64_t>(ctx_.words_device(host_index_) + kWordDone));
  if (tracing_) ctx_.engine().trace(job_);
}

std::unique_ptr<DeviceRequest> RequestImpl::device_request_create(uint32_t threshold) {
  const std::string who = describe(st_.desc(), ctx_.rank());
  if (!is_send()) fail(ErrorCode::InvalidUsage, who + ": a device request is for send requests (use recv_handle)");
  if (dreq_ != nullptr) fail(ErrorCode::InvalidUsage, who + ": already has a device request (free it first)");
  if (st_.prepared() && st_.active())
    fail(ErrorCode::InvalidUsage, who + ": device request created after pbuf_prepare in epoch " +
                                      std::to_string(st_.epoch()) + " (create it before, or between epochs)");
  if (threshold == 0 || threshold > st_.desc().partitions)
    fail(ErrorCode::InvalidArgument, who + ": threshold " + std::to_string(threshold) + " must be 1.." +
                                         std::to_string(st_.desc().partitions) + " (the partition count)");
  return std::make_unique<DeviceRequestImpl>(*this, threshold);
}

PrecvDeviceHandle RequestImpl::recv_handle() {
  if (is_send())
    fail(ErrorCode::InvalidUsage, describe(st_.desc(), ctx_.rank()) + ": recv_handle of a send request");
  PrecvDeviceHandle h;
  h.buf = buf_;
  h.flags = flags_;
  h.host = ctx_.words_device(host_index_);
  h.partitions = st_.desc().partitions;
  h.partition_bytes = st_.desc().partition_bytes();
  return h;
}

PsendDeviceHandle RequestImpl::send_handle(uint32_t thr) const {
  PsendDeviceHandle h;
  h.channel.local = buf_;
  h.channel.remote = remote_buf_;
  h.remote_flags = remote_flags_;
  h.ready = proxy_ ? ready_dev_ : nullptr;
  h.ctl = ctl_;
  h.host = ctx_.words_device(host_index_);
  h.error = err_dev_;
  h.partition_bytes = st_.desc().partition_bytes();
  h.partitions = st_.desc().partitions;
  h.threshold = thr;
  h.transports = transport_partitions(h.partitions, thr);
  return h;
}

DeviceRequestImpl::DeviceRequestImpl(RequestImpl& req, uint32_t threshold) : req_(req), threshold_(threshold) {
  ContextImpl& ctx = req.ctx();
  const uint32_t U = req.state().desc().partitions;
  counters_ = static_cast<unsigned long long*>(ctx.alloc_device(transport_partitions(U, threshold) * sizeof(uint64_t)));
  stamps_ = static_cast<uint64_t*>(ctx.alloc_device(U * sizeof(uint64_t)));
  dev_handle_ = static_cast<PsendDeviceHandle*>(ctx.alloc_device(sizeof(PsendDeviceHandle)));
  resync_counters(req.completed_epochs());
  req.attach(this);
  refresh();
}

DeviceRequestImpl::~DeviceRequestImpl() {
  req_.detach();
  ContextImpl& ctx = req_.ctx();
  ctx.free_device(counters_);
  ctx.free_device(stamps_);
  ctx.free_device(dev_handle_);
}

PsendDeviceHandle DeviceRequestImpl::handle() const {
  PsendDeviceHandle h = req_.send_handle(threshold_);
  h.counters = counters_;
  h.stamps = stamps_;
  return h;
}

void DeviceRequestImpl::refresh() {
  const PsendDeviceHandle h = handle();
  req_.ctx().write(dev_handle_, &h, sizeof(h));
}

void DeviceRequestImpl::resync_counters(uint64_t completed) {
  const uint32_t U = req_.state().desc().partitions;
  const std::vector<uint64_t> stamps = resync_stamps(U, completed);
  const std::vector<uint64_t> counters = resync_transport_counters(U, threshold_, completed);
  const std::array<uint64_t, 3> ctl = resync_ctl(resync_sent(U, threshold_, completed), completed);
  req_.ctx().write(stamps_, stamps.data(), stamps.size() * sizeof(uint64_t));
  req_.ctx().write(counters_, counters.data(), counters.size() * sizeof(uint64_t));
  req_.ctx().write(req_.ctl() + kCtlReader, ctl.data(), sizeof(ctl));
}

}  // namespace weft::part
