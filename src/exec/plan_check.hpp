// The check every plan passes before the runtime uploads it (plan/plan_source.hpp says
// where plans come from): the lowered plan runs on the CPU emulator on random data, with
// the communicator's FIFO depth and several micro-batches, and must reproduce the host
// reference exactly and leave every buffer the collective does not own untouched.
#pragma once

#include "exec/exec_plan.hpp"
#include "exec/plan_lowering.hpp"

namespace weft {

/// Runs the lowered plan on the emulator (FIFO depth `depth`, messages as `protocol` sends
/// them, algorithm-level blocks in windows of `mb_window` micro-batches: exec::InvocationOrder)
/// and compares with the host reference; throws Verify describing a deadlock, a wrong
/// element or a stray write.
void check_plan_on_emulator(const LoweredPlan& lp, int depth, exec::Protocol protocol = exec::kSimple,
                            uint32_t mb_window = 1);

}  // namespace weft
