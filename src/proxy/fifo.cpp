#include "proxy/fifo.hpp"

#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "util/error.hpp"

namespace weft::proxy {

using device::ProxyTrigger;

namespace {

void* host_alloc(size_t bytes) {
  size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) fail(ErrorCode::System, "port-channel FIFO: cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  (void)mlock(p, rounded);  // best effort: RLIMIT_MEMLOCK may forbid it; host producers do not need it
  return p;
}

/// Backs off from a busy wait: spins a little, then yields, then sleeps.
void back_off(uint32_t& spins) {
  ++spins;
  if (spins < 64) return;
  if (spins < 1024) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

FifoMemory host_fifo_memory() {
  FifoMemory m;
  m.alloc_pinned = host_alloc;
  m.free_pinned = [](void* p) { std::free(p); };
  m.device_pointer = [](void* p) { return p; };
  m.alloc_head = host_alloc;
  m.free_head = [](void* p) { std::free(p); };
  m.head_on_host = true;
  return m;
}

Fifo::Fifo(uint64_t depth, FifoMemory memory) : depth_(depth), memory_(std::move(memory)) {
  if (depth < 1 || depth > 65536)
    fail(ErrorCode::InvalidArgument, "port-channel FIFO depth " + std::to_string(depth) + " is outside 1..65536");
  triggers_ = static_cast<ProxyTrigger*>(memory_.alloc_pinned(depth * sizeof(ProxyTrigger)));
  control_ = static_cast<char*>(memory_.alloc_pinned(128));
  tail_ = reinterpret_cast<uint64_t*>(control_);
  error_ = reinterpret_cast<uint32_t*>(control_ + 64);
  head_ = static_cast<uint64_t*>(memory_.alloc_head(sizeof(uint64_t)));
}

Fifo::~Fifo() {
  if (head_ != nullptr) memory_.free_head(head_);
  if (control_ != nullptr) memory_.free_pinned(control_);
  if (triggers_ != nullptr) memory_.free_pinned(triggers_);
}

device::FifoDeviceHandle Fifo::device_handle() const {
  device::FifoDeviceHandle h;
  h.triggers = static_cast<ProxyTrigger*>(memory_.device_pointer(triggers_));
  h.head = head_;
  h.tail = static_cast<const uint64_t*>(memory_.device_pointer(tail_));
  h.error = static_cast<const volatile uint32_t*>(memory_.device_pointer(error_));
  h.depth = depth_;
  return h;
}

bool Fifo::poll(ProxyTrigger& out) const {
  ProxyTrigger& slot = triggers_[*tail_ % depth_];
  uint64_t snd = std::atomic_ref<uint64_t>(slot.snd).load(std::memory_order_acquire);
  if ((snd & ProxyTrigger::kValidBit) == 0) return false;
  out.snd = snd;
  out.fst = std::atomic_ref<uint64_t>(slot.fst).load(std::memory_order_relaxed);
  return true;
}

void Fifo::pop() {
  uint64_t t = *tail_;
  ProxyTrigger& slot = triggers_[t % depth_];
  std::atomic_ref<uint64_t>(slot.fst).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(slot.snd).store(0, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(*tail_).store(t + 1, std::memory_order_release);
}

uint64_t Fifo::tail() const { return std::atomic_ref<uint64_t>(*tail_).load(std::memory_order_acquire); }

void Fifo::set_error() { std::atomic_ref<uint32_t>(*error_).store(1, std::memory_order_release); }

bool Fifo::error() const { return std::atomic_ref<uint32_t>(*error_).load(std::memory_order_acquire) != 0; }

uint64_t Fifo::push(const ProxyTrigger& t, double timeout_s, const std::string& who) {
  if (!memory_.head_on_host) fail(ErrorCode::InvalidUsage, "port-channel FIFO: its head is device memory; only GPU code may push");
  uint64_t index = std::atomic_ref<uint64_t>(*head_).fetch_add(1, std::memory_order_acq_rel);
  if (index >= depth_) {
    try {
      wait_tail(index - depth_, timeout_s, who);
    } catch (const Error& e) {
      fail(e.code(), std::string(e.what()) + " (FIFO of " + std::to_string(depth_) + " slots full)");
    }
  }
  ProxyTrigger& slot = triggers_[index % depth_];
  std::atomic_ref<uint64_t>(slot.fst).store(t.fst, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(slot.snd).store(t.snd | ProxyTrigger::kValidBit, std::memory_order_release);
  return index;
}

void Fifo::wait_tail(uint64_t index, double timeout_s, const std::string& who) const {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  uint32_t spins = 0;
  while (tail() <= index) {
    if (error()) fail(ErrorCode::Remote, who + " has failed (its error flag is set); trigger " + std::to_string(index) + " will not complete");
    if (std::chrono::steady_clock::now() > end)
      fail(ErrorCode::Timeout, who + " did not reach trigger " + std::to_string(index) + " within " +
                                   std::to_string(timeout_s) + " s (it has handled " + std::to_string(tail()) + ")");
    back_off(spins);
  }
}

}  // namespace weft::proxy
