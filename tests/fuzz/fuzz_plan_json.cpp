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
#include "plan_runs.hpp"
#include "util/error.hpp"

namespace {

bool bug(const weft::Error& e) { return e.code() == weft::ErrorCode::Internal; }

/// Runs a plan the check passed at depth `depth` on the emulator and the simulator, each with
/// 4 micro-batches per chunk slot; aborts if either finds it deadlocked.
void run_passed_plan(const weft::Plan& plan, int depth) {
  for (bool on_emulator : {true, false}) {
    try {
      weft::test::PlanRun r = on_emulator ? weft::test::emulate_plan(plan, depth, 64)  // 4 micro-batches of 64 bytes
                                          : weft::test::simulate_plan(plan, depth, 4);
      if (r.deadlock) std::abort();  // the check passed a plan that deadlocks
    } catch (const weft::Error& e) {
      if (bug(e)) std::abort();
    }
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
