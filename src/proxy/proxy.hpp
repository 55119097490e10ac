// The proxy: one host thread per GPU that drains its port channels' FIFO (proxy/fifo.hpp)
// and turns each trigger into transfers on the channel's Endpoint.
//
// Before start() the owner registers memories (this rank's, and peers' reached through a
// endpoint) and channels; the tables are fixed while the thread runs. For each trigger
// the proxy checks everything the GPU sent (channel id, operation bits, memory ids, the
// direction of each memory, offset + size against both memories) before any transfer: a
// trigger that fails is never executed. Then it puts, signals (the channel's count + 1
// written to the peer after the data) and flushes (waits, bounded, for every endpoint
// used since the last flush), and only then advances the FIFO's counter.
//
// Failure: a refused trigger, a transport error or a flush past its deadline is recorded
// (error()), the FIFO's error flag is set so that every device wait on it ends, and the
// proxy stops taking triggers. check() throws the recorded weft::Error.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "proxy/endpoint.hpp"
#include "proxy/fifo.hpp"
#include "proxy/trace.hpp"
#include "util/error.hpp"
#include "weft/device/port_channel.hpp"

namespace weft::proxy {

struct ProxyOptions {
  std::string name = "proxy";     ///< "proxy of GPU 0 (rank 2)", for errors and logs
  uint64_t fifo_depth = 512;
  double timeout_s = -1;          ///< flush deadline; negative: WEFT_TIMEOUT (0: none)
  FifoMemory memory = host_fifo_memory();
  /// Called once, from the proxy thread, with the first failure recorded (e.g. so that its
  /// owner stops kernels that wait on counters this proxy was to write); may be empty.
  std::function<void(const std::string&)> on_error = nullptr;
  /// PCI bus id of the proxy's GPU: the thread runs on the CPUs near it (WEFT_PROXY_CPUS).
  std::string pci_bus_id = "";
  /// Polling without pause after the last work, microseconds; negative: WEFT_PROXY_SPIN_US.
  int64_t spin_us = -1;
};

/// What make_port_channel needs besides the endpoint.
struct PortChannelSpec {
  std::shared_ptr<Endpoint> endpoint;
  uint32_t src_mem = 0;        ///< a local memory id
  uint32_t dst_mem = 0;        ///< a remote memory id of this endpoint
  uint32_t signal_mem = 0;     ///< the remote memory holding the peer's inbound counter for us
  uint64_t signal_offset = 0;  ///< its offset there (8-byte aligned)
  uint64_t* inbound = nullptr; ///< local counter the peer's proxy writes (device-visible)
  uint64_t* waited = nullptr;  ///< local counter of consumed signals (device-visible)
};

class Proxy {
 public:
  explicit Proxy(ProxyOptions options = {});
  ~Proxy();  ///< stops the thread
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  /// This rank's memory [ptr, ptr + bytes); bytes below 4 GiB. Returns its memory id.
  uint32_t add_local_memory(const void* ptr, uint64_t bytes);
  /// A peer's memory reached through `endpoint`. Returns its memory id.
  uint32_t add_remote_memory(std::shared_ptr<Endpoint> endpoint, const RemoteMemory& memory);
  /// A channel; returns its device handle (channel id in it).
  device::PortChannelDeviceHandle make_port_channel(const PortChannelSpec& spec);

  void start();
  /// Stops and joins the thread (triggers still queued stay unhandled).
  void stop();
  bool running() const { return thread_.joinable(); }

  Fifo& fifo() { return fifo_; }
  const std::string& name() const { return options_.name; }
  /// The recorded failure, if any.
  std::optional<std::string> error() const;
  /// Throws the recorded failure.
  void check() const;
  /// Signals held until their puts land (proxy thread's count; 0 when all have left).
  uint64_t held_signals() const { return held_total_.load(std::memory_order_acquire); }
  /// The trace recorder (null unless WEFT_NET_TRACE is set).
  Trace* trace() { return trace_.get(); }
  /// Traced runs: record a Watch event labelled `label` whenever *word changes (a counter a
  /// peer writes into this rank's memory). Nothing without a trace. Only while stopped.
  void watch(const uint64_t* word, uint32_t label);

  static constexpr uint32_t kBatch = 64;  ///< triggers taken per pass

 private:
  struct Memory {
    const void* local = nullptr;       ///< null for a remote one
    RemoteMemory remote;
    uint64_t bytes = 0;
    Endpoint* endpoint = nullptr;  ///< owner of a remote memory
  };
  struct Channel {
    std::shared_ptr<Endpoint> endpoint;
    uint32_t signal_mem = 0;
    uint64_t signal_offset = 0;
    uint64_t signalled = 0;
    size_t conn = 0;             ///< index in endpoints_
    bool puts_unsignalled = false;  ///< puts since its last signal, not known landed
    uint64_t held = 0;           ///< its signals held in the endpoint's queue
  };
  /// A signal waiting for its channel's puts to land.
  struct Held {
    uint32_t channel;
    uint64_t value;
    uint64_t ticket;
    bool marked;
    uint64_t since_ns;  ///< traced runs only
  };
  void require_stopped(const char* what) const;
  size_t endpoint_index(const std::shared_ptr<Endpoint>& c);
  void run();
  enum class Pass { Idle, Busy, Took };  ///< nothing to do; transfers in flight; triggers taken
  Pass pass();  ///< one pass of the loop
  void back_off(uint64_t idle_ns);
  void place_thread();
  void handle(const device::ProxyTrigger& t, uint64_t index);
  void signal(Channel& ch, uint32_t channel);
  bool release_held();  ///< marks, writes what landed; true while any signal is held
  void flush_all(uint64_t index);
  void record(ErrorCode code, const std::string& message);

  ProxyOptions options_;
  double timeout_s_;
  Fifo fifo_;
  std::vector<Memory> memories_;
  std::vector<Channel> channels_;
  std::vector<std::shared_ptr<Endpoint>> endpoints_;  // each once, for progress
  std::vector<std::deque<Held>> held_;                     // index: endpoints_
  std::atomic<uint64_t> held_total_{0};
  std::vector<Endpoint*> dirty_;                         // used since the last flush
  uint64_t spin_ns_ = 0;
  std::unique_ptr<Trace> trace_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex error_mutex_;
  std::optional<std::string> error_;
  ErrorCode error_code_ = ErrorCode::Success;
};

}  // namespace weft::proxy
