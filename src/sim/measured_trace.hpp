// Measured traces (docs/traces.md): the interpreter's in-kernel timestamps of one call
// (ir/trace_record.hpp), gathered from every rank, put on one clock and turned into the
// simulator's report and trace spans, so that the per-thread-block busy/idle figures, the
// Chrome trace and the plots of a measured run are the simulator's, computed the same way.
//
// Each rank's records come as one JSON object (measured_rank_to_json: the runtime writes
// it, `weft bench --trace` reads it). %globaltimer is per GPU, so the ranks' readings are
// first put on rank 0's clock (align_clocks), from the messages the records pair up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/trace_record.hpp"
#include "ir/plan.hpp"
#include "sim/report.hpp"
#include "sim/trace.hpp"

namespace weft::sim {

/// A slot of the rank's lowered plan, as the records name it (by its slot number).
struct MeasuredSlot {
  int32_t tb = 0;          ///< thread block (CUDA block) that runs it
  int32_t local = 0;       ///< index within that block
  Primitive prim = Primitive::Nop;
  int32_t send_peer = -1;  ///< rank it sends to, -1 if none
  int32_t send_conn = -1;  ///< the connection's pool index (the same number on both ends)
  int32_t recv_peer = -1;
  int32_t recv_conn = -1;
};

struct MeasuredBlock {
  uint64_t start_ns = 0;   ///< this GPU's %globaltimer; 0: the block has no slot
  uint64_t end_ns = 0;     ///< 0: the block stopped early
  uint32_t count = 0;      ///< records the block made
  uint32_t cap = 0;        ///< records its region held
  std::vector<exec::TraceRecord> records;  ///< min(count, cap), in the order made
  uint64_t dropped() const { return count > records.size() ? count - records.size() : 0; }
};

/// One rank's trace of one call.
struct MeasuredRank {
  int32_t rank = 0;
  int32_t nranks = 0;
  std::string kernel;      ///< "interpreter" when traced; else what ran ("oneshot", ...)
  std::string note;        ///< why nothing was recorded, if so
  std::string collective;  ///< to_string(Collective)
  std::string algorithm;   ///< the selection's choice, as `weft bench` prints it
  std::string protocol;    ///< "Simple" or "LL"
  uint64_t bytes = 0;      ///< the call's size (nccl-tests convention)
  uint32_t microbatches = 0;
  int32_t fifo_depth = 0;
  std::vector<MeasuredSlot> slots;    ///< by slot number
  std::vector<MeasuredBlock> blocks;  ///< by CUDA block
};

/// The blocks of a traced launch's buffer as the device left it (ir/trace_record.hpp):
/// `bytes` hold whole regions of `cap` records each, one per CUDA block; a block keeps
/// min(count, cap) records (a block without slots, never written, reads back empty).
/// Throws InvalidArgument when `bytes` is not whole regions or a written header names
/// another cap.
std::vector<MeasuredBlock> blocks_from_trace_buffer(const char* buf, uint64_t bytes, uint32_t cap);

/// One line of JSON (docs/traces.md, "Record format").
std::string measured_rank_to_json(const MeasuredRank& r);
/// Parses measured_rank_to_json's text; throws Error(Parse) naming `where` and what is wrong.
MeasuredRank measured_rank_from_json(const std::string& text, const std::string& where);

/// Per rank, what is added to its readings to put them on rank 0's clock.
struct ClockAlignment {
  std::vector<double> offset_ns;       ///< rank 0: 0
  /// Half the width of the offsets the messages allow (the error bound of the midpoint
  /// taken); -1 where only one side is bounded or nothing is (the offset is then a bound,
  /// or the launches are taken as simultaneous).
  std::vector<double> uncertainty_ns;
  std::vector<std::string> how;        ///< "rank 0", "messages", "one-sided", "launch"
  int64_t messages = 0;                ///< messages paired between records of two ranks
  bool consistent = true;              ///< false: some pair's bounds crossed (the midpoint is still used)
};

/// Causality bounds: a message's receiver cannot finish it before its sender started
/// moving it (nor, Simple, start moving it before the sender finished), and a sender
/// cannot start message m + depth before the receiver finished message m. Each pair of
/// ranks that exchange messages gets the interval of clock offsets these allow; its
/// midpoint is taken, then offsets compose along a tree from rank 0. Ranks that exchange
/// nothing with the others are aligned on their first block's start. `ranks` by rank.
ClockAlignment align_clocks(const std::vector<MeasuredRank>& ranks);

struct MeasuredRun {
  /// The measured figures in the simulator's report (topology "measured"): time from the
  /// first block's start to the last block's end, TbStat per block, the means, the spans.
  SimReport report;
  TraceLabels labels;      ///< for write_chrome_trace; "otherData" holds the clocks and drops
  ClockAlignment clocks;
  uint64_t dropped = 0;    ///< records dropped by every block together
  int32_t blocks = 0;      ///< blocks with records, all ranks
};

/// Every rank's trace of one call (index = rank, each traced by the interpreter) into a
/// measured run. A block's lifetime runs from its own start to its end (its last
/// record's end where records were dropped); it is idle while waiting (from each record's
/// wait_ns to its move_ns) and busy otherwise, the interpreter's own steps between
/// invocations included, as the simulator counts alpha busy. Throws InvalidArgument when
/// a rank is missing, untraced, or the traces are of different calls.
MeasuredRun measured_run(const std::vector<MeasuredRank>& ranks, size_t trace_limit = 2'000'000);

}  // namespace weft::sim
