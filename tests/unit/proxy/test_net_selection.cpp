// The multi-node selection table (selection/multi-node.json, tune/net_selection.hpp): what a
// communicator spanning nodes runs per collective, rank count and size; its plans compile for
// the nodes (HM with GPUPerNode = the node size, links between nodes port-net), and HM takes no
// more thread blocks per rank than the ring would at the same size.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/plan_check.hpp"
#include "exec/plan_lowering.hpp"
#include "tune/net_selection.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

TEST(NetSelection, PicksPerSizeAndRanks) {
  const SelectionTable& t = multi_node_selection_table();
  EXPECT_EQ(t.choose(Collective::AllReduce, 64 << 10, 2).algorithm, "allpairs");
  EXPECT_EQ(t.choose(Collective::AllReduce, 64 << 20, 2).algorithm, "ring_allreduce");
  EXPECT_EQ(t.choose(Collective::AllReduce, 64 << 10, 4).algorithm, "allpairs");
  EXPECT_EQ(t.choose(Collective::AllReduce, 64 << 20, 4).algorithm, "hm_allreduce");
  EXPECT_EQ(t.choose(Collective::AllGather, 64 << 20, 2).algorithm, "allpairs_allgather");
  EXPECT_EQ(t.choose(Collective::AllGather, 64 << 10, 4).algorithm, "peerwise_allgather");
  EXPECT_EQ(t.choose(Collective::AllGather, 64 << 20, 4).algorithm, "hm_allgather");
  // Every call has a row, and none runs the one-shot kernel or a packet protocol (neither
  // crosses the network).
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
                       Collective::Reduce, Collective::AllToAll})
    for (int ranks = 2; ranks <= 16; ranks *= 2)
      for (uint64_t bytes = 1; bytes <= (uint64_t{4} << 30); bytes *= 8)
        for (bool in_place : {false, true}) {
          if ((c == Collective::Broadcast || c == Collective::Reduce) && in_place) continue;
          Choice ch = t.choose(c, bytes, ranks, in_place);
          EXPECT_EQ(ch.protocol, "Simple") << to_string(c) << " " << bytes;
          EXPECT_NE(ch.algorithm, "oneshot");
        }
}

TEST(NetSelection, WeftSelectionReplacesIt) {
  unsetenv("WEFT_SELECTION");
  EXPECT_EQ(multi_node_table_for_environment()->origin, "(built-in selection/multi-node.json)");
  setenv("WEFT_SELECTION", (std::string(WEFT_TEST_DATA_DIR) + "/selection/default.json").c_str(), 1);
  EXPECT_NE(multi_node_table_for_environment()->origin.find("default.json"), std::string::npos);
  unsetenv("WEFT_SELECTION");
}

/// 4 ranks as 2 nodes of 2: the table's HM plans compile for those nodes, cross them only
/// between the two halves, and take no more thread blocks per rank than the ring.
TEST(NetSelection, HierarchicalPlansFitTheNodesWithNoMoreBlocksThanTheRing) {
  const SelectionTable& t = multi_node_selection_table();
  const std::vector<int> nodes = {0, 0, 1, 1};
  for (uint64_t bytes : {uint64_t{16} << 20, uint64_t{256} << 20}) {
    for (auto [c, ring] : {std::pair{Collective::AllReduce, "ring_allreduce"}, std::pair{Collective::AllGather, "ring_allgather"}}) {
      const Choice hm = t.choose(c, bytes, 4);
      ASSERT_EQ(hm.algorithm.rfind("hm_", 0), 0u) << hm.algorithm;
      const Plan p = make_plan(c, 4, hm.algorithm, hm.protocol, hm.instances, false, 0, 4, hm.scheduler, hm.allocator, nodes);
      // The default table's ring at this size, as a single node would run it.
      const Choice rc = default_json_table().choose(c, bytes, 4, false, true);  // default.json's rule, not a measured table
      ASSERT_EQ(rc.algorithm, ring);
      const Plan r = make_plan(c, 4, rc.algorithm, rc.protocol, rc.instances, false, 0, 4, rc.scheduler, rc.allocator, nodes);
      std::printf("%s x%d: %d blocks per rank, %s x%d: %d, %zu links\n", hm.algorithm.c_str(), hm.instances, p.max_tbs_per_rank(), ring, rc.instances, r.max_tbs_per_rank(), p.links.size());
      EXPECT_LE(p.max_tbs_per_rank(), r.max_tbs_per_rank())
          << hm.algorithm << " x" << hm.instances << " at " << bytes << " bytes vs " << ring << " x" << rc.instances;
      int crossing = 0;
      for (const PlanLink& l : p.links) {
        const bool across = nodes[static_cast<size_t>(l.src)] != nodes[static_cast<size_t>(l.dst)];
        crossing += across;
        EXPECT_EQ(l.channel == ChannelKind::PortNetwork, across) << "link " << l.src << " -> " << l.dst;
      }
      EXPECT_GT(crossing, 0);
      // One ring per local index across the nodes: rank r talks across only to r + 2 and r - 2.
      for (const PlanLink& l : p.links)
        if (nodes[static_cast<size_t>(l.src)] != nodes[static_cast<size_t>(l.dst)]) EXPECT_EQ((l.src - l.dst + 4) % 2, 0);
    }
  }
}

/// The HM plans as a communicator of 4 ranks as 2 nodes compiles them, in place and out of
/// place, run on the plan emulator (every rank's result against the reference, exec/).
TEST(NetSelection, HierarchicalPlansAreCorrectOnTheEmulator) {
  const std::vector<int> nodes = {0, 0, 1, 1};
  for (const char* algo : {"hm_allreduce", "hm_allgather"})
    for (bool in_place : {false, true}) {
      const Collective c = std::string(algo) == "hm_allreduce" ? Collective::AllReduce : Collective::AllGather;
      const Plan p = make_plan(c, 4, algo, "Simple", 2, in_place, 0, 4, "hpds", "state", nodes);
      EXPECT_NO_THROW(check_plan_on_emulator(lower_plan(p, 4, 32), 4)) << algo << (in_place ? " in place" : "");
    }
}

}  // namespace
}  // namespace weft
