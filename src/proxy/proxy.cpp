#include "proxy/proxy.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "proxy/affinity.hpp"
#include "util/config.hpp"
#include "util/log.hpp"

namespace weft::proxy {

using device::ProxyTrigger;

void HostEndpoint::put(const RemoteMemory& dst, uint64_t dst_offset, const void* src, uint64_t bytes) {
  std::memcpy(reinterpret_cast<char*>(dst.address) + dst_offset, src, bytes);
}

void HostEndpoint::write_u64(const RemoteMemory& dst, uint64_t dst_offset, uint64_t value) {
  auto* p = reinterpret_cast<uint64_t*>(dst.address + dst_offset);
  std::atomic_ref<uint64_t>(*p).store(value, std::memory_order_release);
}

Proxy::Proxy(ProxyOptions options)
    : options_(std::move(options)),
      timeout_s_(config::wait_seconds(options_.timeout_s >= 0 ? options_.timeout_s : config::get_seconds("WEFT_TIMEOUT"))),
      fifo_(options_.fifo_depth, options_.memory),
      spin_ns_(static_cast<uint64_t>(options_.spin_us >= 0 ? options_.spin_us : config::get_int("WEFT_PROXY_SPIN_US")) *
               1000),
      trace_(Trace::from_environment(options_.name)) {}

Proxy::~Proxy() { stop(); }

void Proxy::require_stopped(const char* what) const {
  if (running()) fail(ErrorCode::InvalidUsage, options_.name + ": " + what + " while the proxy runs; stop() it first");
}

uint32_t Proxy::add_local_memory(const void* ptr, uint64_t bytes) {
  require_stopped("add_local_memory");
  if (ptr == nullptr || bytes == 0 || bytes > ProxyTrigger::kMaxField)
    fail(ErrorCode::InvalidArgument, options_.name + ": a port channel's memory must be 1 byte to 4 GiB - 1 (got " +
                                         std::to_string(bytes) + " bytes" + (ptr == nullptr ? " at null" : "") + ")");
  if (memories_.size() >= ProxyTrigger::kMaxMemIds)
    fail(ErrorCode::InvalidUsage, options_.name + ": more than " + std::to_string(ProxyTrigger::kMaxMemIds) + " memories");
  Memory m;
  m.local = ptr;
  m.bytes = bytes;
  memories_.push_back(m);
  return static_cast<uint32_t>(memories_.size() - 1);
}

uint32_t Proxy::add_remote_memory(std::shared_ptr<Endpoint> endpoint, const RemoteMemory& memory) {
  require_stopped("add_remote_memory");
  if (!endpoint) fail(ErrorCode::InvalidArgument, options_.name + ": add_remote_memory without an endpoint");
  if (memory.bytes == 0 || memory.bytes > ProxyTrigger::kMaxField || memory.address + memory.bytes < memory.address)
    fail(ErrorCode::InvalidArgument, options_.name + ": " + endpoint->peer() + "'s memory of " +
                                         std::to_string(memory.bytes) + " bytes is outside 1 byte to 4 GiB - 1");
  if (memories_.size() >= ProxyTrigger::kMaxMemIds)
    fail(ErrorCode::InvalidUsage, options_.name + ": more than " + std::to_string(ProxyTrigger::kMaxMemIds) + " memories");
  Memory m;
  m.remote = memory;
  m.bytes = memory.bytes;
  m.endpoint = endpoint.get();
  memories_.push_back(m);
  endpoint_index(endpoint);
  return static_cast<uint32_t>(memories_.size() - 1);
}

size_t Proxy::endpoint_index(const std::shared_ptr<Endpoint>& c) {
  auto it = std::find(endpoints_.begin(), endpoints_.end(), c);
  if (it != endpoints_.end()) return static_cast<size_t>(it - endpoints_.begin());
  endpoints_.push_back(c);
  held_.emplace_back();
  return endpoints_.size() - 1;
}

void Proxy::watch(const uint64_t* word, uint32_t label) {
  require_stopped("watch");
  if (trace_ && word != nullptr) trace_->watch(word, label);
}

device::PortChannelDeviceHandle Proxy::make_port_channel(const PortChannelSpec& s) {
  require_stopped("make_port_channel");
  if (!s.endpoint) fail(ErrorCode::InvalidArgument, options_.name + ": make_port_channel without an endpoint");
  auto owned_by = [&](uint32_t id, Endpoint* c) {
    return id < memories_.size() && memories_[id].local == nullptr && memories_[id].endpoint == c;
  };
  const std::string peer = s.endpoint->peer();
  if (s.src_mem >= memories_.size() || memories_[s.src_mem].local == nullptr)
    fail(ErrorCode::InvalidArgument, options_.name + ": channel to " + peer + ": source memory " + std::to_string(s.src_mem) + " is not a local one");
  if (!owned_by(s.dst_mem, s.endpoint.get()) || !owned_by(s.signal_mem, s.endpoint.get()))
    fail(ErrorCode::InvalidArgument, options_.name + ": channel to " + peer + ": destination or signal memory is not " + peer + "'s");
  if (s.signal_offset % 8 != 0 || s.signal_offset + 8 > memories_[s.signal_mem].bytes)
    fail(ErrorCode::InvalidArgument, options_.name + ": channel to " + peer + ": signal offset " + std::to_string(s.signal_offset) +
                                         " is not an aligned counter inside memory " + std::to_string(s.signal_mem));
  if (s.inbound == nullptr || s.waited == nullptr)
    fail(ErrorCode::InvalidArgument, options_.name + ": channel to " + peer + " without its inbound and waited counters");
  if (channels_.size() >= ProxyTrigger::kMaxChannels)
    fail(ErrorCode::InvalidUsage, options_.name + ": more than " + std::to_string(ProxyTrigger::kMaxChannels) + " channels");
  Channel ch;
  ch.endpoint = s.endpoint;
  ch.signal_mem = s.signal_mem;
  ch.signal_offset = s.signal_offset;
  ch.conn = endpoint_index(s.endpoint);
  channels_.push_back(ch);
  device::PortChannelDeviceHandle h;
  h.fifo = fifo_.device_handle();
  h.channel = static_cast<uint32_t>(channels_.size() - 1);
  h.dst_mem = s.dst_mem;
  h.src_mem = s.src_mem;
  h.inbound = s.inbound;
  h.waited = s.waited;
  return h;
}

void Proxy::start() {
  if (running()) return;
  check();
  stop_.store(false);
  for (auto& c : endpoints_) c->attach_trace(trace_.get());
  thread_ = std::thread([this] {
    place_thread();
    run();
  });
}

void Proxy::stop() {
  if (!running()) return;
  stop_.store(true);
  thread_.join();
}

std::optional<std::string> Proxy::error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return error_;
}

void Proxy::check() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  if (error_) fail(error_code_, *error_);
}

void Proxy::record(ErrorCode code, const std::string& message) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) {
      error_ = message;
      error_code_ = code;
      first = true;
    }
  }
  fifo_.set_error();
  WEFT_LOG(Error, "PROXY", message);
  if (first && options_.on_error) options_.on_error(message);
}

void Proxy::place_thread() {
  std::string why;
  try {
    const std::vector<int> cpus = proxy_cpus(options_.pci_bus_id, &why);
    if (!cpus.empty() && !pin_this_thread(cpus)) why += " refused by the system: not pinned";
  } catch (const Error& e) {  // a malformed WEFT_PROXY_CPUS: say so, run unpinned
    why = std::string("not pinned: ") + e.what();
  }
  WEFT_LOG(Info, "PROXY", options_.name << ": thread " << why);
}

namespace {
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
}  // namespace

void Proxy::back_off(uint64_t idle_ns) {
  // Within the spin window: poll again at once, giving the core away only to a thread that
  // waits for it (sched_yield returns at once on a core of its own). After it: sleep.
  if (idle_ns < 2'000) {
    cpu_relax();
  } else if (idle_ns < spin_ns_) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Proxy::Pass Proxy::pass() {
  bool busy = false;
  for (auto& c : endpoints_) {
    c->progress();
    busy |= !c->idle();
  }
  if (trace_) trace_->poll_watches();
  ProxyTrigger t;
  bool took = false;
  for (uint32_t n = 0; n < kBatch && fifo_.poll(t); ++n) {
    const uint64_t index = fifo_.tail();
    if (trace_) trace_->add(TraceEvent::Take, t.channel(), t.op(), t.size());
    handle(t, index);
    fifo_.pop();
    took = true;
  }
  if (held_total_.load(std::memory_order_relaxed) > 0) busy |= release_held();
  return took ? Pass::Took : busy ? Pass::Busy : Pass::Idle;
}

void Proxy::run() {
  uint64_t last_work = Trace::now_ns();
  while (!stop_.load(std::memory_order_relaxed)) {
    if (fifo_.error()) {  // failed: keep the transports progressing for the peers, take nothing
      for (auto& c : endpoints_) {
        try {
          c->progress();
        } catch (const std::exception&) {  // already failed; the first error is the one kept
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    Pass p = Pass::Idle;
    try {
      p = pass();
    } catch (const Error& e) {
      record(e.code(), options_.name + ": " + e.what());
      continue;
    } catch (const std::exception& e) {
      record(ErrorCode::Internal, options_.name + ": " + e.what());
      continue;
    }
    const uint64_t now = Trace::now_ns();
    if (p != Pass::Idle) {
      last_work = now;
      // Transfers in flight but no new trigger: poll on, letting a thread that waits for this
      // core run first (sched_yield returns at once on a core of its own).
      if (p == Pass::Busy) std::this_thread::yield();
      continue;
    }
    back_off(now - last_work);
  }
}

void Proxy::handle(const ProxyTrigger& t, uint64_t index) {
  auto refuse = [&](const std::string& why) {
    fail(ErrorCode::InvalidArgument, "trigger " + std::to_string(index) + " refused: " + why);
  };
  const uint32_t op = t.op();
  if (op == 0) refuse("no operation bits");
  if (t.channel() >= channels_.size())
    refuse("channel " + std::to_string(t.channel()) + " does not exist (" + std::to_string(channels_.size()) + " channels)");
  Channel& ch = channels_[t.channel()];
  Endpoint* conn = ch.endpoint.get();
  // Built only for a refusal: this runs for every trigger.
  auto where = [&] { return "channel " + std::to_string(t.channel()) + " to " + conn->peer(); };
  if (op & device::kTriggerPut) {
    const uint64_t size = t.size(), src_off = t.src_offset(), dst_off = t.dst_offset();
    if (t.src_mem() >= memories_.size() || memories_[t.src_mem()].local == nullptr)
      refuse(where() + ": source memory " + std::to_string(t.src_mem()) + " is not a local memory");
    if (t.dst_mem() >= memories_.size() || memories_[t.dst_mem()].endpoint != conn)
      refuse(where() + ": destination memory " + std::to_string(t.dst_mem()) + " is not " + conn->peer() + "'s");
    const Memory& src = memories_[t.src_mem()];
    const Memory& dst = memories_[t.dst_mem()];
    if (src_off + size > src.bytes)
      refuse(where() + ": source offset " + std::to_string(src_off) + " + " + std::to_string(size) + " bytes exceeds memory " +
             std::to_string(t.src_mem()) + " (" + std::to_string(src.bytes) + " bytes)");
    if (dst_off + size > dst.bytes)
      refuse(where() + ": destination offset " + std::to_string(dst_off) + " + " + std::to_string(size) + " bytes exceeds memory " +
             std::to_string(t.dst_mem()) + " (" + std::to_string(dst.bytes) + " bytes)");
    if (size > 0) {
      conn->put(dst.remote, dst_off, static_cast<const char*>(src.local) + src_off, size);
      if (trace_) trace_->add(TraceEvent::Put, t.channel(), size, dst_off);
      ch.puts_unsignalled = true;
      if (std::find(dirty_.begin(), dirty_.end(), conn) == dirty_.end()) dirty_.push_back(conn);
    }
  }
  if (op & device::kTriggerSignal) signal(ch, t.channel());
  if (op & device::kTriggerFlush) flush_all(index);
}

void Proxy::signal(Channel& ch, uint32_t channel) {
  Endpoint* conn = ch.endpoint.get();
  const uint64_t value = ++ch.signalled;
  if (std::find(dirty_.begin(), dirty_.end(), conn) == dirty_.end()) dirty_.push_back(conn);
  if (!conn->signals_after_landing()) {
    conn->write_u64(memories_[ch.signal_mem].remote, ch.signal_offset, value);
    if (trace_) trace_->add(TraceEvent::SignalNow, channel, value);
    return;
  }
  if (!ch.puts_unsignalled && ch.held == 0) {  // nothing of this channel to wait for
    conn->write_u64_landed(memories_[ch.signal_mem].remote, ch.signal_offset, value);
    if (trace_) trace_->add(TraceEvent::SignalNow, channel, value);
    return;
  }
  held_[ch.conn].push_back(Held{channel, value, 0, false, trace_ ? Trace::now_ns() : 0});
  ch.puts_unsignalled = false;  // the held signal covers them
  ++ch.held;
  held_total_.fetch_add(1, std::memory_order_release);
  if (trace_) trace_->add(TraceEvent::SignalDeferred, channel, value);
}

bool Proxy::release_held() {
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    std::deque<Held>& q = held_[i];
    if (q.empty()) continue;
    Endpoint* conn = endpoints_[i].get();
    if (!q.back().marked) {  // one mark per pass covers every signal held since the last one
      const uint64_t ticket = conn->mark(timeout_s_);
      if (trace_) trace_->add(TraceEvent::Mark, static_cast<uint32_t>(i), ticket);
      for (auto it = q.rbegin(); it != q.rend() && !it->marked; ++it) {
        it->ticket = ticket;
        it->marked = true;
      }
    }
    // The newest landed value of each channel leaves; older ones of the same pass are implied.
    std::vector<std::pair<uint32_t, uint64_t>> out;
    uint64_t seen = 0;
    bool have = false;
    while (!q.empty()) {
      const Held& h = q.front();
      if (!have || h.ticket != seen) {
        if (!conn->landed(h.ticket)) break;
        seen = h.ticket;
        have = true;
        if (trace_) trace_->add(TraceEvent::Landed, static_cast<uint32_t>(i), h.ticket);
      }
      auto o = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == h.channel; });
      if (o == out.end()) out.emplace_back(h.channel, h.value);
      else o->second = h.value;
      if (trace_) trace_->add(TraceEvent::SignalWritten, h.channel, h.value, Trace::now_ns() - h.since_ns);
      --channels_[h.channel].held;
      q.pop_front();
      held_total_.fetch_sub(1, std::memory_order_release);
    }
    for (const auto& [c, v] : out) {
      const Channel& ch = channels_[c];
      conn->write_u64_landed(memories_[ch.signal_mem].remote, ch.signal_offset, v);
    }
  }
  return held_total_.load(std::memory_order_relaxed) > 0;
}

void Proxy::flush_all(uint64_t index) {
  if (trace_) trace_->add(TraceEvent::FlushBegin, 0, index);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while (held_total_.load(std::memory_order_relaxed) > 0) {
    for (auto& c : endpoints_) c->progress();
    if (!release_held()) break;
    if (std::chrono::steady_clock::now() > end) {
      std::string peers;
      for (size_t i = 0; i < endpoints_.size(); ++i)
        if (!held_[i].empty()) peers += (peers.empty() ? "" : ", ") + endpoints_[i]->peer();
      fail(ErrorCode::Timeout, "flush (trigger " + std::to_string(index) + "): " + std::to_string(held_total_.load()) +
                                   " signals to " + peers + " still wait for their puts to land after " +
                                   std::to_string(timeout_s_) + " s: " + peers + " is stalled or unreachable");
    }
  }
  for (Endpoint* c : dirty_) c->flush(timeout_s_);
  dirty_.clear();
  if (trace_) trace_->add(TraceEvent::FlushEnd, 0, index);
}

}  // namespace weft::proxy
