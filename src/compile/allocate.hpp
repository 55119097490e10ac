// Thread-block allocation (docs/design.md; paper 001 §4.4) and assembly of the Plan.
//
// Both allocators keep the runtime's rule: each connection end is driven by exactly one thread
// block. Connection ends that one fused primitive joins (its receive and its send) form a
// group, which must live on one thread block; instance i of a group uses physical channel
// channel * instances + i and its own thread block.
//
// conn   connection-based (MSCCL, the baseline): one thread block per group and instance;
//        local copies and reductions of a rank share one thread block per logical channel.
//        With MSCCL's per-stage channels (lower.hpp, uses_stage_channels) this is what MSCCL
//        allocates for an algorithm whose stages its author put on separate channels.
// state  state-based (ResCCL): groups that are never active in the same sub-pipeline share a
//        thread block. Greedy colouring in order of first activity; if that ever needs more
//        thread blocks on a rank than one per group, the rank falls back to one per group, so
//        `state` never needs more than `conn` on the same channels.
#pragma once

#include <string_view>
#include <vector>

#include "compile/lower.hpp"
#include "ir/plan.hpp"

namespace weft {

struct Allocation {
  /// Instance i of lowered slot s is entry inst_base[s] + i of `tb`.
  std::vector<int32_t> inst_base;
  std::vector<int32_t> tb;
  std::vector<int32_t> tbs_per_rank;
};

Allocation allocate_state(const LoweredProgram& program);
Allocation allocate_conn(const LoweredProgram& program);
/// "state", "conn", "peer", "peer-mixed" or "rank" (docs/compile.md); throws InvalidArgument naming the
/// known allocators otherwise. `spare_blocks` (peer allocators only): blocks each rank adds for
/// local copies and reductions, which are dealt round robin over these (peer) or over the
/// communication blocks and these (peer-mixed).
Allocation allocate(const LoweredProgram& program, std::string_view allocator, int32_t spare_blocks = 0);
/// Throws InvalidArgument unless `allocator` is one of the five.
void check_allocator_name(std::string_view allocator);

/// Builds the Plan's ranks (thread blocks, slots in key order, per-micro-batch dependencies
/// between overlapping instances, minus those program order already implies). The caller
/// fills the Plan's header fields.
void assemble_plan(const LoweredProgram& program, const Allocation& allocation, Plan& plan);

}  // namespace weft
