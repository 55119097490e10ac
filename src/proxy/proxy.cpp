#include "proxy/proxy.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

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
      fifo_(options_.fifo_depth, options_.memory) {}

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
  if (std::find(endpoints_.begin(), endpoints_.end(), endpoint) == endpoints_.end()) endpoints_.push_back(endpoint);
  return static_cast<uint32_t>(memories_.size() - 1);
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
  channels_.push_back(Channel{s.endpoint, s.signal_mem, s.signal_offset, 0});
  if (std::find(endpoints_.begin(), endpoints_.end(), s.endpoint) == endpoints_.end()) endpoints_.push_back(s.endpoint);
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
  thread_ = std::thread([this] { run(); });
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

void Proxy::run() {
  uint32_t idle = 0;
  ProxyTrigger t;
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
    try {
      for (auto& c : endpoints_) c->progress();
      if (fifo_.poll(t)) {
        idle = 0;
        handle(t, fifo_.tail());
        fifo_.pop();
        continue;
      }
    } catch (const Error& e) {
      record(e.code(), options_.name + ": " + e.what());
      continue;
    } catch (const std::exception& e) {
      record(ErrorCode::Internal, options_.name + ": " + e.what());
      continue;
    }
    if (++idle > 256) std::this_thread::sleep_for(std::chrono::microseconds(idle > 4096 ? 50 : 2));
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
  const std::string where = "channel " + std::to_string(t.channel()) + " to " + conn->peer();
  if (op & device::kTriggerPut) {
    const uint64_t size = t.size(), src_off = t.src_offset(), dst_off = t.dst_offset();
    if (t.src_mem() >= memories_.size() || memories_[t.src_mem()].local == nullptr)
      refuse(where + ": source memory " + std::to_string(t.src_mem()) + " is not a local memory");
    if (t.dst_mem() >= memories_.size() || memories_[t.dst_mem()].endpoint != conn)
      refuse(where + ": destination memory " + std::to_string(t.dst_mem()) + " is not " + conn->peer() + "'s");
    const Memory& src = memories_[t.src_mem()];
    const Memory& dst = memories_[t.dst_mem()];
    if (src_off + size > src.bytes)
      refuse(where + ": source offset " + std::to_string(src_off) + " + " + std::to_string(size) + " bytes exceeds memory " +
             std::to_string(t.src_mem()) + " (" + std::to_string(src.bytes) + " bytes)");
    if (dst_off + size > dst.bytes)
      refuse(where + ": destination offset " + std::to_string(dst_off) + " + " + std::to_string(size) + " bytes exceeds memory " +
             std::to_string(t.dst_mem()) + " (" + std::to_string(dst.bytes) + " bytes)");
    if (size > 0) {
      conn->put(dst.remote, dst_off, static_cast<const char*>(src.local) + src_off, size);
      if (std::find(dirty_.begin(), dirty_.end(), conn) == dirty_.end()) dirty_.push_back(conn);
    }
  }
  if (op & device::kTriggerSignal) {
    conn->write_u64(memories_[ch.signal_mem].remote, ch.signal_offset, ++ch.signalled);
    if (std::find(dirty_.begin(), dirty_.end(), conn) == dirty_.end()) dirty_.push_back(conn);
  }
  if (op & device::kTriggerFlush) {
    for (Endpoint* c : dirty_) c->flush(timeout_s_);
    dirty_.clear();
  }
}

}  // namespace weft::proxy
