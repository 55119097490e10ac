// The progression engine of partitioned sends (paper 002's progression-engine path;
// WEFT_PART_PATH=proxy): one host thread per context that polls, for every send request on
// this path, the per-transport-partition ready flags its device pready stores into
// host-mapped memory, and moves the ready transport partitions to the receiver through a
// port-channel endpoint (proxy/endpoint.hpp). Within a host the endpoint is a
// CopyEngineEndpoint (the GPU's copy engines move the bytes, no thread block of the
// producing kernel copies); to another emulated node it is UCX's.
//
// Throughput. Every pass serves every request and never waits: a run of adjacent ready
// transport partitions (from a cursor below which every one is taken) becomes transfers of
// up to kEngineChunkBytes (part/progress.hpp), each one put of the bytes and ONE signal for
// the whole run: the receiver's flag words of the run written by one write_words from an
// array holding the epoch (ordered after the put), or, staged, one signal record. The runs a
// pass posts go as one batch (Endpoint::put_many, then signal_and_mark: the flag words and one
// mark shared by all; on the copy engines one cudaMemcpyBatchAsync and one cuStreamBatchMemOp
// whose last write is the ticket into a page-locked word, no event), and the pass that
// takes an epoch's last transport partition appends a stream write of the epoch into the
// request's done word (write_mapped_word), so the sender's and receiver's test/wait see the
// epoch delivered as soon as its copies land, not when this thread next queries. At most
// kEngineInflight transfers per request are in flight; the endpoint's mark/landed say,
// without waiting, when one has landed, and only then is it counted delivered. A transfer not
// landed within WEFT_TIMEOUT is an error.
//
// Staging (Job::staged; the network cannot read or write GPU memory: a UCX without CUDA
// support, or WEFT_PART_STAGE=1). Sender: a copy of the run from the send buffer into a
// page-locked mirror (`stage`, a CopyEngineEndpoint on the engine's own stream; landed by
// polling its event), then a UCX put from the mirror into the receiver's page-locked mirror,
// then the signal record ((first << 32 | count), threshold) into slot s of the receiver's
// ring (the epoch's s-th transfer; ordered after the data by the transport's fence). Receiver
// (RecvJob, the receiving rank's engine): reads its ring in slot order, checks each record
// (decode_arrival), clears the slot, then copies the run from its mirror into the receive
// buffer and the epoch into the run's flag words, in that order on its stream, so parrived
// and wait see a transport partition only after its bytes are in place.
//
// Why a flag and not a trigger in the port channel's FIFO: the FIFO's signal is a counter
// per channel, while the receiver needs one flag per transport partition holding the epoch
// (transport partitions complete in any order); the engine finds every ready one in a pass
// and signals a whole run at once.
//
// Every number is checked before a transfer (part/progress.hpp); a failure (a check, the
// endpoint, a transfer past WEFT_TIMEOUT) is recorded with the request and peer it
// concerns, the engine stops taking work, and every later test or wait of a request on it
// throws it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "part/progress.hpp"
#include "part/trace.hpp"
#include "proxy/endpoint.hpp"
#include "util/error.hpp"

namespace weft::part {

class ProgressEngine {
 public:
  using Clock = std::chrono::steady_clock;
  /// One transfer in flight.
  struct Op {
    TransportRun run;
    uint64_t ticket = 0;    ///< of the endpoint that holds it now
    bool staging = false;   ///< staged send: still in the copy into the page-locked mirror
    Clock::time_point since;
  };

  /// Staged transfers of one request (null `stage`: direct).
  struct Staging {
    std::shared_ptr<proxy::Endpoint> stage;  ///< local copies (a CopyEngineEndpoint of this GPU)
    char* mirror = nullptr;                    ///< page-locked, the request's size
  };

  struct Job {
    ProgressJobDesc desc;
    std::shared_ptr<proxy::Endpoint> endpoint;
    const char* local = nullptr;          ///< the send buffer (device memory)
    /// Direct: the receiver's buffer and flag block. Staged: its page-locked mirror and ring.
    proxy::RemoteMemory buf, flags;
    const volatile uint64_t* ready = nullptr;  ///< host view of the device's ready flags
    /// kRecordWords x partitions words, page-locked: direct, the epoch per transport partition
    /// (the flag values a run's write_words sends); staged, the signal records.
    uint64_t* words = nullptr;
    Staging staging;
    uint64_t epoch = 0;                   ///< the epoch the receiver is ready for; 0: paused
    std::vector<uint64_t> done;           ///< per transport partition: the epoch it was taken in
    uint32_t cursor = 0;                  ///< every transport partition below it is taken
    uint32_t signals = 0;                 ///< staged: ring slots used in this epoch
    std::deque<Op> inflight;
    RunHold hold;                         ///< short runs wait while more becomes ready
    std::vector<TransportRun> runs;       ///< a pass's runs (kept: no allocation per pass)
    std::vector<TransportRun> posting;    ///< the runs the pass posts (one batch)
    std::vector<proxy::Endpoint::Put> puts;
    std::vector<proxy::Endpoint::Words> signals_of_pass;
    std::atomic<uint64_t> completed{0};   ///< transport partitions delivered (landed), all epochs
    /// The request's done word (weft/part/common.hpp kWordDone; null: none): the engine stores
    /// the epoch there once `completed` reaches done_target (every transport partition of the
    /// epoch landed), so the hosts learn it without a CUDA call.
    uint64_t* done_word = nullptr;
    uint64_t done_target = 0;
    /// The done word's device address (0: none): the pass that takes the epoch's last transport
    /// partition has the endpoint's stream write the epoch there after every copy
    /// (write_mapped_word), once per epoch (done_posted).
    uint64_t done_device = 0;
    bool done_posted = false;
    /// WEFT_PART_TRACE (set by `trace`): the engine's steps in the current epoch, reset by
    /// set_epoch (part/trace.hpp). Off: one branch per step.
    bool trace = false;
    EngineStamps stamps;
  };

  /// A staged receive request: the network writes its page-locked mirror and ring; the engine
  /// moves each signalled run into the receive buffer and raises its flags.
  struct RecvJob {
    ProgressJobDesc desc;                 ///< who, partitions, partition_bytes
    Staging staging;                      ///< stage: this GPU's copies; mirror: what the network writes
    proxy::RemoteMemory buf, flags;       ///< the receive buffer and flag block (this rank's addresses)
    volatile uint64_t* ring = nullptr;    ///< kRecordWords x partitions words, written by the network
    uint64_t* words = nullptr;            ///< partitions words, page-locked: the epoch
    uint64_t epoch = 0;                   ///< 0: not ready
    uint32_t next = 0;                    ///< the ring slot read next
    uint64_t arrived = 0;                 ///< transport partitions signalled this epoch
    std::deque<Op> inflight;
    std::vector<TransportRun> posting;    ///< a pass's signalled runs (one batch)
    std::vector<proxy::Endpoint::Put> puts;
    std::vector<proxy::Endpoint::Words> signals_of_pass;
    uint32_t transports = 0;              ///< the epoch's transport partitions (from its records; 0: none yet)
    /// The receive request's own done word (null: none) and its device address (0: not mapped):
    /// the epoch once every transport partition of it is in the buffer with its flag, written by
    /// the stream after the last run's flags (done_posted) and by this thread once they land.
    uint64_t* done_word = nullptr;
    uint64_t done_device = 0;
    bool done_posted = false;
  };

  /// `name`: "rank 0's partitioned progression engine". Host code only: the endpoints
  /// bind their GPU themselves (unit tested with HostEndpoint).
  ProgressEngine(double timeout_s, std::string name);
  ~ProgressEngine();  ///< stops the thread
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  /// Registers a send request (checked with check_progress_job); starts the thread. `words`:
  /// kRecordWords x d.partitions words that live as long as the job. `staging`: for d.staged.
  /// `done_word`: the request's done word; `done_device`: its device address (0: not mapped).
  Job* add(const ProgressJobDesc& d, std::shared_ptr<proxy::Endpoint> endpoint, const char* local,
           proxy::RemoteMemory buf, proxy::RemoteMemory flags, const volatile uint64_t* ready, uint64_t* words,
           Staging staging, uint64_t* done_word = nullptr, uint64_t done_device = 0);
  /// Waits (bounded) for its transfers in flight, then forgets it.
  void remove(Job* job);
  /// The receiver is ready for `epoch`: the engine sends what the device marks ready in it,
  /// grouped by `threshold`, and stores `epoch` into the done word once all of it landed. Epoch 0 pauses the job (when this returns, the engine is not
  /// sending for it). Transfers of the previous epoch still in flight are waited for first.
  void set_epoch(Job* job, uint64_t epoch, uint32_t threshold);
  /// An epoch ended early (a device misuse): delivers, on the calling thread, every transport
  /// partition already marked ready in it, then pauses the job (set_epoch 0). Partitions
  /// readied after this are not sent.
  void finish_epoch(Job* job);
  /// WEFT_PART_TRACE: records `job`'s steps from its next epoch on.
  void trace(Job* job);
  /// The steps recorded in `job`'s current epoch so far (any thread; steps not yet taken are
  /// default time points).
  static EngineEpochTrace trace_of(const Job* job) { return job->stamps.snapshot(); }

  /// A staged receive request; `words`: d.partitions page-locked words; `ring` kRecordWords x
  /// d.partitions words, zeroed. Starts the thread.
  RecvJob* add_recv(const ProgressJobDesc& d, Staging staging, proxy::RemoteMemory buf, proxy::RemoteMemory flags,
                    volatile uint64_t* ring, uint64_t* words, uint64_t* done_word = nullptr,
                    uint64_t done_device = 0);
  void remove_recv(RecvJob* job);
  /// The receive request is ready for `epoch` (before it tells the sender so).
  void set_recv_epoch(RecvJob* job, uint64_t epoch);

  /// Throws the recorded failure, if any.
  void check() const;
  /// Runs `f` while the engine thread is outside its pass (for transport calls that must
  /// not overlap the engine's, e.g. UCX registrations).
  template <class F>
  void exclusive(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f();
  }
  /// `progress` is called on every pass, jobs or not (a network transport's progress, which
  /// a receiver needs too); it should not fail for a peer that has left. `check_peer` (may
  /// be empty) throws for a peer whose link has failed: it is called, on every pass, for the
  /// peer of each job that has work (an epoch or transfers in flight), and for no other, so a
  /// peer that leaves once its requests are done fails nothing. Starts the thread.
  void set_progress(std::function<void()> progress, std::function<void(int)> check_peer = {});

 private:
  void run();
  /// An epoch not yet delivered, or transfers in flight: the job's peer is needed.
  static bool has_work(const Job& j);
  static bool has_work(const RecvJob& j);
  /// Under mu_: true while the device, a transfer or the network may bring work (the thread
  /// polls), false when nothing can arrive until a job or an epoch is added (it parks).
  bool awaits_device() const;
  void start_thread();
  static constexpr uint32_t kIdlePasses = 1u << 16;
  void record(ErrorCode code, const std::string& what);
  /// One pass over one job (never waits); returns the transport partitions it moved on.
  /// `force`: post every ready run now (no hold: finish_epoch's drain).
  uint64_t serve(Job& j, bool force = false);
  uint64_t serve(RecvJob& j);
  /// Advances the transfers in flight; returns the transport partitions that landed.
  uint64_t retire(Job& j);
  uint64_t retire(RecvJob& j);
  /// Posts the runs of one pass (taken in the job's epoch) as one batch: put_many, then (direct)
  /// signal_and_mark: their flag words, the done word when they complete the epoch, one mark
  /// whose ticket every run's Op shares (staged: the mirror's put_many and one mark).
  void post(Job& j, const std::vector<TransportRun>& runs);
  void post(RecvJob& j);  ///< j.posting, the same way
  /// Staged: ops [first, first + n) of j.inflight, whose copies into the mirror have landed, to
  /// the network: their puts, their signal records (consecutive ring slots) as one write after
  /// one fence, one mark.
  void post_network(Job& j, size_t first, size_t n);
  /// Fails (Timeout) when the oldest transfer has been in flight longer than the timeout.
  void check_age(const std::deque<Op>& ops, const std::string& who, const std::string& peer) const;
  /// Serves `j` on the calling thread until nothing is in flight (and, `take`, nothing ready
  /// is left), at most the timeout.
  template <class J>
  void drain(J& j, bool take);
  /// drain, recording (not throwing) its failure.
  template <class J>
  void settle(J& j, bool take);

  double timeout_s_;
  std::string name_;
  std::mutex mu_;
  std::list<Job> jobs_;
  std::list<RecvJob> recv_jobs_;
  std::function<void()> progress_;
  std::function<void(int)> check_peer_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::condition_variable cv_;  ///< wakes a parked thread (with mu_)
  std::thread thread_;
  mutable std::mutex error_mu_;
  std::optional<std::string> error_;
  ErrorCode error_code_ = ErrorCode::Success;
};

}  // namespace weft::part
