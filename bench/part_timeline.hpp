// part_bench trace's timeline of an epoch (host code, no CUDA; unit tested in
// tests/unit/part/test_part_timeline.cpp): the sender's and the receiver's WEFT_PART_TRACE
// records (part/trace.hpp), the bench's own stamps around the kernel launch and the device's
// first block start and last block end (%globaltimer, moved onto the host's steady clock by
// the offset clock_offset finds), all as times from the sender's start of the same epoch,
// with their mean, least and largest over the epochs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "part/trace.hpp"

namespace partbench {

/// One round trip of the clock calibration: the host's steady clock before it raised the
/// flag and after it saw the device's answer, and the device's %globaltimer in between (ns).
struct ClockSample {
  int64_t host_before = 0, host_after = 0;
  uint64_t device = 0;
};
/// device - host offset (ns) from the sample with the shortest round trip (its device time
/// taken as the midpoint of its host times); `*uncertainty_ns` half that round trip. False
/// when there is no sample.
bool clock_offset(const std::vector<ClockSample>& samples, int64_t* offset_ns, int64_t* uncertainty_ns);

/// What the bench itself knows of epoch `epoch` (steady-clock ns; 0: not recorded).
struct BenchEpoch {
  uint64_t epoch = 0;
  int64_t launch_in = 0, launch_out = 0;      ///< around the kernel launch (sender)
  int64_t kernel_first = 0, kernel_last = 0;  ///< first block's start, last block's end (host clock)
};

struct TimelineRow {
  std::string event;
  int rank = 0;
  double mean_us = 0, min_us = 0, max_us = 0;
  int epochs = 0;  ///< epochs in which the event was recorded
};

/// The rows for every epoch e with a record of the sender (rank 0) and of the receiver
/// (rank 1), each event as the time from the sender's start of e, sorted by mean. The
/// receiver's "wait returned" of e - 1 and the sender's next start (e + 1) are included when
/// recorded (they close the loop of one iteration).
std::vector<TimelineRow> build_timeline(const std::vector<weft::part::EpochTraceRecord>& sender,
                                        const std::vector<weft::part::EpochTraceRecord>& receiver,
                                        const std::vector<BenchEpoch>& bench);

/// Mean time from one sender start to the next over the records (0 with fewer than two).
double mean_period_us(const std::vector<weft::part::EpochTraceRecord>& sender);

/// Prints the rows as `#   ` lines: event, rank, mean, min, max, the gap from the row above.
void print_timeline(const std::vector<TimelineRow>& rows);

/// One `floor` line: the means (us from the sender's start) of the events an iteration's
/// floor is made of, "-" where not recorded, and the period; floor_header names the columns.
void print_floor_header();
void print_floor_row(int blocks, const char* path, int threshold, const std::vector<TimelineRow>& rows, double period_us);

/// The producer's stamps per block (%globaltimer ns): entry, pready start, claimed, copied,
/// pready end.
constexpr int kStamps = 5;

/// Per-block step times of one epoch, in microseconds (st: kStamps words per block of G).
struct Steps {
  double span = 0, add = 0, claim = 0, claim_max = 0, copy = 0, done = 0, pready = 0, pready_max = 0;
  double slope_ns = 0;  ///< claim end against pready-start order, least squares
};
/// The steps, and in `order` the blocks sorted by pready start.
Steps analyse_blocks(int G, const std::vector<uint64_t>& st, std::vector<int>* order);
/// Up to `rows` blocks of the sorted order, evenly spaced (the first and last included).
void print_blocks(int G, const std::vector<uint64_t>& st, const std::vector<int>& order, int rows);

}  // namespace partbench
