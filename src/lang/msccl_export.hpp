// MSCCL XML export of a weft Plan, so that MSCCL-based stacks (msccl-executor-nccl, RCCL's
// MSCCL) can run a weft-scheduled algorithm.
//
// MSCCL is more constrained than a Plan: a thread block has at most one send peer and one
// receive peer, on one channel, and runs the whole algorithm once per micro-batch
// (algorithm-level execution). The export therefore:
//  * keeps a weft thread block as one MSCCL thread block when its connections allow it, and
//    otherwise splits it into one block per connection (fused primitives whose two ends
//    would need different blocks are split into a receive and a send); the blocks cut from
//    one weft thread block keep its order through explicit dependencies;
//  * writes each Slot::deps as MSCCL dependencies (one per step, nop steps for the rest);
//  * refines chunks when slots run as several instances: with I the least common multiple
//    of all Slot::instances, every chunk becomes I chunks and instance j of k takes chunks
//    [j*I/k, (j+1)*I/k) of each (MSCCL's own way of spreading one transfer over blocks);
//  * splits steps of more than 64 chunks (MSCCL's executor accepts fewer than 72).
// What is lost: task-level execution (MSCCL loops over micro-batches outside the steps),
// sub-pipelines, and weft's sharing of one thread block by connections that are never
// active together. See docs/msccl-xml.md.
#pragma once

#include <cstdint>
#include <string>

#include "ir/plan.hpp"
#include "lang/msccl_program.hpp"

namespace weft {

struct MscclExportOptions {
  std::string name;              ///< <algo name>; empty: the plan's algorithm name
  int64_t min_bytes = 0;         ///< minBytes
  int64_t max_bytes = INT64_MAX; ///< maxBytes
};

/// Converts `plan` to an MSCCL program (no element pointers). Throws
/// weft::Error(InvalidArgument) for a plan MSCCL cannot express (a Custom collective whose
/// input and output chunk counts differ, a connection used by two thread blocks, instance
/// counts whose refinement exceeds 64). A Custom plan exports as coll="custom"; its
/// postcondition is not in the plan, so it is lost.
MscclProgram plan_to_msccl(const Plan& plan, const MscclExportOptions& options = {});

/// plan_to_msccl() printed as MSCCL XML text.
std::string export_msccl(const Plan& plan, const MscclExportOptions& options = {});

}  // namespace weft
