// The deadlock check (docs/design.md).
//
// Rendezvous model (depth 0, and every task-level plan): nodes are a plan's slots; the two
// ends of a connection run together (the i-th send on a connection meets its i-th receive),
// so they are merged into one node, and a fused primitive thus merges a whole forwarding
// chain. Edges are program order inside a thread block and the per-micro-batch dependencies.
// The plan is deadlock-free when this graph is acyclic: the lowest unfinished node in a
// topological order always has every thread block it needs at that slot and every dependency
// met; and when, within each merged node, the per-micro-batch edges (a message's send before
// its receive, a fused primitive's receive before its send, dependencies between members)
// are acyclic too. A forwarding chain that closes on itself, or a dependency against the
// direction its node's data flows, stops the node at micro-batch 0. Dependencies that join
// two nodes both ways (whole slots waiting on each other) are not a deadlock when the nodes'
// members are all at their heads and the edges of one micro-batch across them are acyclic:
// such groups fire together. On 300,000 random plans this model and the runtime's emulator
// and the simulator give the same verdict on every plan (tests/unit/runtime/
// test_semantics_agree.cpp). Buffered model (algorithm-level plans, connections of depth d >= 1, as the runtime's
// FIFOs and MSCCL's rings rely on): see check_deadlock. Both also reject plans whose
// connections cannot be paired: sends and receives in different numbers, or one connection
// end driven by two thread blocks. Linear in slots plus dependencies.
#pragma once

#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "ir/plan_core.hpp"

namespace weft {

/// The check's verdict (ir/plan_core.hpp): the cycle's slots, in order, or a connection fault.
using CycleEntry = PlanSlotRef;
using DeadlockReport = DeadlockVerdict;

/// The runtime's default FIFO depth (WEFT_FIFO_DEPTH): messages a connection holds.
inline constexpr int32_t kDefaultFifoDepth = 4;

/// Checks a plan (validate_plan first, whose errors are thrown, not reported) for connections
/// that hold `fifo_depth` messages (0: rendezvous, a send waits for its receive; at most
/// 1,048,576). Exact for every micro-batch count:
///   - task-level execution, or depth 0: the ends of each connection merged, as above (a slot
///     runs all its micro-batches before the next, so for counts past the depth a send slot
///     can only finish while its receive slot runs, whatever the depth);
///   - algorithm-level execution with depth d >= 1: nodes are the slots of one micro-batch;
///     the j-th receive on a connection waits for the j-th send, and the j-th send for the
///     (j-d)-th receive (a free FIFO entry), besides program order and `deps`. Every edge
///     between micro-batches goes forward, so the plan cannot deadlock iff this graph is
///     acyclic.
DeadlockReport check_deadlock(const Plan& plan, int32_t fifo_depth = kDefaultFifoDepth);
/// Throws DeadlockError (code Verify) carrying the verdict when the plan can deadlock, and
/// Error(Verify) with the fault when its connections do not pair.
void check_deadlock_or_throw(const Plan& plan, int32_t fifo_depth = kDefaultFifoDepth);

}  // namespace weft
