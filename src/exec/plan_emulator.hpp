// A CPU emulator of the executor: runs a lowered plan on host buffers with the kernel's
// geometry, FIFO depth and message order, one state machine per thread block, and
// detects deadlock (no thread block can make progress) exactly. Tests run every built-in
// (and compiled) plan through it on many shapes before any of them reaches a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/exec_plan.hpp"
#include "ir/plan_core.hpp"
#include "exec/plan_lowering.hpp"

namespace weft {

/// One rank's buffers for the emulator (may alias, as in-place calls do).
struct EmuBuffers {
  uint8_t* buf[3] = {nullptr, nullptr, nullptr};  ///< input, output, scratch
};

struct EmuResult {
  bool ok = true;
  std::string error;       ///< what failed when !ok: the deadlock, or messages left unread
  DeadlockVerdict deadlock;  ///< !deadlock.ok: no thread block can go on; `cycle` lists the stuck slots
  uint64_t messages = 0;   ///< messages moved
  uint64_t invocations = 0;
};

/// Runs the plan on `bufs` (one per rank) for geometry `g`, element type `dtype` and
/// reduction `op` (weft values; Avg combines as Sum), with connection FIFOs of `depth`
/// messages. Returns !ok with the blocked thread blocks listed when it deadlocks.
/// With `protocol` LL128 every message travels as the interpreter's LL128 lines (every line
/// of every non-empty piece, data or padding, with the message's flag) and the receiver
/// decodes them, checking each line's flag: a line the sender did not write is an error.
/// Simple and LL messages travel as plain data. Each thread block runs its invocations in the
/// kernel's order (exec::InvocationOrder) with `mb_window` micro-batches per window under
/// algorithm-level execution (ExecArgs::mb_window).
EmuResult emulate(const LoweredPlan& lp, const exec::Geometry& g, int depth, std::vector<EmuBuffers>& bufs,
                  int dtype, int op, exec::Protocol protocol = exec::kSimple, uint32_t mb_window = 1);

}  // namespace weft
