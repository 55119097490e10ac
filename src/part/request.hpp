// Partitioned point-to-point requests over a ContextImpl (internal; weft/partitioned.hpp
// is the API). The kernel-copy path: the sender maps the receiver's buffer and flag block,
// and the device pready (weft/part/device.hpp) copies and signals through that mapping.
// The progression-engine path (the context's path is Proxy): the device pready stores the
// epoch into a ready flag per transport partition in host-mapped memory, and the context's
// ProgressEngine (part/engine.hpp) puts the bytes and signals the receiver; the send
// completes once the engine has delivered every transport partition of the epoch.
#pragma once

#include <memory>
#include <vector>

#include "part/context.hpp"
#include "part/engine.hpp"
#include "part/state.hpp"
#include "part/trace.hpp"

namespace weft::part {

class DeviceRequestImpl;

class RequestImpl : public Request {
 public:
  RequestImpl(ContextImpl& ctx, const RequestDesc& d, void* buf);
  ~RequestImpl() override;

  void start() override;
  void pbuf_prepare() override;
  void pready(uint32_t p) override;
  bool parrived(uint32_t p) override;
  bool test() override;
  void wait() override;
  std::unique_ptr<DeviceRequest> device_request_create(uint32_t threshold) override;
  PrecvDeviceHandle recv_handle() override;

  /// pbuf_prepare in phases (Context::pbuf_prepare_all): offer (sends), answer (receives),
  /// finish setup (sends), ready-to-receive (receives), wait for it (sends).
  enum class Phase { Offer, Answer, Finish, Ready, AwaitReady };
  void prepare_phase(Phase ph);
  bool is_send() const { return st_.desc().dir == Direction::Send; }
  void check_free() const { st_.check_free(); }
  /// A collective's internal request: its epoch completes with the collective's.
  void mark_complete() { st_.complete(); }
  /// Marks a collective's internal request: no kernel reads its epoch words (the collective
  /// has its own), so start() skips writing them to the device.
  /// Collectives move their data with their own handle: the kernel-copy path always.
  void set_internal() {
    internal_ = true;
    proxy_ = false;
  }

  // For DeviceRequestImpl.
  PsendDeviceHandle send_handle(uint32_t threshold) const;
  void attach(DeviceRequestImpl* d) { dreq_ = d; }
  void detach() { dreq_ = nullptr; }
  /// Completed epochs (the device counters' base).
  uint64_t completed_epochs() const { return st_.active() ? st_.epoch() - 1 : st_.epoch(); }
  ContextImpl& ctx() { return ctx_; }
  uint64_t* ctl() const { return ctl_; }
  const RequestState& state() const { return st_; }
  /// Throws the device's error record, if any (and clears it).
  void check_device_error();
  /// Receive side: the flag block; send side: the mapped receive buffer (after setup).
  uint64_t* flags() const { return flags_; }
  char* remote_buf() const { return remote_buf_; }
  uint64_t* remote_flags() const { return remote_flags_; }

 private:
  uint32_t threshold() const;
  /// pbuf_prepare's steps: the receiver matches the first offer and answers it; the sender
  /// maps the reply; the sender waits for ready-to-receive, then publishes the prepared epoch.
  void answer_offer();
  void finish_setup();
  void await_ready();
  /// WEFT_PART_TRACE: closes this epoch's trace (after wait) and prints it when asked for.
  void finish_trace(uint64_t polls);
  /// Progression-engine path: transport partitions the engine delivered (all epochs).
  uint64_t delivered();
  /// Progression-engine path: registers this request with the context's engine (setup):
  /// copy engines within a node, the network transport to another (emulated) node.
  void attach_engine(const MailMessage& reply);
  /// Receive side, peer on another node: registers with the network transport the buffer and
  /// flag block, or, `*staged` (on entry: asked for; on return: chosen, also where UCX refuses
  /// the GPU memory), a page-locked mirror and signal ring served by the engine (into `reply`);
  /// leaves the keys in a slot of this rank's shared segment and returns the slot.
  uint32_t publish_keys(bool* staged, MailMessage* reply);
  uint32_t transports() const { return transport_partitions(st_.desc().partitions, threshold()); }

  ContextImpl& ctx_;
  RequestState st_;
  char* buf_ = nullptr;
  // Send side.
  uint64_t* ctl_ = nullptr;              ///< kCtlWords, device
  DeviceErrorRecord* err_host_ = nullptr;
  DeviceErrorRecord* err_dev_ = nullptr;
  char* remote_buf_ = nullptr;
  uint64_t* remote_flags_ = nullptr;
  uint32_t offer_ = 0;
  uint32_t threshold_written_ = 0;
  uint64_t expected_sent_ = 0, host_sent_ = 0;  ///< proxy path: the engine's count to reach
  bool internal_ = false;                ///< a collective's (set_internal)
  bool errored_ = false;                 ///< an epoch ended in a device error: resync counters
  DeviceRequestImpl* dreq_ = nullptr;
  bool proxy_ = false;                   ///< progression-engine path
  uint64_t* ready_host_ = nullptr;       ///< proxy: per transport partition, mapped page-locked
  uint64_t* ready_dev_ = nullptr;        ///< its device address
  ProgressEngine::Job* job_ = nullptr;   ///< proxy: this request in the context's engine
  uint64_t* words_ = nullptr;            ///< proxy: the engine's signal words (page-locked)
  char* mirror_ = nullptr;               ///< proxy, staged: page-locked mirror of the send buffer
  ProgressEngine::RecvJob* recv_job_ = nullptr;  ///< receive, staged across nodes: in the engine
  // Receive side.
  uint64_t* flags_ = nullptr;            ///< kFlagFirst + partitions words, device
  uint64_t* peer_words_ = nullptr;       ///< the sender's host words (its ready and done words)
  std::vector<uint64_t> flag_block_;     ///< across nodes: test's copy of the flag block
  uint64_t seen_threshold_ = 0;          ///< across nodes: the threshold test last saw in it
  /// Staged receive: when test last copied the flag block (it reads the done word its engine
  /// stores every time, the flag block at most every kStagedFlagReadUs: a sender's host pready
  /// writes the flags and no done word).
  std::chrono::steady_clock::time_point flags_read_{};
  static constexpr int64_t kStagedFlagReadUs = 20;
  // Both sides: this request's host words (kWord*) in this rank's shared segment.
  uint32_t host_index_ = 0;
  uint64_t* host_ = nullptr;
  // WEFT_PART_TRACE.
  bool tracing_ = false;
  EpochTrace trace_;
  EpochTrace::Clock::time_point prev_end_{};
  uint64_t trace_epoch_ = 0;             ///< the last epoch whose trace closed
};

class DeviceRequestImpl : public DeviceRequest {
 public:
  DeviceRequestImpl(RequestImpl& req, uint32_t threshold);
  ~DeviceRequestImpl() override;
  PsendDeviceHandle handle() const override;
  const PsendDeviceHandle* device_pointer() const override { return dev_handle_; }
  uint32_t threshold() const { return threshold_; }
  unsigned long long* counters() const { return counters_; }
  uint64_t* stamps() const { return stamps_; }
  /// Writes the handle to device memory again (after setup) and sets the counters to their
  /// value at the start of the next epoch.
  void refresh();
  void resync_counters(uint64_t completed_epochs);

 private:
  RequestImpl& req_;
  uint32_t threshold_ = 1;
  unsigned long long* counters_ = nullptr;
  uint64_t* stamps_ = nullptr;
  PsendDeviceHandle* dev_handle_ = nullptr;
};

}  // namespace weft::part
