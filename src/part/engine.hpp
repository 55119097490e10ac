// The progression engine of partitioned sends (paper 002's progression-engine path;
// WEFT_PART_PATH=proxy): one host thread per context that polls, for every send request on
// this path, the per-transport-partition ready flags its device pready stores into
// host-mapped memory, and moves each ready transport partition to the receiver through a
// port-channel connection (proxy/connection.hpp): a put of its bytes, then the receiver's
// flag of that transport partition set to the epoch (write_u64, ordered after the put), so
// the receiver's parrived, test and wait work as on the kernel-copy path. Adjacent transport
// partitions ready in one pass go in one put; their flags follow it, then one flush. Within a host the
// connection is a CopyEngineConnection: the GPU's copy engines move the bytes, no thread
// block of the producing kernel copies.
//
// Why a flag and not a trigger in the port channel's FIFO: the FIFO's signal is a counter
// per channel, while the receiver needs one flag per transport partition holding the epoch
// (transport partitions complete in any order); a flag per transport partition is written
// once per epoch by the call that completes it, with no FIFO slot to claim, and the engine
// sees every ready one in one pass and flushes them together.
//
// Every number is checked before a transfer (part/progress.hpp); a failure (a check, the
// connection, a flush past WEFT_TIMEOUT) is recorded with the request and peer it concerns,
// the engine stops taking work, and every later test or wait of a request on it throws it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "part/progress.hpp"
#include "proxy/connection.hpp"
#include "util/error.hpp"

namespace weft::part {

class ProgressEngine {
 public:
  struct Job {
    ProgressJobDesc desc;
    std::shared_ptr<proxy::Connection> connection;
    const char* local = nullptr;          ///< the send buffer (device memory)
    proxy::RemoteMemory buf, flags;       ///< the receiver's buffer and flag block
    const volatile uint64_t* ready = nullptr;  ///< host view of the device's ready flags
    uint64_t epoch = 0;                   ///< the epoch the receiver is ready for; 0: paused
    std::vector<uint64_t> done;           ///< per transport partition: the epoch last sent
    std::atomic<uint64_t> completed{0};   ///< transport partitions delivered, all epochs
    std::vector<TransportPut> pass;       ///< the engine's scratch
  };

  /// `name`: "rank 0's partitioned progression engine". Host code only: the connections
  /// bind their GPU themselves (unit tested with HostConnection).
  ProgressEngine(double timeout_s, std::string name);
  ~ProgressEngine();  ///< stops the thread
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  /// Registers a send request (checked with check_progress_job); starts the thread.
  Job* add(const ProgressJobDesc& d, std::shared_ptr<proxy::Connection> connection, const char* local,
           proxy::RemoteMemory buf, proxy::RemoteMemory flags, const volatile uint64_t* ready);
  void remove(Job* job);
  /// The receiver is ready for `epoch`: the engine sends what the device marks ready in it,
  /// grouped by `threshold`. Epoch 0 pauses the job (when this returns, the engine is not
  /// sending for it).
  void set_epoch(Job* job, uint64_t epoch, uint32_t threshold);
  /// An epoch ended early (a device misuse): delivers, on the calling thread, every transport
  /// partition already marked ready in it, then pauses the job (set_epoch 0). Partitions
  /// readied after this are not sent.
  void finish_epoch(Job* job);
  /// Throws the recorded failure, if any.
  void check() const;
  /// Runs `f` while the engine thread is outside its pass (for transport calls that must
  /// not overlap the engine's, e.g. UCX registrations).
  template <class F>
  void exclusive(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }
  /// Called on every pass, jobs or not (a network transport's progress, which a receiver
  /// needs too); starts the thread.
  void set_progress(std::function<void()> progress);

 private:
  void run();
  void record(ErrorCode code, const std::string& what);
  /// One pass over one job; returns the transport partitions it delivered.
  uint64_t serve(Job& j);

  double timeout_s_;
  std::string name_;
  std::mutex mu_;
  std::list<Job> jobs_;
  std::function<void()> progress_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::thread thread_;
  mutable std::mutex error_mu_;
  std::optional<std::string> error_;
  ErrorCode error_code_ = ErrorCode::Success;
};

}  // namespace weft::part
