// WEFT_PART_TRACE: host timestamps of one epoch of a partitioned request (CUDA-free, unit
// tested). WEFT_PART_TRACE=N (N >= 1) prints, for every request and collective, one line per
// epoch for epochs 2 to N + 1 (epoch 1 sets the pair up) on stderr:
//
//   weft part trace: rank 0: psend to rank 1 (tag 4): epoch 2: start 0.2 us, pbuf_prepare 1.3 us
//   (ready-to-receive after 1.1 us), caller 4.0 us, wait 6.8 us (412 polls), epoch 12.3 us,
//   since the last epoch's end 0.9 us
//
// start and pbuf_prepare are the calls' own times; "ready-to-receive after" is how long the
// sender's pbuf_prepare waited for the receiver; "caller" is the time between pbuf_prepare's
// return and wait's entry (the kernel launch, on a sender); wait counts its polls; "epoch" is
// from start's entry to wait's return; the last figure is the time from the previous epoch's
// wait return to this start (the caller's loop). Unset or 0: nothing is recorded (one branch).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace weft::part {

struct EpochTrace {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_in, start_out, prep_in, ready_seen, prep_out, wait_in, wait_out;
  uint64_t polls = 0;
  bool waited_ready = false;  ///< a sender's pbuf_prepare (ready_seen is set)
};

/// True when WEFT_PART_TRACE=n asks for epoch `epoch`'s line (epochs 2 to n + 1).
inline bool trace_wanted(int64_t n, uint64_t epoch) { return n > 0 && epoch >= 2 && epoch <= static_cast<uint64_t>(n) + 1; }

/// The line for epoch `epoch` of request `who`; `prev_end` is the previous epoch's wait return
/// (or start_in when there was none).
std::string format_epoch_trace(const std::string& who, uint64_t epoch, const EpochTrace& t,
                               EpochTrace::Clock::time_point prev_end);

}  // namespace weft::part
