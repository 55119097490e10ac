// The deadlock check (DESIGN.md part 5).
//
// Nodes are a plan's slots. The two ends of a connection run together (the i-th send on a
// connection meets its i-th receive), so they are merged into one node; a fused primitive
// thus merges a whole forwarding chain. Edges are program order inside a thread block and the
// per-micro-batch dependencies. The plan is deadlock-free under both execution models when
// this graph is acyclic: the lowest unfinished node in a topological order always has every
// thread block it needs at that slot and every dependency met. The check also rejects plans
// whose connections cannot be paired: sends and receives in different numbers, or one
// connection end driven by two thread blocks. Linear in slots plus dependencies.
#pragma once

#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

/// One slot on a reported cycle.
struct CycleEntry {
  int32_t rank = 0, tb = 0, slot = 0;
  Primitive primitive = Primitive::Nop;
  int32_t peer = -1;  ///< the slot's send peer, else its receive peer, else -1
};

struct DeadlockReport {
  bool ok = true;
  /// One sentence: the cycle ("rank 0 tb 1 slot 2 (send to 1) -> ..."), or the connection fault.
  std::string message;
  std::vector<CycleEntry> cycle;  ///< the slots on the cycle, in order
};

/// Checks a plan (validate_plan first, whose errors are thrown, not reported).
DeadlockReport check_deadlock(const Plan& plan);
/// Throws Verify with the report's message when the plan can deadlock.
void check_deadlock_or_throw(const Plan& plan);

}  // namespace weft
