// Chrome-trace JSON of a simulated run: one process per rank, one thread per thread block,
// one complete ("X") event per busy invocation and per wait before it. The file loads in
// chrome://tracing and in Perfetto (ui.perfetto.dev); times are microseconds.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {

/// "send 0->1", "rrc 3<-1", "rcs 1<-0 1->2": a busy span's name, from the primitive, the
/// block's rank and its peers (-1: none).
std::string span_label(Primitive prim, int32_t rank, int32_t from, int32_t to);

/// What the writer needs to name a report's tracks and spans, whoever made the spans (the
/// engine or measured timestamps, sim/measured_trace.hpp).
struct TraceLabels {
  /// (rank, thread block) of a SimReport::trace_tb entry.
  std::function<std::pair<int32_t, int32_t>(int32_t tb)> track;
  /// Busy span name of a TraceSpan::slot.
  std::function<std::string(int32_t slot)> name;
  /// The slot's index within its thread block (the "slot" argument).
  std::function<int32_t(int32_t slot)> local_slot;
  /// Merged into "otherData" after the run's summary.
  nlohmann::ordered_json other = nlohmann::ordered_json::object();
};

/// Writes `r`'s spans with `labels`, in the format described above.
void write_chrome_trace(std::ostream& out, const SimReport& r, const TraceLabels& labels);
/// Same, to a file; throws Error(System) naming the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, const SimReport& r, const TraceLabels& labels);

/// Writes the trace of `report` (run with SimOptions::trace) to `out`. Busy spans are
/// named after the primitive and its peers ("send 0->1", "rrc 3<-1"), waits "wait"; each
/// carries the slot, the micro-batch and, for waits, what the block waited on is implied
/// by the next busy span. The run's summary goes under "otherData".
void write_chrome_trace(std::ostream& out, const Simulator& sim, const SimReport& report);

/// Same, to a file; throws Error(System) naming the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, const Simulator& sim, const SimReport& report);

}  // namespace weft::sim
