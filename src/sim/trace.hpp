// Chrome-trace JSON of a simulated run: one process per rank, one thread per thread block,
// one complete ("X") event per busy invocation and per wait before it. The file loads in
// chrome://tracing and in Perfetto (ui.perfetto.dev); times are microseconds.
#pragma once

#include <ostream>
#include <string>

#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {

/// Writes the trace of `report` (run with SimOptions::trace) to `out`. Busy spans are
/// named after the primitive and its peers ("send 0->1", "rrc 3<-1"), waits "wait"; each
/// carries the slot, the micro-batch and, for waits, what the block waited on is implied
/// by the next busy span. The run's summary goes under "otherData".
void write_chrome_trace(std::ostream& out, const Simulator& sim, const SimReport& report);

/// Same, to a file; throws Error(System) naming the path when it cannot be written.
void write_chrome_trace_file(const std::string& path, const Simulator& sim, const SimReport& report);

}  // namespace weft::sim
