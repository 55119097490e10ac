// The host half of the port channels' FIFO (include/weft/device/fifo.hpp has the layout
// and the protocol): the ring of triggers, the proxy's counter `tail` and its error flag in
// page-locked memory, the producers' counter `head`.
//
// Where the memory comes from is a FifoMemory: plain host memory (locked with mlock where
// the limits allow) for the CPU tests and host producers, or CUDA's mapped page-locked
// memory with `head` in device memory (cuda_fifo_memory, proxy/copy_engine.hpp) for GPU producers.
// Host code may produce triggers too (push), with the same protocol, when `head` is host memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "weft/device/fifo.hpp"

namespace weft::proxy {

/// Allocation of the FIFO's memory. Every block is returned zeroed.
struct FifoMemory {
  std::function<void*(size_t)> alloc_pinned;     ///< page-locked, host- and device-visible
  std::function<void(void*)> free_pinned;
  std::function<void*(void*)> device_pointer;    ///< the device's address of a pinned block
  std::function<void*(size_t)> alloc_head;       ///< where `head` lives (device memory for GPUs)
  std::function<void(void*)> free_head;
  bool head_on_host = true;                      ///< host push() allowed
};

/// Host memory only: for host producers and the CPU tests.
FifoMemory host_fifo_memory();

class Fifo {
 public:
  /// `depth` slots (1 to 65536). Throws InvalidArgument outside.
  explicit Fifo(uint64_t depth, FifoMemory memory = host_fifo_memory());
  ~Fifo();
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;

  uint64_t depth() const { return depth_; }
  /// What device code (or a host producer) gets.
  device::FifoDeviceHandle device_handle() const;

  // --- the proxy's side (one thread) ---
  /// True and the trigger when slot `tail % depth` holds one.
  bool poll(device::ProxyTrigger& out) const;
  /// Frees the slot just handled and publishes tail + 1.
  void pop();
  uint64_t tail() const;
  /// Sets the error flag every device wait on this FIFO checks.
  void set_error();
  bool error() const;

  // --- a host producer (head in host memory only) ---
  /// Appends `t`, waiting at most `timeout_s` for a free slot; returns its index. Throws
  /// Timeout ("FIFO full") or Remote (the proxy's error flag is set), naming `who`.
  uint64_t push(const device::ProxyTrigger& t, double timeout_s, const std::string& who = "proxy");
  /// Waits at most `timeout_s` until tail > index (flush by counter); throws like push.
  void wait_tail(uint64_t index, double timeout_s, const std::string& who = "proxy") const;

 private:
  uint64_t depth_;
  FifoMemory memory_;
  device::ProxyTrigger* triggers_ = nullptr;  // pinned
  uint64_t* tail_ = nullptr;                  // pinned (one cache line with the error flag)
  uint32_t* error_ = nullptr;
  uint64_t* head_ = nullptr;
  char* control_ = nullptr;                   // pinned block holding tail and error
};

}  // namespace weft::proxy
