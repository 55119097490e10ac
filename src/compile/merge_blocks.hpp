// Merging the thread blocks of a compiled plan whose work never overlaps in time: paper 001
// §4.4's state-based allocation ("merge connections that will never be active
// simultaneously") on a timeline instead of on sub-pipelines. The timeline comes from the
// simulator (sim/autotune.hpp runs the plan and passes when each slot first began to work and
// last finished); blocks whose slots never run at the same time become one block that runs
// all their slots in the order they ran (docs/compile.md, "Merging blocks on the simulated
// timeline").
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

/// When a slot works: from its first invocation's start to its last invocation's end.
struct SlotActivity {
  double first_us = 0, last_us = 0;
};

/// Per rank, the new thread blocks, each its slots in order as (old block, old slot).
using BlockMerge = std::vector<std::vector<std::vector<std::pair<int32_t, int32_t>>>>;

/// Greedy colouring per rank: `activity[r][tb][slot]`. Blocks in order of their first busy
/// moment, each onto the merged block whose slots' intervals none of its own overlaps (with
/// `gap_us` to spare), the busiest such block first, else a block of its own. A merged
/// block's slots run in order of their start (an old block's own order is kept).
BlockMerge merge_by_activity(const std::vector<std::vector<std::vector<SlotActivity>>>& activity, double gap_us);

/// Applies a merge; dependencies are renumbered (those on an earlier slot of the same new
/// block are dropped: program order covers them). Returns false, leaving `plan` unchanged,
/// when a slot would wait on itself or a later slot of its own new block. Task-level plans
/// only (an algorithm-level block runs one micro-batch of every slot in turn, so merged
/// blocks would interleave there).
bool merge_thread_blocks(Plan& plan, const BlockMerge& merge);

}  // namespace weft
