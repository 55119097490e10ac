// Broadcast and Reduce at a bulk size with every mid-size algorithm forced (WEFT_ALGO), as
// the runtime builds their plans (make_plan with the selection table's 24 instances under
// the runtime's thread-block rule): the root runs its call's placement, every other rank
// the out-of-place plan (runtime/collectives.cpp), so the root's in-place plan must send and
// receive the out-of-place plan's messages (plan/root_wire.hpp). The mixed plan (the root's
// rank from one, the others from the other) runs on the CPU emulator with the runtime's
// geometry for 1,048,579 float32-sized elements (512 KiB Simple slots, 32 KiB LL data,
// FIFOs of 4); before the fix direct_broadcast in place drove 24 instances at the root
// against its peers' 7 and hung (gpu_algo_direct_broadcast_4).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exec/plan_emulator.hpp"
#include "exec/plan_lowering.hpp"
#include "plan/plan_source.hpp"
#include "plan/root_wire.hpp"
#include "util/error.hpp"
#include "weft/weft.h"

namespace weft {
namespace {

constexpr int kRanks = 4;
constexpr uint64_t kCount = 1048579;

/// The root's rank from `root_plan`, every other rank from `others`.
Plan mixed(const Plan& root_plan, const Plan& others, int root) {
  Plan m = others;
  m.ranks[static_cast<size_t>(root)] = root_plan.ranks[static_cast<size_t>(root)];
  return m;
}

/// "" when the mixed plan runs to the end on the emulator with the runtime's geometry; the
/// root's buffers alias when it runs in place, every rank's with `all_in_place`.
std::string run_mixed(const Plan& m, bool root_in_place, int root, exec::Protocol proto, bool all_in_place = false) {
  try {
    const LoweredPlan lp = lower_plan(m, kRanks, 32);
    const uint64_t cap = proto == exec::kLL ? (64 << 10) / 2 : 512 << 10;
    const exec::Geometry g = make_geometry(lp, kCount, 4, cap, 0, proto, 1, 64 << 10);
    std::vector<std::vector<uint8_t>> mem(3 * kRanks);
    std::vector<EmuBuffers> bufs(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (int b = 0; b < 3; ++b) {
        auto& v = mem[static_cast<size_t>(3 * r + b)];
        v.assign((static_cast<size_t>(lp.groups[b]) * g.n + static_cast<size_t>(lp.chunks[b]) * g.stride) * 4 + 64, 0);
        bufs[static_cast<size_t>(r)].buf[b] = v.data();
      }
      if ((r == root && root_in_place) || all_in_place) bufs[static_cast<size_t>(r)].buf[0] = bufs[static_cast<size_t>(r)].buf[1];
    }
    EmuResult res = emulate(lp, g, 4, bufs, weftInt32, weftSum, proto);
    return res.ok ? "" : res.error;
  } catch (const Error& e) {
    return e.what();
  }
}

class ForcedBulk : public ::testing::TestWithParam<const char*> {};

TEST_P(ForcedBulk, RootInPlaceMatchesTheOtherRanksOutOfPlacePlan) {
  const std::string name = GetParam();
  const Collective c = algorithm_collective(name, kRanks);
  ASSERT_TRUE(c == Collective::Broadcast || c == Collective::Reduce);
  for (const char* proto : {"Simple", "LL"})
    for (int root = 0; root < kRanks; ++root) {
      SCOPED_TRACE(name + " " + proto + " root " + std::to_string(root));
      const Plan in = make_plan(c, kRanks, name, proto, 24, true, root, 4, "hpds", "state");
      const Plan out = make_plan(c, kRanks, name, proto, 24, false, root, 4, "hpds", "state");
      EXPECT_EQ(root_wire_difference(in, out, root), "");
      const exec::Protocol pr = std::string(proto) == "LL" ? exec::kLL : exec::kSimple;
      EXPECT_EQ(run_mixed(mixed(in, out, root), true, root, pr), "");
      EXPECT_EQ(run_mixed(out, false, root, pr), "");
    }
}

INSTANTIATE_TEST_SUITE_P(MidSize, ForcedBulk,
                         ::testing::Values("direct_broadcast", "scatter_broadcast", "direct_reduce", "scatter_reduce"));

/// The control (these passed on 4 H200 today): every mid-size algorithm, both placements on
/// every rank, every root, at the same size and geometry.
TEST(ForcedBulkControl, EveryMidSizeAlgorithmRunsAtTheRuntimeGeometry) {
  for (const char* name : {"direct_broadcast", "scatter_broadcast", "direct_reduce", "scatter_reduce",
                           "twoshot_allreduce", "twoshot_reducescatter"}) {
    const Collective c = algorithm_collective(name, kRanks);
    const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
    for (bool in_place : {false, true})
      for (int root = 0; root < (rooted ? kRanks : 1); ++root)
        for (const char* proto : {"Simple", "LL"}) {
          SCOPED_TRACE(std::string(name) + " " + proto + (in_place ? " in place" : " out of place") + " root " +
                       std::to_string(root));
          const Plan p = make_plan(c, kRanks, name, proto, 24, in_place, root, 4, "hpds", "state");
          // Every rank in place only where the collective's buffers alias alike on each
          // (AllReduce); ReduceScatter's in-place input is the output's group, left to
          // check_plan_on_emulator (test_midsize_algorithms).
          if (c == Collective::ReduceScatter && in_place) continue;
          const exec::Protocol pr = std::string(proto) == "LL" ? exec::kLL : exec::kSimple;
          EXPECT_EQ(run_mixed(p, in_place, root, pr, in_place && !rooted), "");
        }
  }
}

/// The comparison itself: a plan against itself agrees; fewer instances at the root do not.
TEST(RootWire, NamesTheFirstDifference) {
  const Plan a = make_plan(Collective::Broadcast, kRanks, "direct_broadcast", "Simple", 4, false, 1, 4, "hpds", "state");
  EXPECT_EQ(root_wire_difference(a, a, 1), "");
  EXPECT_EQ(max_message_instances(a), 4);
  const Plan b = make_plan(Collective::Broadcast, kRanks, "direct_broadcast", "Simple", 2, false, 1, 4, "hpds", "state");
  EXPECT_NE(root_wire_difference(b, a, 1), "");
}

}  // namespace
}  // namespace weft
