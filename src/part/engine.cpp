#include "part/engine.hpp"

#include <algorithm>

#include "part/state.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/part/common.hpp"

namespace weft::part {

namespace {
uint64_t load_acquire(const volatile uint64_t* p) {
  return __atomic_load_n(const_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
std::string run_name(const TransportRun& r) {
  return "transport partitions " + std::to_string(r.first) + ".." + std::to_string(uint64_t{r.first} + r.count - 1);
}
}  // namespace

ProgressEngine::ProgressEngine(double timeout_s, std::string name)
    : timeout_s_(config::wait_seconds(timeout_s)), name_(std::move(name)) {}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressEngine::start_thread() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  cv_.notify_all();  // under mu_ (every caller holds it): new work for a parked thread
}

bool ProgressEngine::awaits_device() const {
  if (progress_) return true;  // a network transport needs its progress whatever the jobs
  for (const Job& j : jobs_)
    if (!j.inflight.empty() ||
        (j.epoch != 0 && j.cursor < transport_partitions(j.desc.partitions, j.desc.threshold)))
      return true;
  for (const RecvJob& j : recv_jobs_)
    if (j.epoch != 0 || !j.inflight.empty()) return true;
  return false;
}

ProgressEngine::Job* ProgressEngine::add(const ProgressJobDesc& d, std::shared_ptr<proxy::Endpoint> endpoint,
                                         const char* local, proxy::RemoteMemory buf, proxy::RemoteMemory flags,
                                         const volatile uint64_t* ready, uint64_t* words, Staging staging,
                                         uint64_t* done_word, uint64_t done_device) {
  check_progress_job(d);
  if (words == nullptr || (d.staged && (!staging.stage || staging.mirror == nullptr)))
    fail(ErrorCode::Internal, d.who + ": progression engine: a job without its signal words or staging mirror");
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_.emplace_back();
  j.desc = d;
  j.endpoint = std::move(endpoint);
  j.local = local;
  j.buf = buf;
  j.flags = flags;
  j.ready = ready;
  j.words = words;
  j.staging = std::move(staging);
  j.done.assign(d.partitions, 0);
  j.done_word = done_word;
  j.done_device = done_word != nullptr ? done_device : 0;
  start_thread();
  return &j;
}

void ProgressEngine::remove(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  settle(*job, false);  // its memory goes next
  jobs_.remove_if([job](const Job& j) { return &j == job; });
}

void ProgressEngine::set_epoch(Job* job, uint64_t epoch, uint32_t threshold) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load()) settle(*job, false);  // the words below are read by transfers of the last epoch
  if (epoch != 0) {
    if (threshold != job->desc.threshold) {  // a new threshold only: no copy of the description per epoch
      const uint32_t old = job->desc.threshold;
      job->desc.threshold = threshold;
      try {
        check_progress_job(job->desc);
      } catch (...) {
        job->desc.threshold = old;
        throw;
      }
    }
    const ProgressJobDesc& d = job->desc;
    if (!d.staged) std::fill(job->words, job->words + transport_partitions(d.partitions, threshold), epoch);
  }
  if (job->trace) job->stamps.reset();  // after the last epoch's transfers were settled
  job->epoch = epoch;
  job->cursor = 0;
  job->signals = 0;
  job->hold.reset();
  job->done_posted = false;
  cv_.notify_all();
  // Nothing is in flight (settled above): the epoch is delivered when this many more have landed.
  job->done_target = job->completed.load(std::memory_order_relaxed) +
                     (epoch != 0 ? transport_partitions(job->desc.partitions, job->desc.threshold) : 0);
}

void ProgressEngine::set_progress(std::function<void()> progress, std::function<void(int)> check_peer) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_ = std::move(progress);
  check_peer_ = std::move(check_peer);
  start_thread();
}

void ProgressEngine::trace(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  job->stamps.reset();
  job->trace = true;
}

void ProgressEngine::finish_epoch(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load(std::memory_order_acquire)) settle(*job, true);
  job->epoch = 0;
}

ProgressEngine::RecvJob* ProgressEngine::add_recv(const ProgressJobDesc& d, Staging staging, proxy::RemoteMemory buf,
                                                  proxy::RemoteMemory flags, volatile uint64_t* ring, uint64_t* words,
                                                  uint64_t* done_word, uint64_t done_device) {
  const uint64_t total = d.partition_bytes * d.partitions;
  if (!staging.stage || staging.mirror == nullptr || ring == nullptr || words == nullptr || buf.bytes < total ||
      flags.bytes < (kFlagFirst + uint64_t{d.partitions}) * sizeof(uint64_t))
    fail(ErrorCode::Internal, d.who + ": progression engine: a staged receive without its mirror, ring, words, or "
                                      "with a buffer or flag block too small");
  std::lock_guard<std::mutex> lock(mu_);
  RecvJob& j = recv_jobs_.emplace_back();
  j.desc = d;
  j.staging = std::move(staging);
  j.buf = buf;
  j.flags = flags;
  j.ring = ring;
  j.words = words;
  j.done_word = done_word;
  j.done_device = done_word != nullptr ? done_device : 0;
  start_thread();
  return &j;
}

void ProgressEngine::remove_recv(RecvJob* job) {
  std::lock_guard<std::mutex> lock(mu_);
  settle(*job, false);
  recv_jobs_.remove_if([job](const RecvJob& j) { return &j == job; });
}

void ProgressEngine::set_recv_epoch(RecvJob* job, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load()) settle(*job, false);
  std::fill(job->words, job->words + job->desc.partitions, epoch);
  job->epoch = epoch;
  job->next = 0;
  job->arrived = 0;
  job->transports = 0;
  job->done_posted = false;
  cv_.notify_all();
}

void ProgressEngine::check() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_) fail(error_code_, *error_);
}

void ProgressEngine::check_age(const std::deque<Op>& ops, const std::string& who, const std::string& peer) const {
  if (ops.empty() || Clock::now() - ops.front().since < std::chrono::duration<double>(timeout_s_)) return;
  const Op& op = ops.front();
  fail(ErrorCode::Timeout, who + ": " + run_name(op.run) + " (" + std::to_string(op.run.bytes) + " bytes) " +
                               (op.staging ? "were not copied into page-locked staging" : "did not land at " + peer) +
                               " within " + std::to_string(timeout_s_) + " s (WEFT_TIMEOUT)");
}

void ProgressEngine::post(Job& j, const std::vector<TransportRun>& rs) {
  if (rs.empty()) return;
  if (j.trace) EngineStamps::mark_once(j.stamps.post, EngineStamps::now_ns());
  const uint64_t e = j.epoch;
  j.puts.clear();
  j.signals_of_pass.clear();
  for (const TransportRun& r : rs) {
    if (r.bytes > 0) j.puts.push_back(proxy::Endpoint::Put{r.offset, j.local + r.offset, r.bytes});
    // One signal per run: its flag words, from the array holding the epoch.
    j.signals_of_pass.push_back(
        proxy::Endpoint::Words{(kFlagFirst + uint64_t{r.first}) * sizeof(uint64_t), j.words + r.first, r.count});
    for (uint32_t t = r.first; t < r.first + r.count; ++t) j.done[t] = e;
  }
  uint64_t ticket = 0;
  if (j.desc.staged) {
    // Into the page-locked mirror first; post_network follows once the copies have landed.
    const proxy::RemoteMemory mirror{reinterpret_cast<uint64_t>(j.staging.mirror), j.desc.send_bytes, nullptr};
    j.staging.stage->put_many(mirror, j.puts.data(), j.puts.size());
    ticket = j.staging.stage->mark(timeout_s_);
  } else {
    proxy::Endpoint& c = *j.endpoint;
    c.put_many(j.buf, j.puts.data(), j.puts.size());
    // The pass that takes the epoch's last transport partition also has the stream store the
    // epoch into the done word after every copy (the hosts see it without this thread).
    const uint32_t transports = transport_partitions(j.desc.partitions, j.desc.threshold);
    while (j.cursor < transports && j.done[j.cursor] == e) ++j.cursor;
    const bool last = j.cursor == transports && j.done_device != 0 && !j.done_posted;
    bool written = false;
    ticket = c.signal_and_mark(j.flags, j.signals_of_pass.data(), j.signals_of_pass.size(), last ? j.done_device : 0, e,
                               &written, timeout_s_);
    j.done_posted = j.done_posted || written;
  }
  const Clock::time_point now = Clock::now();
  for (const TransportRun& r : rs) j.inflight.push_back(Op{r, ticket, j.desc.staged, now});
  if (j.trace) {
    j.stamps.posted.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
                          std::memory_order_relaxed);
    j.stamps.batches.fetch_add(1, std::memory_order_relaxed);
  }
}

void ProgressEngine::post_network(Job& j, size_t first, size_t n) {
  if (n == 0) return;
  if (uint64_t{j.signals} + n > j.desc.partitions)
    fail(ErrorCode::Internal, j.desc.who + ": progression engine: more signals than ring slots (" +
                                  std::to_string(j.desc.partitions) + ") in epoch " + std::to_string(j.epoch));
  // Consecutive ring slots, so the n records go as one write after one fence.
  const uint32_t slot = j.signals;
  j.signals += static_cast<uint32_t>(n);
  uint64_t* records = j.words + uint64_t{slot} * kRecordWords;
  j.puts.clear();
  for (size_t k = 0; k < n; ++k) {
    const TransportRun& r = j.inflight[first + k].run;
    encode_arrival(r, j.desc.threshold, records + k * kRecordWords);
    if (r.bytes > 0) j.puts.push_back(proxy::Endpoint::Put{r.offset, j.staging.mirror + r.offset, r.bytes});
  }
  j.endpoint->put_many(j.buf, j.puts.data(), j.puts.size());
  j.endpoint->write_words(j.flags, uint64_t{slot} * kRecordWords * sizeof(uint64_t), records, n * kRecordWords);
  const uint64_t ticket = j.endpoint->mark(timeout_s_);
  const Clock::time_point now = Clock::now();
  for (size_t k = 0; k < n; ++k) {
    Op& op = j.inflight[first + k];
    op.ticket = ticket;
    op.staging = false;
    op.since = now;
  }
  if (j.trace)  // the network submission of staged copies: the epoch's last submission so far
    j.stamps.posted.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
                          std::memory_order_relaxed);
}

uint64_t ProgressEngine::retire(Job& j) {
  if (j.staging.stage) {
    // Copies into the mirror land in order: every one landed since the last pass goes to the
    // network as one batch.
    size_t first = 0, n = 0;
    while (first < j.inflight.size() && !j.inflight[first].staging) ++first;
    while (first + n < j.inflight.size() && j.staging.stage->landed(j.inflight[first + n].ticket)) ++n;
    post_network(j, first, n);
  }
  uint64_t landed = 0;
  while (!j.inflight.empty() && !j.inflight.front().staging && j.endpoint->landed(j.inflight.front().ticket)) {
    landed += j.inflight.front().run.count;
    j.inflight.pop_front();
  }
  if (landed > 0) {
    const uint64_t now = j.completed.fetch_add(landed, std::memory_order_release) + landed;
    const bool epoch_landed = j.epoch != 0 && now >= j.done_target;
    if (j.trace && epoch_landed) {  // stamped before the done word, which a waiter acquires
      const int64_t ns = EngineStamps::now_ns();
      EngineStamps::mark_once(j.stamps.landed, ns);
      if (j.done_word != nullptr) EngineStamps::mark_once(j.stamps.done, ns);
    }
    if (j.done_word != nullptr && epoch_landed) __atomic_store_n(j.done_word, j.epoch, __ATOMIC_RELEASE);
  }
  check_age(j.inflight, j.desc.who, j.endpoint->peer());
  return landed;
}

uint64_t ProgressEngine::serve(Job& j, bool force) {
  uint64_t moved = retire(j);
  const uint64_t e = j.epoch;
  if (e == 0) return moved;
  const uint32_t transports = transport_partitions(j.desc.partitions, j.desc.threshold);
  while (j.cursor < transports && j.done[j.cursor] == e) ++j.cursor;
  // Runs of adjacent ready transport partitions, from the cursor on, each cut at engine_chunk_bytes.
  const size_t room = kEngineInflight - std::min<size_t>(j.inflight.size(), kEngineInflight);
  j.runs.clear();
  std::optional<TransportRun> run;
  uint64_t ready = j.cursor;  // ready or taken in this epoch
  bool rest_ready = true;     // every transport partition from the cursor on is
  auto close = [&] {
    if (run && j.runs.size() < room) j.runs.push_back(*run);
    run.reset();
  };
  uint32_t t = j.cursor;
  for (; t < transports && j.runs.size() < room; ++t) {
    if (j.done[t] == e) {
      ++ready;
      close();
      continue;
    }
    const uint64_t v = load_acquire(j.ready + t);
    if (v != e) {
      if (v > e + 1) {  // e + 1: readied before this side saw the receiver ready (misuse the host reports)
        bool pending = false;
        plan_transport_put(j.desc, t, v, e, &pending);  // throws, naming the value
      }
      rest_ready = false;
      close();
      continue;
    }
    bool pending = false;
    const TransportPut p = plan_transport_put(j.desc, t, v, e, &pending);  // checks the range
    if (!pending) continue;
    if (j.trace && j.stamps.seen.load(std::memory_order_relaxed) == 0) j.stamps.seen.store(EngineStamps::now_ns(), std::memory_order_relaxed);
    ++ready;
    if (run && run->first + run->count == t && run->bytes + p.bytes <= engine_chunk_bytes(j.desc.staged)) {
      ++run->count;
      run->bytes += p.bytes;
    } else {
      close();
      run = TransportRun{t, 1, p.offset, p.bytes};
    }
  }
  close();
  if (j.runs.empty()) return moved;
  const bool all = force || (rest_ready && t == transports) || j.runs.size() >= room ||
                   j.hold.post(ready, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          Clock::now().time_since_epoch()).count());
  j.posting.clear();
  for (const TransportRun& r : j.runs)
    if (all || r.bytes >= engine_eager_bytes(j.desc.staged)) {
      j.posting.push_back(r);
      moved += r.count;
    }
  post(j, j.posting);  // one batch of puts, one of signals, one mark
  return moved;
}

uint64_t ProgressEngine::retire(RecvJob& j) {
  uint64_t moved = 0;
  while (!j.inflight.empty() && j.staging.stage->landed(j.inflight.front().ticket)) {
    moved += j.inflight.front().run.count;
    j.inflight.pop_front();
  }
  if (moved > 0 && j.inflight.empty() && j.done_word != nullptr && j.epoch != 0 && j.transports != 0 &&
      j.arrived >= j.transports)
    __atomic_store_n(j.done_word, j.epoch, __ATOMIC_RELEASE);
  check_age(j.inflight, j.desc.who, "the receive buffer");
  return moved;
}

uint64_t ProgressEngine::serve(RecvJob& j) {
  uint64_t moved = retire(j);
  if (j.epoch == 0) return moved;
  j.posting.clear();
  while (j.next < j.desc.partitions && j.inflight.size() + j.posting.size() < kEngineInflight) {
    volatile uint64_t* slot = j.ring + uint64_t{j.next} * kRecordWords;
    const uint64_t record[kRecordWords] = {load_acquire(slot), load_acquire(slot + 1)};
    bool complete = false;
    uint32_t threshold = 0;
    const TransportRun r = decode_arrival(j.desc, record, j.arrived, &complete, &threshold);
    if (!complete) break;
    // Cleared before anything else: the sender fills it again only in a later epoch, after
    // this side has seen every run of this one and said it is ready.
    for (uint32_t w = 0; w < kRecordWords; ++w) __atomic_store_n(const_cast<uint64_t*>(slot + w), 0, __ATOMIC_RELAXED);
    ++j.next;
    j.arrived += r.count;
    j.transports = transport_partitions(j.desc.partitions, threshold);
    j.posting.push_back(r);
    moved += r.count;
  }
  post(j);
  return moved;
}

void ProgressEngine::post(RecvJob& j) {
  if (j.posting.empty()) return;
  j.puts.clear();
  j.signals_of_pass.clear();
  for (const TransportRun& r : j.posting) {
    if (r.bytes > 0) j.puts.push_back(proxy::Endpoint::Put{r.offset, j.staging.mirror + r.offset, r.bytes});
    j.signals_of_pass.push_back(
        proxy::Endpoint::Words{(kFlagFirst + uint64_t{r.first}) * sizeof(uint64_t), j.words + r.first, r.count});
  }
  proxy::Endpoint& c = *j.staging.stage;
  c.put_many(j.buf, j.puts.data(), j.puts.size());
  const bool last = j.done_device != 0 && !j.done_posted && j.arrived >= j.transports;
  bool written = false;
  const uint64_t ticket = c.signal_and_mark(j.flags, j.signals_of_pass.data(), j.signals_of_pass.size(),
                                            last ? j.done_device : 0, j.epoch, &written, timeout_s_);
  j.done_posted = j.done_posted || written;
  const Clock::time_point now = Clock::now();
  for (const TransportRun& r : j.posting) j.inflight.push_back(Op{r, ticket, false, now});
  j.posting.clear();
}

template <class J>
void ProgressEngine::drain(J& j, bool take) {
  const auto end = Clock::now() + std::chrono::duration<double>(timeout_s_);
  for (;;) {
    if (progress_) progress_();
    if constexpr (std::is_same_v<J, Job>) j.endpoint->progress();
    uint64_t moved = 0;
    if constexpr (std::is_same_v<J, Job>)
      moved = take ? serve(j, true) : retire(j);
    else
      moved = take ? serve(j) : retire(j);
    if (j.inflight.empty() && moved == 0) return;
    if (Clock::now() > end)
      fail(ErrorCode::Timeout, j.desc.who + ": " + std::to_string(j.inflight.size()) +
                                   " transfers of the progression engine still in flight after " +
                                   std::to_string(timeout_s_) + " s (WEFT_TIMEOUT)");
    std::this_thread::yield();
  }
}

template <class J>
void ProgressEngine::settle(J& j, bool take) {
  try {
    drain(j, take);
  } catch (const Error& err) {
    record(err.code(), err.what());
  }
}

void ProgressEngine::record(ErrorCode code, const std::string& what) {
  std::lock_guard<std::mutex> lock(error_mu_);
  if (!error_) {
    error_ = name_ + ": " + what;
    error_code_ = code;
  }
  failed_.store(true, std::memory_order_release);
  WEFT_LOG(Error, "PROXY", *error_);
}

bool ProgressEngine::has_work(const Job& j) {
  return !j.inflight.empty() || (j.epoch != 0 && j.completed.load(std::memory_order_relaxed) < j.done_target);
}

bool ProgressEngine::has_work(const RecvJob& j) {
  return !j.inflight.empty() || (j.epoch != 0 && (j.transports == 0 || j.arrived < j.transports));
}

void ProgressEngine::run() {
  uint32_t idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t moved = 0;
    if (!failed_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mu_);
      try {
        if (progress_) progress_();
        // A job without work is left alone: its endpoint's progress would report a peer
        // that has left once every request with it was done.
        for (Job& j : jobs_) {
          if (!has_work(j)) continue;
          if (check_peer_ && j.desc.peer >= 0) check_peer_(j.desc.peer);
          j.endpoint->progress();
          moved += serve(j);
        }
        for (RecvJob& j : recv_jobs_) {
          if (!has_work(j)) continue;
          if (check_peer_ && j.desc.peer >= 0) check_peer_(j.desc.peer);
          moved += serve(j);
        }
      } catch (const Error& err) {
        record(err.code(), err.what());
      } catch (const std::exception& err) {
        record(ErrorCode::Internal, err.what());
      }
    }
    if (moved > 0) {
      idle = 0;
      continue;
    }
    // Poll (yielding, never sleeping) while a flag, a transfer or the network may bring
    // work; after kIdlePasses empty passes with nothing of the kind pending, park until a
    // job, an epoch or the destructor wakes the thread.
    if (++idle < kIdlePasses) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (!stop_.load() && (failed_.load() || !awaits_device()))
      cv_.wait(lock, [&] { return stop_.load() || (!failed_.load() && awaits_device()); });
    idle = 0;
  }
}

}  // namespace weft::part
