// The compiler: Algorithm -> TaskGraph -> Pipeline -> Plan (DESIGN.md parts 3 to 5).
#pragma once

#include <string>

#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "ir/task_graph.hpp"
#include "ir/topology.hpp"

namespace weft {

struct CompileOptions {
  std::string scheduler = "hpds";  ///< hpds | algo | stage | rr | gc3
  std::string allocator = "state"; ///< state | conn
  int32_t instances = 0;           ///< thread blocks per link; 0 derives them from the topology
  bool in_place = true;            ///< lower for in-place or out-of-place buffers
  bool fuse = true;                ///< fuse rcs / rrcs / rrs
  std::string protocol = "Simple";
};

struct PhaseSeconds {
  double parse = 0, analyse = 0, schedule = 0, lower = 0, total = 0;
};

struct CompileResult {
  TaskGraph graph;
  Pipeline pipeline;
  Plan plan;
  PhaseSeconds seconds;  ///< parse is filled by callers that parsed
  int32_t fused_primitives = 0;
};

/// Compiles a verified algorithm for a topology whose GPU count equals the algorithm's
/// ranks. Throws InvalidArgument for an unknown scheduler or allocator or a topology that
/// does not fit, Verify when the resulting plan fails its deadlock check.
CompileResult compile(const Algorithm& algo, const Topology& topo, const CompileOptions& options = {});

}  // namespace weft
