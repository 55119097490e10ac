// Every algorithm of algorithms/ compiled as the runtime compiles it (make_plan: one NVLink
// node, hpds, state allocation), in place and out of place, at several rank counts, then run
// on the CPU emulator against the host reference (real bytes, real FIFO depth, guard bands,
// untouched buffers the collective does not own) and replayed through the symbolic verifier.
// The emulator is the faithful check: it is what refuses a plan before it reaches a GPU.
#include <gtest/gtest.h>

#include "compile/compiler.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "lang/load.hpp"
#include "exec/plan_lowering.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// The collective an algorithm of algorithms/ implements (its rank count does not matter).
Collective collective_of(const std::string& name) { return algorithm_collective(name, 4); }

/// "" when the plan of `name` for R ranks passes the emulator at FIFO depths 1 and 4 and its
/// replay verifies; otherwise what failed.
std::string run(const std::string& name, int R, bool in_place, int instances,
                exec::Protocol protocol = exec::kSimple) {
  const Collective c = collective_of(name);
  const int root = (c == Collective::Broadcast || c == Collective::Reduce) ? R - 1 : 0;
  try {
    Plan p = make_plan(c, R, name, protocol == exec::kLL128 ? "LL128" : "Simple", instances, in_place, root);
    if (p.in_place != in_place) return "the plan is for the other placement";
    for (int lane = 0; lane < plan_lanes(p); ++lane) {
      VerifyResult v = verify(replay_plan(p, lane));
      if (!v.ok && c != Collective::Custom) return "replay lane " + std::to_string(lane) + ": " + v.errors[0];
    }
    LoweredPlan lp = lower_plan(p, R, 64);
    for (int depth : {1, 4}) check_plan_on_emulator(lp, depth, protocol);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// Rank counts to try: the runtime passes nRanks, GPUPerNode = nRanks (one node) and Root.
std::vector<int> rank_counts(const std::string& name) {
  if (name.rfind("hm_", 0) == 0 || name == "alltoall_twostep" || name == "alltonext") return {2, 3, 4, 8};
  return {2, 3, 4};
}

TEST(CompiledBuiltins, EveryAlgorithmInPlaceAndOutOfPlaceOnTheEmulator) {
  for (const std::string& name : builtin_algorithm_names())
    for (int R : rank_counts(name))
      for (bool in_place : {false, true})
        for (int instances : {1, 0}) {
          // A Custom collective has no aliasing rule: it compiles as written (AllToNext: out of place).
          if (in_place && collective_of(name) == Collective::Custom) continue;
          SCOPED_TRACE(name + " R=" + std::to_string(R) + (in_place ? " in place" : " out of place") +
                       " instances=" + std::to_string(instances));
          EXPECT_EQ(run(name, R, in_place, instances), "");
        }
}

// The same with messages as LL128 lines: every plan the selection table can name, under
// WEFT_PROTO=LL128 or an LL128 row.
TEST(CompiledBuiltins, EveryAlgorithmAsLL128OnTheEmulator) {
  for (const std::string& name : builtin_algorithm_names())
    for (int R : {2, 4})
      for (bool in_place : {false, true}) {
        if (in_place && collective_of(name) == Collective::Custom) continue;
        SCOPED_TRACE(name + " R=" + std::to_string(R) + (in_place ? " in place" : " out of place") + " LL128");
        EXPECT_EQ(run(name, R, in_place, 0, exec::kLL128), "");
      }
}

TEST(CompiledBuiltins, TheTablesInstanceCountStaysWithinTheRuntimesBudget) {
  // The selection table asks for 24 instances at large sizes; a compiled plan with blocks per
  // link and many peers would need far more (HM AllReduce on 8 ranks: 336). The runtime
  // compiles it again with derived instances (compile_for_runtime), and the result still
  // passes the emulator and the replay.
  for (const std::string& name : builtin_algorithm_names())
    for (int R : {2, 4, 8}) {
      if (name.rfind("hm_", 0) != 0 && name.rfind("alltoall", 0) != 0 && name.rfind("allpairs", 0) != 0 && R == 8)
        continue;
      const Collective c = collective_of(name);
      const bool in_place = c != Collective::Custom && c != Collective::AllToAll;
      SCOPED_TRACE(name + " R=" + std::to_string(R));
      const int root = (c == Collective::Broadcast || c == Collective::Reduce) ? R - 1 : 0;
      Plan p = make_plan(c, R, name, "Simple", 24, in_place, root);
      EXPECT_LE(p.max_tbs_per_rank(), kRuntimePlanMaxTbs);
      EXPECT_EQ(run(name, R, in_place, 24), "");
    }
}

}  // namespace
}  // namespace weft
