// libFuzzer target of the plan-file reader and the plan checks: arbitrary bytes must either
// load into a Plan or raise weft::Error (never Internal). A loaded plan must survive the
// deadlock check and a replay of its first lane (each may report or throw Verify), and must
// round-trip through plan_to_json unchanged. And the check must be sound: a small plan it
// passes at FIFO depth 2 must run to the end, with more micro-batches than the FIFO holds,
// on the runtime's CPU emulator and on the simulator (either may refuse the plan's shape
// with an error, but neither may find it deadlocked).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <algorithm>
#include <vector>

#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "runtime/plan_emulator.hpp"
#include "runtime/plan_lowering.hpp"
#include "sim/simulator.hpp"
#include "weft/weft.h"
#include "util/error.hpp"

namespace {

bool bug(const weft::Error& e) { return e.code() == weft::ErrorCode::Internal; }

/// Runs a plan the check passed at depth `depth` on the emulator and the simulator, each with
/// 4 micro-batches per chunk slot; aborts if either finds it deadlocked.
void run_passed_plan(const weft::Plan& plan, int depth) {
  using namespace weft;
  const int R = plan.num_ranks;
  try {
    LoweredPlan lp = lower_plan(plan, R, 64);
    const uint64_t k = static_cast<uint64_t>(std::max({lp.k[0], lp.k[1], 1}));
    exec::Geometry g = make_geometry(lp, 64 * k, 4, 64, 64);  // 64 elements per slot, 16 per micro-batch
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
    if (!res.ok) std::abort();  // the check passed a plan the emulator finds deadlocked
  } catch (const Error& e) {
    if (bug(e)) std::abort();
  }
  try {
    Topology topo = topology_preset("h200-1x8");
    topo.gpus_per_node = R;
    topo.name = "fuzz";
    sim::Simulator s(plan, topo);
    sim::SimOptions o;
    o.fifo_depth = depth;
    o.microbatch_bytes = 64;
    o.bytes = 4 * 64 * static_cast<uint64_t>(std::max({plan.input_chunks, plan.output_chunks, 1}));
    s.run(o);
  } catch (const Error& e) {
    if (bug(e)) std::abort();
    if (std::string(e.what()).find("deadlocks") != std::string::npos) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  weft::Plan plan;
  try {
    plan = weft::plan_from_json(text, "fuzz.json");
  } catch (const weft::Error& e) {
    if (bug(e)) std::abort();
    return 0;
  }
  // Keep one input cheap: the checks are linear, but a plan may name many ranks.
  if (plan.num_ranks > 4096) return 0;
  try {
    weft::check_deadlock(plan);
  } catch (const weft::Error& e) {
    if (bug(e)) std::abort();
  }
  // Soundness on small plans (the emulator and the simulator run every micro-batch).
  size_t slots = 0;
  for (const weft::RankPlan& rp : plan.ranks)
    for (const weft::ThreadBlock& tb : rp.tbs) slots += tb.slots.size();
  if (plan.num_ranks >= 1 && plan.num_ranks <= 8 && slots <= 256) {
    bool passed = false;
    try {
      passed = weft::check_deadlock(plan, 2).ok;
    } catch (const weft::Error& e) {
      if (bug(e)) std::abort();
    }
    if (passed) run_passed_plan(plan, 2);
  }
  try {
    weft::replay_plan(plan, 0);
  } catch (const weft::Error& e) {
    if (bug(e)) std::abort();
  }
  if (!(weft::plan_from_json(weft::plan_to_json(plan), "again.json") == plan)) std::abort();
  return 0;
}
