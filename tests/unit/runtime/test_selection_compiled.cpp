// Where the default selection table runs a compiled plan instead of a hand-built one, the
// compiled plan is no worse by every figure the runtime and the simulator give: thread
// blocks and connections per rank no more, simulated time no longer (H200 node, the
// runtime's micro-batch sizing), and it passes the CPU emulator. These are the rows
// docs/runtime.md lists; the test keeps the claim true as the compiler changes.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/topology_io.hpp"
#include "exec/plan_lowering.hpp"
#include "runtime/plan_source.hpp"
#include "runtime/selection.hpp"
#include "sim/simulator.hpp"

namespace weft {
namespace {

struct Figures {
  int tbs = 0, conns = 0;  ///< the busiest rank's
  double us = 0;           ///< simulated time of one call
  int microbatches = 0;
};

Figures figures(Collective c, int R, const Choice& ch, bool in_place, uint64_t bytes) {
  Plan p = make_plan(c, R, ch.algorithm, ch.protocol, ch.instances, in_place, 0, kDefaultFifoDepth, ch.scheduler,
                     ch.allocator);
  LoweredPlan lp = lower_plan(p, R, 32);
  check_plan_on_emulator(lp, kDefaultFifoDepth);
  Figures f;
  for (const LoweredRank& lr : lp.ranks) {
    f.tbs = std::max(f.tbs, static_cast<int>(lr.tbs.size()));
    f.conns = std::max(f.conns, static_cast<int>(lr.conns.size()));
  }
  Topology t = topology_preset("h200-1x8");
  t.gpus_per_node = R;
  t.name = "h200-1x" + std::to_string(R);
  sim::SimOptions o;
  o.bytes = bytes;
  o.runtime_microbatch = true;
  o.staging_slot_bytes = ch.protocol == "LL" ? 32 << 10 : 512 << 10;  // the runtime's default slots
  sim::SimReport rep = sim::simulate(p, t, o);
  f.us = rep.time_us;
  f.microbatches = rep.microbatches;
  return f;
}

/// Compares the default table's compiled choice with the hand-built plan it replaced.
void expect_no_worse(Collective c, int R, uint64_t bytes, bool in_place, bool same_shape) {
  Choice ch = table_choice(c, bytes, R, in_place);
  SCOPED_TRACE(std::string(to_string(c)) + " " + std::to_string(bytes) + " B on " + std::to_string(R) + " ranks" +
               (in_place ? " in place: " : ": ") + describe_choice(ch));
  ASSERT_FALSE(is_builtin_plan_name(ch.algorithm));
  Choice hand = ch;
  hand.algorithm = "allpairs";
  Figures k = figures(c, R, ch, in_place, bytes), h = figures(c, R, hand, in_place, bytes);
  EXPECT_LE(k.tbs, h.tbs);
  EXPECT_LE(k.conns, h.conns);
  EXPECT_LE(k.us, h.us * 1.005);
  if (same_shape) {
    EXPECT_EQ(k.tbs, h.tbs);
    EXPECT_EQ(k.conns, h.conns);
    EXPECT_EQ(k.microbatches, h.microbatches);
    EXPECT_NEAR(k.us, h.us, h.us * 0.005);
  }
}

TEST(SelectionCompiled, AllGatherOnTwoRanksIsTheHandBuiltAllPairs) {
  // Out of place up to 1 MiB and in place up to 1 MiB the one-shot kernel runs; the plans
  // run past it, and whenever WEFT_PROTO=Simple or WEFT_ALGO sends small calls to plans.
  for (uint64_t b : {2ull << 20, 3ull << 20, 16ull << 20, 256ull << 20, 1ull << 30})
    for (bool in_place : {false, true}) expect_no_worse(Collective::AllGather, 2, b, in_place, true);
  // The LL rows (reached through WEFT_PROTO or WEFT_ALGO): every instance count.
  for (uint64_t b = 8 << 10; b <= (128 << 10); b += 24 << 10)
    for (bool in_place : {false, true}) {
      Choice ch = default_selection_table().choose(Collective::AllGather, b, 2, in_place, true);
      EXPECT_EQ(ch.algorithm, "allpairs_allgather");
      Choice hand = ch;
      hand.algorithm = "allpairs";
      Figures k = figures(Collective::AllGather, 2, ch, in_place, b), h = figures(Collective::AllGather, 2, hand, in_place, b);
      EXPECT_EQ(k.tbs, h.tbs) << b;
      EXPECT_EQ(k.conns, h.conns) << b;
      EXPECT_NEAR(k.us, h.us, h.us * 0.005) << b;
    }
}

TEST(SelectionCompiled, LargeOutOfPlaceAllToAllOnFourToEightRanks) {
  for (int R = 4; R <= 8; ++R)
    for (uint64_t b : {768ull << 10, 1ull << 20, 4ull << 20, 16ull << 20, 256ull << 20})
      expect_no_worse(Collective::AllToAll, R, b, false, false);
  // In place the table keeps allpairs: the compiled plan stages through scratch with up to
  // three times the blocks and runs up to 2.7 times longer in the simulator.
  EXPECT_EQ(table_choice(Collective::AllToAll, 16 << 20, 8, true).algorithm, "allpairs");
}

}  // namespace
}  // namespace weft
