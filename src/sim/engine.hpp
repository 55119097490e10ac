// The discrete-event engine behind Simulator::run (docs/simulator.md, "The engine").
#pragma once

#include <cstdint>

#include "sim/cost_model.hpp"
#include "sim/program.hpp"
#include "sim/report.hpp"

namespace weft::sim {

struct EngineParams {
  uint64_t chunk_bytes = 0;       ///< bytes of one chunk slot
  uint64_t microbatch_bytes = 0;  ///< micro-batch size per chunk slot
  int32_t microbatches = 0;       ///< ceil(chunk_bytes / microbatch_bytes)
  int32_t fifo_depth = 4;
  bool trace = false;
  size_t trace_limit = 0;
  bool check = false;
  bool slot_times = false;        ///< SimOptions::slot_times
  double latency_scale = 1;       ///< connections' latencies x this (SimOptions::latency_scale)
  double polled_receive_GBps = 0; ///< SimOptions::polled_receive_scale x tb_copy_GBps (0: none)
  double nvlink_gamma = -1;       ///< SimOptions::nvlink_gamma (< 0: the cost model's gamma)
  double rate_scale = 1;          ///< connections' per-block rates x this
  double local_rate_scale = 1;    ///< SimOptions::local_rate_scale
  bool whole_messages = false;    ///< SimOptions::whole_messages
  int32_t calls = 1;              ///< SimOptions::calls: back-to-back calls on every rank
  double call_gap_us = 0;         ///< SimOptions::call_gap_us: a rank's last block of a call to its next call
};

/// Runs `prog` and fills the timing fields of `out`: time_us, rank_end_us, links, tbs, trace,
/// the check arrays, invocations, events. Throws Error(Verify) when the plan deadlocks.
void run_engine(const Program& prog, const CostModel& cost, const EngineParams& params, SimReport& out);

}  // namespace weft::sim
