#include "part/collective.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <thread>

#include "part/resync.hpp"
#include "ir/datatype.hpp"
#include "util/cuda_check.hpp"

namespace weft::part {

namespace {

/// The types the device reduces (weft/part/collective_device.hpp): the 4- and 8-byte ones.
bool reducible(int dtype) { return dtype_bytes(dtype) >= 4; }

/// Every rank's schedule of one kind, checked together (pairing, chunks, no deadlock).
void check_all(int nranks, const std::function<Schedule(int)>& make) {
  std::vector<Schedule> all;
  for (int r = 0; r < nranks; ++r) all.push_back(make(r));
  check_schedules(all);
}

}  // namespace

CollectiveImpl::CollectiveImpl(ContextImpl& ctx, Schedule sched, std::string name, void* buf, uint32_t partitions,
                               uint64_t count, int dtype, int op, int tag)
    : ctx_(ctx), sched_(std::move(sched)), name_(std::move(name)), tag_(tag) {
  if (buf == nullptr) fail(ErrorCode::InvalidArgument, who() + ": the buffer is null");
  if (partitions == 0 || count == 0)
    fail(ErrorCode::InvalidArgument, who() + ": partitions and count (elements per partition) must be at least 1");
  if (tag < 0) fail(ErrorCode::InvalidArgument, who() + ": tag " + std::to_string(tag) + " is negative");
  const uint32_t eb = dtype_bytes(dtype);
  if (eb == 0) fail(ErrorCode::InvalidArgument, who() + ": datatype " + std::to_string(dtype) + " is not a weftDataType_t");
  const bool reduces = std::any_of(sched_.steps.begin(), sched_.steps.end(),
                                   [](const Step& s) { return s.op == StepOp::Reduce; });
  if (reduces && !reducible(dtype))
    fail(ErrorCode::InvalidUsage, who() + ": datatype " + std::to_string(dtype) +
                                      " is not reduced on the device yet (float32, float64, int32, uint32, int64, uint64 are)");
  if (reduces && (!valid_op(op) || op == kOpAvg))
    fail(ErrorCode::InvalidArgument, who() + ": operation " + std::to_string(op) + " (sum, prod, max, min are supported)");
  if (count < sched_.chunks)
    fail(ErrorCode::InvalidArgument, who() + ": count " + std::to_string(count) + " is below the schedule's " +
                                         std::to_string(sched_.chunks) + " chunks per partition");
  // Neighbours: every rank this one receives from or sends to.
  for (int p : sched_.in_peers()) peers_.push_back(p);
  for (int p : sched_.out_peers())
    if (std::find(peers_.begin(), peers_.end(), p) == peers_.end()) peers_.push_back(p);
  auto index = [&](int p) { return static_cast<int8_t>(std::find(peers_.begin(), peers_.end(), p) - peers_.begin()); };
  const uint64_t max_chunk = (count + sched_.chunks - 1) / sched_.chunks;
  const uint64_t slot_bytes = (max_chunk * eb + 15) / 16 * 16;
  // Internal requests carry bytes; their tags are negative so that no user request matches them.
  const int itag = -1 - tag;
  recvs_.resize(peers_.size());
  sends_.resize(peers_.size());
  scratch_.assign(peers_.size(), nullptr);
  std::vector<PcollPeer> hp(peers_.size());
  for (size_t i = 0; i < peers_.size(); ++i) {
    const int p = peers_[i];
    hp[i].slots_in = sched_.slots_from(p);
    hp[i].slots_out = sched_.slots_to(p);
    if (hp[i].slots_in > 0) {
      RequestDesc d{Direction::Recv, p, itag, partitions * hp[i].slots_in, slot_bytes, 1, 1};
      scratch_[i] = ctx_.alloc_device(d.total_bytes());
      recvs_[i] = std::make_unique<RequestImpl>(ctx_, d, scratch_[i]);
      recvs_[i]->set_internal();
    }
    if (hp[i].slots_out > 0) {
      RequestDesc d{Direction::Send, p, itag, partitions * hp[i].slots_out, slot_bytes, 1, 1};
      sends_[i] = std::make_unique<RequestImpl>(ctx_, d, buf);
      sends_[i]->set_internal();
    }
  }
  std::vector<PcollStep> hs;
  for (const Step& s : sched_.steps) {
    if (s.in.size() > kMaxStepPeers || s.out.size() > kMaxStepPeers)
      fail(ErrorCode::Internal, who() + ": a step with more than " + std::to_string(kMaxStepPeers) + " neighbours");
    PcollStep d;
    d.n_in = static_cast<int8_t>(s.in.size());
    d.n_out = static_cast<int8_t>(s.out.size());
    d.op = static_cast<uint8_t>(s.op);
    d.recv_chunk = static_cast<int16_t>(s.recv_chunk);
    d.send_chunk = static_cast<int16_t>(s.send_chunk);
    for (size_t k = 0; k < s.in.size(); ++k) {
      d.in_peer[k] = index(s.in[k].peer);
      d.in_slot[k] = static_cast<uint16_t>(s.in[k].slot);
    }
    for (size_t k = 0; k < s.out.size(); ++k) {
      d.out_peer[k] = index(s.out[k].peer);
      d.out_slot[k] = static_cast<uint16_t>(s.out[k].slot);
    }
    hs.push_back(d);
  }
  dev_steps_ = static_cast<PcollStep*>(ctx_.alloc_device(std::max<size_t>(1, hs.size()) * sizeof(PcollStep)));
  if (!hs.empty()) ctx_.write(dev_steps_, hs.data(), hs.size() * sizeof(PcollStep));
  dev_peers_ = static_cast<PcollPeer*>(ctx_.alloc_device(std::max<size_t>(1, hp.size()) * sizeof(PcollPeer)));
  dev_handle_ = static_cast<PcollDeviceHandle*>(ctx_.alloc_device(sizeof(PcollDeviceHandle)));
  handle_.buf = static_cast<char*>(buf);
  handle_.partition_elems = count;
  handle_.partitions = partitions;
  handle_.chunks = sched_.chunks;
  handle_.nsteps = static_cast<uint32_t>(hs.size());
  handle_.elem_bytes = eb;
  handle_.dtype = dtype;
  handle_.op = op;
  handle_.slot_bytes = slot_bytes;
  handle_.steps = dev_steps_;
  handle_.peers = dev_peers_;
  handle_.ctl = static_cast<uint64_t*>(ctx_.alloc_device(kCtlWords * sizeof(uint64_t)));
  handle_.stamps = static_cast<uint64_t*>(ctx_.alloc_device(partitions * sizeof(uint64_t)));
  handle_.finished = static_cast<uint64_t*>(ctx_.alloc_device((partitions + 1) * sizeof(uint64_t)));  // + parrived's cache
  handle_.timeout_ns = static_cast<uint64_t>(ctx_.timeout_s() * 1e9);
  host_index_ = ctx_.alloc_words();
  host_ = ctx_.words(ctx_.rank(), host_index_);
  handle_.host = ctx_.words_device(host_index_);
  {
    DeviceGuard g(ctx_.device());
    WEFT_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&err_host_), sizeof(DeviceErrorRecord), cudaHostAllocMapped));
    *err_host_ = DeviceErrorRecord{};
    WEFT_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&handle_.error), err_host_, 0));
  }
  upload();
}

CollectiveImpl::~CollectiveImpl() {
  recvs_.clear();
  sends_.clear();
  for (void* s : scratch_) ctx_.free_device(s);
  ctx_.free_device(dev_steps_);
  ctx_.free_device(dev_peers_);
  ctx_.free_device(dev_handle_);
  ctx_.free_device(handle_.ctl);
  ctx_.free_device(handle_.stamps);
  ctx_.free_device(handle_.finished);
  if (err_host_) cudaFreeHost(err_host_);
}

std::string CollectiveImpl::who() const {
  return "rank " + std::to_string(ctx_.rank()) + ": " + name_ + " (tag " + std::to_string(tag_) + ")";
}

void CollectiveImpl::upload() {
  std::vector<PcollPeer> hp(peers_.size());
  for (size_t i = 0; i < peers_.size(); ++i) {
    hp[i].slots_in = sched_.slots_from(peers_[i]);
    hp[i].slots_out = sched_.slots_to(peers_[i]);
    if (recvs_[i]) {
      hp[i].local_scratch = static_cast<const char*>(scratch_[i]);
      hp[i].local_flags = recvs_[i]->flags();
    }
    if (sends_[i]) {
      hp[i].channel.local = handle_.buf;
      hp[i].channel.remote = sends_[i]->remote_buf();
      hp[i].remote_flags = sends_[i]->remote_flags();
    }
  }
  if (!hp.empty()) ctx_.write(dev_peers_, hp.data(), hp.size() * sizeof(PcollPeer));
  ctx_.write(dev_handle_, &handle_, sizeof(handle_));
}

void CollectiveImpl::check_device_error() {
  if (reinterpret_cast<volatile DeviceErrorRecord*>(err_host_)->valid == 0) return;
  const DeviceErrorRecord rec = *err_host_;
  err_host_->valid = 0;
  const uint64_t zero = 0;
  ctx_.write(handle_.ctl + kCtlClaim, &zero, sizeof(zero));
  // The epoch cannot complete; the next start resyncs the counts and begins a fresh one (the
  // peers see a timeout).
  active_ = false;
  errored_ = true;
  for (auto& r : recvs_) if (r) r->mark_complete();
  for (auto& s : sends_) if (s) s->mark_complete();
  const std::string p = std::to_string(rec.partition), e = std::to_string(rec.epoch);
  switch (rec.code) {
    case kDevOutOfRange:
      fail(ErrorCode::InvalidUsage, who() + ": device pready of partition " + p + ", out of range (" +
                                        std::to_string(handle_.partitions) + " partitions)");
    case kDevTwice: fail(ErrorCode::InvalidUsage, who() + ": device pready twice for partition " + p + " in epoch " + e);
    case kDevNotStarted: fail(ErrorCode::InvalidUsage, who() + ": device pready of partition " + p + " before start");
    case kDevNotPrepared:
      fail(ErrorCode::InvalidUsage, who() + ": device pready of partition " + p + " in epoch " + e +
                                        " before pbuf_prepare returned");
    default:
      fail(ErrorCode::Timeout, who() + ": partition " + p + " of epoch " + e +
                                   " waited longer than WEFT_TIMEOUT for a neighbour's data (a peer did not pready "
                                   "it, or its blocks could not run alongside)");
  }
}

void CollectiveImpl::start() {
  const bool tr = ctx_.trace_epochs() > 0;
  const auto t_in = tr ? EpochTrace::Clock::now() : EpochTrace::Clock::time_point{};
  check_device_error();
  if (active_)
    fail(ErrorCode::InvalidUsage, who() + ": start while active (epoch " + std::to_string(epoch_) +
                                      " has not completed; wait or test it first)");
  for (auto& r : recvs_) if (r) r->start();
  for (auto& s : sends_) if (s) s->start();
  if (errored_) {  // the only CUDA calls of a start, and only after a misuse
    const std::vector<uint64_t> stamps = resync_stamps(handle_.partitions, epoch_);
    const std::array<uint64_t, 3> ctl = resync_ctl(resync_sent(handle_.partitions, 1, epoch_), epoch_);
    ctx_.write(handle_.stamps, stamps.data(), stamps.size() * sizeof(uint64_t));
    ctx_.write(handle_.ctl + kCtlReader, ctl.data(), sizeof(ctl));
    errored_ = false;
  }
  ++epoch_;
  active_ = true;
  prepared_ = false;
  __atomic_store_n(host_ + kWordStarted, epoch_, __ATOMIC_RELEASE);
  if (tr) {
    trace_ = EpochTrace{};
    trace_.start_in = t_in;
    trace_.start_out = EpochTrace::Clock::now();
  }
}

void CollectiveImpl::pbuf_prepare() {
  if (!active_) fail(ErrorCode::InvalidUsage, who() + ": pbuf_prepare on an inactive collective (call start first)");
  const bool tr = ctx_.trace_epochs() > 0;
  if (tr && !prepared_) trace_.prep_in = EpochTrace::Clock::now();
  for (auto ph : {RequestImpl::Phase::Offer, RequestImpl::Phase::Answer, RequestImpl::Phase::Finish,
                  RequestImpl::Phase::Ready, RequestImpl::Phase::AwaitReady}) {
    for (auto& s : sends_) if (s) s->prepare_phase(ph);
    for (auto& r : recvs_) if (r) r->prepare_phase(ph);
  }
  if (!set_up_) {
    upload();
    set_up_ = true;
  }
  if (!prepared_) {
    prepared_ = true;
    // Last: from here the device may pready partitions of this epoch.
    __atomic_store_n(host_ + kWordPrepared, epoch_, __ATOMIC_RELEASE);
    if (tr) trace_.prep_out = EpochTrace::Clock::now();
  }
}

bool CollectiveImpl::test() {
  check_device_error();
  if (!active_) return true;
  if (!prepared_)
    fail(ErrorCode::InvalidUsage, who() + ": wait or test in epoch " + std::to_string(epoch_) + " before pbuf_prepare");
  if (__atomic_load_n(host_ + kWordDone, __ATOMIC_ACQUIRE) < epoch_) return false;
  for (auto& r : recvs_) if (r) r->mark_complete();
  for (auto& s : sends_) if (s) s->mark_complete();
  active_ = false;
  return true;
}

void CollectiveImpl::wait() {
  const bool tr = ctx_.trace_epochs() > 0;
  if (tr) trace_.wait_in = EpochTrace::Clock::now();
  Poller poll(ctx_.timeout_s());
  while (!test())
    if (!poll.next())
      fail(ErrorCode::Timeout, who() + ": epoch " + std::to_string(epoch_) + " did not complete within " +
                                   std::to_string(poll.seconds()) + " s (WEFT_TIMEOUT): not every partition was readied");
  if (!tr) return;
  const auto now = EpochTrace::Clock::now();
  trace_.wait_out = now;
  trace_.polls = poll.polls();
  if (trace_wanted(ctx_.trace_epochs(), epoch_) && epoch_ == trace_epoch_ + 1) {
    EpochTraceRecord r;
    r.kind = EpochTraceRecord::kCollective;
    r.rank = ctx_.rank();
    r.tag = tag_;
    r.epoch = epoch_;
    r.t = trace_;
    r.prev_end = prev_end_;
    emit_epoch_trace(who(), r);
  }
  trace_epoch_ = epoch_;
  prev_end_ = now;
}

bool CollectiveImpl::parrived(uint32_t u) {
  if (u >= handle_.partitions)
    fail(ErrorCode::InvalidArgument, who() + ": parrived of partition " + std::to_string(u) + ", out of range (" +
                                         std::to_string(handle_.partitions) + " partitions)");
  if (!active_) return true;
  uint64_t f = 0;
  ctx_.read(&f, handle_.finished + u, sizeof(f));
  return arrived_in(f, epoch_);
}

std::unique_ptr<Request> ContextImpl::psend_init(const void* buf, uint32_t partitions, uint64_t count, int dtype,
                                                 int peer, int tag) {
  RequestDesc d{Direction::Send, peer, tag, partitions, count, dtype, dtype_bytes(dtype)};
  check_init(d, rank_, nranks_);
  if (peer == rank_) fail(ErrorCode::InvalidArgument, describe(d, rank_) + ": a partitioned send to this rank itself");
  return std::make_unique<RequestImpl>(*this, d, const_cast<void*>(buf));
}

std::unique_ptr<Request> ContextImpl::precv_init(void* buf, uint32_t partitions, uint64_t count, int dtype, int peer,
                                                 int tag) {
  RequestDesc d{Direction::Recv, peer, tag, partitions, count, dtype, dtype_bytes(dtype)};
  check_init(d, rank_, nranks_);
  if (peer == rank_) fail(ErrorCode::InvalidArgument, describe(d, rank_) + ": a partitioned receive from this rank itself");
  return std::make_unique<RequestImpl>(*this, d, buf);
}

void ContextImpl::pbuf_prepare_all(const std::vector<Request*>& requests) {
  // Checked first, then cast again per phase: no allocation per epoch.
  for (Request* r : requests)
    if (dynamic_cast<RequestImpl*>(r) == nullptr)
      fail(ErrorCode::InvalidArgument, "pbuf_prepare_all: a request is null or not a weft request");
  for (auto ph : {RequestImpl::Phase::Offer, RequestImpl::Phase::Answer, RequestImpl::Phase::Finish,
                  RequestImpl::Phase::Ready, RequestImpl::Phase::AwaitReady})
    for (Request* r : requests) static_cast<RequestImpl*>(r)->prepare_phase(ph);
}

std::unique_ptr<Collective> ContextImpl::pallreduce_init(void* buf, uint32_t partitions, uint64_t count, int dtype,
                                                         int op, int tag) {
  check_all(nranks_, [&](int r) { return ring_allreduce(r, nranks_); });
  return std::make_unique<CollectiveImpl>(*this, ring_allreduce(rank_, nranks_), "pallreduce", buf, partitions, count,
                                          dtype, op, tag);
}

std::unique_ptr<Collective> ContextImpl::pbcast_init(void* buf, uint32_t partitions, uint64_t count, int dtype,
                                                     int root, int tag) {
  if (root < 0 || root >= nranks_)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank_) + ": pbcast root " + std::to_string(root) +
                                         " is not a rank (" + std::to_string(nranks_) + " ranks)");
  check_all(nranks_, [&](int r) { return chain_broadcast(r, nranks_, root); });
  return std::make_unique<CollectiveImpl>(*this, chain_broadcast(rank_, nranks_, root), "pbcast", buf, partitions,
                                          count, dtype, 0, tag);
}

}  // namespace weft::part
