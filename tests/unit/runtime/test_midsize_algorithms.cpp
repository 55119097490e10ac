// The direct algorithms for mid sizes (docs/algorithms.md, "Direct algorithms for mid
// sizes") built as the runtime builds them (make_plan: one NVLink node, step order, the
// deadlock check at the FIFO depth) for 2 to 16 ranks under both schedulers the selection
// table names, in place and out of place; up to 8 ranks (what the one-node runtime runs) each
// plan also runs on the CPU emulator against the host reference, as Simple and as LL
// messages, and its replay verifies.
#include <gtest/gtest.h>

#include "compile/compiler.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "exec/plan_check.hpp"
#include "exec/plan_lowering.hpp"
#include "lang/load.hpp"
#include "plan/plan_source.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

const char* const kMidSize[] = {"twoshot_allreduce", "twoshot_reducescatter", "direct_broadcast",
                                "direct_reduce",     "scatter_broadcast",     "scatter_reduce"};

/// "" when `name` builds for R ranks at FIFO depths 2 and 4 (the runtime's least and default)
/// and, up to 8 ranks, passes the emulator at that depth; a task-level (hpds) plan's replay
/// must also verify (an algorithm-level plan in step order may rely on the FIFOs, which the
/// replay's rendezvous model does not have: the emulator is the check there).
std::string check(const std::string& name, int R, const char* scheduler, int instances, bool in_place, int root) {
  const Collective c = algorithm_collective(name, R);
  try {
    for (int depth : {2, 4}) {
      const Plan p = make_plan(c, R, name, "Simple", instances, in_place, root, depth, scheduler);
      if (p.max_tbs_per_rank() > kRuntimePlanMaxTbs) return "more blocks than the runtime runs";
      if (R > 8) continue;
      for (int lane = 0; p.execution == ExecutionModel::Task && lane < plan_lanes(p); ++lane) {
        VerifyResult v = verify(replay_plan(p, lane));
        if (!v.ok) return "replay lane " + std::to_string(lane) + ": " + v.errors[0];
      }
      const LoweredPlan lp = lower_plan(p, R, 64);
      for (exec::Protocol proto : {exec::kSimple, exec::kLL}) check_plan_on_emulator(lp, depth, proto);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MidSizeAlgorithms, BuildFor2To16RanksAndRunOnTheEmulator) {
  int built = 0;
  for (const char* name : kMidSize)
    for (int R = 2; R <= 16; ++R) {
      const Collective c = algorithm_collective(name, R);
      const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
      for (const char* sched : {"hpds", "algo"})
        for (int instances : {1, 8})
          for (bool in_place : {false, true})
            for (int root : rooted ? std::vector<int>{0, R - 1} : std::vector<int>{0}) {
              // Broad at up to 8 ranks (the runtime's one-node range); one configuration above.
              if (R > 8 && (instances != 8 || in_place || root != 0)) continue;
              SCOPED_TRACE(std::string(name) + " R=" + std::to_string(R) + " " + sched + " x" + std::to_string(instances) +
                           (in_place ? " in place" : " out of place") + " root " + std::to_string(root));
              EXPECT_EQ(check(name, R, sched, instances, in_place, root), "");
              ++built;
            }
    }
  EXPECT_GT(built, 6 * 7 * 8);
}

TEST(MidSizeAlgorithms, ThreadBlocksPerRankAtOneInstance) {
  // What a row's instance count multiplies (docs/algorithms.md gives the same figures). A
  // connection end keeps one block; ends whose steps do not overlap share one under the
  // state allocator (twoshot_reducescatter's sends, one peer per step), the others do not
  // (twoshot_allreduce's: every peer's connection is busy from its reduce-scatter step to
  // the all-gather step), so the blocks grow with the ranks.
  struct Want {
    const char* name;
    const char* sched;
    int R, tbs;
  };
  const Want wants[] = {{"twoshot_allreduce", "hpds", 4, 6},     {"twoshot_allreduce", "algo", 4, 5},
                        {"twoshot_allreduce", "hpds", 8, 14},    {"twoshot_allreduce", "algo", 8, 13},
                        {"twoshot_reducescatter", "algo", 4, 2}, {"twoshot_reducescatter", "algo", 8, 2},
                        {"direct_broadcast", "algo", 4, 3},      {"direct_broadcast", "algo", 8, 7},
                        {"scatter_broadcast", "hpds", 4, 4},     {"scatter_broadcast", "hpds", 8, 12},
                        {"direct_reduce", "algo", 4, 3},         {"direct_reduce", "algo", 8, 7},
                        {"scatter_reduce", "hpds", 4, 6},        {"scatter_reduce", "hpds", 8, 14}};
  for (const Want& w : wants) {
    SCOPED_TRACE(std::string(w.name) + " " + w.sched + " R=" + std::to_string(w.R));
    const Collective c = algorithm_collective(w.name, w.R);
    const Plan p = make_plan(c, w.R, w.name, "Simple", 1, false, 0, kDefaultFifoDepth, w.sched);
    EXPECT_EQ(p.max_tbs_per_rank(), w.tbs);
  }
}

}  // namespace
}  // namespace weft
