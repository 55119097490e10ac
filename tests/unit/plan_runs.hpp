// Running a plan to see whether it deadlocks, on the runtime's CPU emulator and on the
// simulator: shared by the agreement test (runtime/test_semantics_agree.cpp) and the plan
// fuzz target (tests/fuzz/fuzz_plan_json.cpp), which hold the deadlock check to both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "ir/plan_core.hpp"
#include "ir/topology_io.hpp"
#include "exec/plan_emulator.hpp"
#include "exec/plan_lowering.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "util/error.hpp"
#include "weft/weft.h"

namespace weft::test {

struct PlanRun {
  bool deadlock = false;
  std::string error;          ///< what deadlocked, when `deadlock`
  uint32_t microbatches = 0;  ///< per chunk slot
  double time_us = 0;         ///< the simulator's, when it finished
};

/// The emulator on zeroed int32 buffers with FIFOs of `depth` messages: chunk slots of
/// `elems_per_slot` elements in micro-batches of at most 64 bytes. Throws weft::Error when
/// the plan cannot be lowered.
inline PlanRun emulate_plan(const Plan& plan, int depth, uint64_t elems_per_slot) {
  const int R = plan.num_ranks;
  LoweredPlan lp = lower_plan(plan, R, 64);
  const uint64_t k = static_cast<uint64_t>(std::max({lp.k[0], lp.k[1], 1}));
  exec::Geometry g = make_geometry(lp, elems_per_slot * k, 4, 64, 64);
  std::vector<std::vector<uint8_t>> mem(static_cast<size_t>(3 * R));
  std::vector<EmuBuffers> bufs(static_cast<size_t>(R));
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < 3; ++b) {
      auto& m = mem[static_cast<size_t>(3 * r + b)];
      // A buffer is `groups` groups of n elements; scratch is its chunks of `stride`.
      m.assign((static_cast<size_t>(lp.groups[b]) * g.n + static_cast<size_t>(lp.chunks[b]) * g.stride) * 4 + 64, 0);
      bufs[static_cast<size_t>(r)].buf[b] = m.data();
    }
  EmuResult res = emulate(lp, g, depth, bufs, weftInt32, weftSum);
  return {!res.ok, res.error, g.nmb, 0};
}

/// The simulator on one H200 node of the plan's ranks with FIFOs of `depth` messages and
/// `microbatches` micro-batches of `microbatch_bytes` per chunk slot. A deadlock is reported;
/// any other weft::Error (a plan or size it refuses) is thrown.
inline PlanRun simulate_plan(const Plan& plan, int depth, uint32_t microbatches, uint64_t microbatch_bytes = 64) {
  Topology topo = topology_preset("h200-1x8");
  topo.gpus_per_node = plan.num_ranks;
  topo.name = "h200-1x" + std::to_string(plan.num_ranks);
  sim::SimOptions o;
  o.fifo_depth = depth;
  o.microbatch_bytes = microbatch_bytes;
  o.bytes = microbatches * microbatch_bytes * static_cast<uint64_t>(std::max({plan.input_chunks, plan.output_chunks, 1}));
  try {
    sim::SimReport r = sim::Simulator(plan, topo).run(o);
    return {false, "", microbatches, r.time_us};
  } catch (const DeadlockError& e) {
    return {true, e.what(), microbatches, 0};
  }
}

}  // namespace weft::test
