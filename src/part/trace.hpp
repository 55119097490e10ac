// WEFT_PART_TRACE: host timestamps of one epoch of a partitioned request (CUDA-free, unit
// tested). WEFT_PART_TRACE=N (N >= 1) prints, for every request and collective, one line per
// epoch for epochs 2 to N + 1 (epoch 1 sets the pair up) on stderr:
//
//   weft part trace: rank 0: psend to rank 1 (tag 4): epoch 2: start 0.2 us, pbuf_prepare 1.3 us
//   (ready-to-receive after 1.1 us), caller 4.0 us, wait 6.8 us (412 polls), epoch 12.3 us,
//   since the last epoch's end 0.9 us; at 81234567.125 us; engine: ready seen +5.9 us, copies
//   submitted +6.1..+8.0 us (1 batches), landed +11.8 us, done stored +11.9 us
//
// start and pbuf_prepare are the calls' own times; "ready-to-receive after" is how long the
// sender's pbuf_prepare waited for the receiver; "caller" is the time between pbuf_prepare's
// return and wait's entry (the kernel launch, on a sender); wait counts its polls; "epoch" is
// from start's entry to wait's return; "since the last epoch's end" is the time from the
// previous epoch's wait return to this start (the caller's loop). "at" is start's entry on
// the steady clock (CLOCK_MONOTONIC on Linux: one clock for every process of the host, so the
// lines of two ranks line up). "engine" (a send on the progression-engine path) gives, from
// start's entry, the engine thread's first pass that found a transport partition of the epoch
// ready, its first copy submission's entry and its last one's return, when it saw every copy
// of the epoch landed and when it stored the done word ("-" for a step it has not recorded
// when wait returned: the copy engines' stream may store the done word first). Unset or 0:
// nothing is recorded (one branch per call).
//
// A program may take the records instead of the lines (set_epoch_trace_sink; part_bench trace
// does, to line both ranks' epochs up with the device's timestamps).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>

namespace weft::part {

/// The progression engine's steps in one epoch of one send request (a snapshot of
/// EngineStamps; a default time point: not recorded).
struct EngineEpochTrace {
  using Clock = std::chrono::steady_clock;
  Clock::time_point seen, post, posted, landed, done;
  uint32_t batches = 0;  ///< submissions (put_many + signal_and_mark, or staged copies) in the epoch
};

struct EpochTrace {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_in, start_out, prep_in, ready_seen, prep_out, wait_in, wait_out;
  uint64_t polls = 0;
  bool waited_ready = false;  ///< a sender's pbuf_prepare (ready_seen is set)
  bool has_engine = false;    ///< a send on the progression-engine path (engine is set)
  EngineEpochTrace engine;
};

/// What the engine thread records for one send request while tracing (written by the engine
/// thread, read by the request's thread after wait: atomics; nanoseconds of the steady clock,
/// 0: not yet). `reset` at each set_epoch; `mark_once` keeps the first time of a step.
struct EngineStamps {
  std::atomic<int64_t> seen{0}, post{0}, posted{0}, landed{0}, done{0};
  std::atomic<uint32_t> batches{0};
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(EngineEpochTrace::Clock::now().time_since_epoch()).count();
  }
  static void mark_once(std::atomic<int64_t>& a, int64_t ns) {
    if (a.load(std::memory_order_relaxed) == 0) a.store(ns, std::memory_order_relaxed);
  }
  void reset();
  EngineEpochTrace snapshot() const;
};

/// True when WEFT_PART_TRACE=n asks for epoch `epoch`'s line (epochs 2 to n + 1).
inline bool trace_wanted(int64_t n, uint64_t epoch) { return n > 0 && epoch >= 2 && epoch <= static_cast<uint64_t>(n) + 1; }

/// The line for epoch `epoch` of request `who`; `prev_end` is the previous epoch's wait return
/// (or start_in when there was none).
std::string format_epoch_trace(const std::string& who, uint64_t epoch, const EpochTrace& t,
                               EpochTrace::Clock::time_point prev_end);

/// One traced epoch as a record (trivially copyable: part_bench ships rank 1's to rank 0).
struct EpochTraceRecord {
  enum Kind : int32_t { kSend = 0, kRecv = 1, kCollective = 2 };
  int32_t kind = kSend;
  int32_t rank = 0;
  int32_t peer = -1;  ///< -1 for a collective
  int32_t tag = 0;
  uint64_t epoch = 0;
  EpochTrace t;
  EpochTrace::Clock::time_point prev_end;
};
static_assert(std::is_trivially_copyable_v<EpochTraceRecord>);

/// Where traced epochs go: null (the default) prints format_epoch_trace's line on stderr; a
/// sink receives the record instead (on the thread that called wait), for the same epochs.
using EpochTraceSink = void (*)(const EpochTraceRecord&);
void set_epoch_trace_sink(EpochTraceSink sink);
/// Hands `r` to the sink, or prints its line for `who`.
void emit_epoch_trace(const std::string& who, const EpochTraceRecord& r);

}  // namespace weft::part
