// libFuzzer target of the plan-file reader and the plan checks: arbitrary bytes must either
// load into a Plan or raise weft::Error (never Internal). A loaded plan must survive the
// deadlock check and a replay of its first lane (each may report or throw Verify), and must
// round-trip through plan_to_json unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "ir/plan_json.hpp"
#include "util/error.hpp"

namespace {

bool bug(const weft::Error& e) { return e.code() == weft::ErrorCode::Internal; }

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
  try {
    weft::replay_plan(plan, 0);
  } catch (const weft::Error& e) {
    if (bug(e)) std::abort();
  }
  if (!(weft::plan_from_json(weft::plan_to_json(plan), "again.json") == plan)) std::abort();
  return 0;
}
