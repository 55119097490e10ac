#include "part/engine.hpp"

#include <chrono>

#include "part/state.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "weft/part/common.hpp"

namespace weft::part {

ProgressEngine::ProgressEngine(double timeout_s, std::string name)
    : timeout_s_(config::wait_seconds(timeout_s)), name_(std::move(name)) {}

ProgressEngine::~ProgressEngine() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

ProgressEngine::Job* ProgressEngine::add(const ProgressJobDesc& d, std::shared_ptr<proxy::Connection> connection,
                                         const char* local, proxy::RemoteMemory buf, proxy::RemoteMemory flags,
                                         const volatile uint64_t* ready) {
  check_progress_job(d);
  std::lock_guard<std::mutex> lock(mu_);
  Job& j = jobs_.emplace_back();
  j.desc = d;
  j.connection = std::move(connection);
  j.local = local;
  j.buf = buf;
  j.flags = flags;
  j.ready = ready;
  j.done.assign(d.partitions, 0);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  return &j;
}

void ProgressEngine::remove(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
    if (&*it == job) {
      jobs_.erase(it);
      return;
    }
}

void ProgressEngine::set_epoch(Job* job, uint64_t epoch, uint32_t threshold) {
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != 0) {
    ProgressJobDesc d = job->desc;
    d.threshold = threshold;
    check_progress_job(d);
    job->desc = d;
  }
  job->epoch = epoch;
}

void ProgressEngine::set_progress(std::function<void()> progress) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_ = std::move(progress);
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

void ProgressEngine::finish_epoch(Job* job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load(std::memory_order_acquire)) {
    try {
      serve(*job);
    } catch (const Error& err) {
      record(err.code(), err.what());
    }
  }
  job->epoch = 0;
}

void ProgressEngine::check() const {
  if (!failed_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(error_mu_);
  if (error_) fail(error_code_, *error_);
}

uint64_t ProgressEngine::serve(Job& j) {
  const uint64_t e = j.epoch;
  if (e == 0) return 0;
  const uint32_t transports = transport_partitions(j.desc.partitions, j.desc.threshold);
  // Every transport partition marked ready in this pass, checked, in index order.
  std::vector<TransportPut>& puts = j.pass;
  puts.clear();
  for (uint32_t t = 0; t < transports; ++t) {
    if (j.done[t] == e) continue;
    const uint64_t v = j.ready[t];
    if (v != e) {
      if (v > e + 1) {  // e + 1: readied before this side saw the receiver ready (misuse the host reports)
        bool pending = false;
        plan_transport_put(j.desc, t, v, e, &pending);  // throws, naming the value
      }
      continue;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    bool pending = false;
    const TransportPut p = plan_transport_put(j.desc, t, v, e, &pending);
    if (pending) puts.push_back(p);
  }
  if (puts.empty()) return 0;
  // The data: one put per run of adjacent transport partitions, then every flag (a connection
  // lands a write_u64 after every put posted before it).
  for (size_t i = 0; i < puts.size();) {
    uint64_t off = puts[i].offset, bytes = puts[i].bytes;
    size_t k = i + 1;
    for (; k < puts.size() && puts[k].offset == off + bytes; ++k) bytes += puts[k].bytes;
    if (bytes > 0) j.connection->put(j.buf, off, j.local + off, bytes);
    i = k;
  }
  for (const TransportPut& p : puts) {
    j.connection->write_u64(j.flags, p.flag_word * sizeof(uint64_t), p.epoch);
    j.done[p.flag_word - kFlagFirst] = e;
  }
  j.connection->flush(timeout_s_);
  j.completed.fetch_add(puts.size(), std::memory_order_release);
  return puts.size();
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

void ProgressEngine::run() {
  uint32_t idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t moved = 0;
    if (!failed_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (progress_) {
        try {
          progress_();
        } catch (const Error& err) {
          record(err.code(), err.what());
        }
      }
      for (Job& j : jobs_) {
        try {
          j.connection->progress();
          moved += serve(j);
        } catch (const Error& err) {
          record(err.code(), err.what());
          break;
        } catch (const std::exception& err) {
          record(ErrorCode::Internal, err.what());
          break;
        }
      }
    }
    if (moved > 0) {
      idle = 0;
      continue;
    }
    // Spin (yielding) while work may come soon; sleep once idle for long.
    if (++idle > 65536) std::this_thread::sleep_for(std::chrono::microseconds(50));
    else std::this_thread::yield();
  }
}

}  // namespace weft::part
