// The network FIFOs' region (net/net_layout.hpp): which peers cross the network, that
// every rank's areas are disjoint, inside its region and where its peers expect them, and
// the limits a proxy imposes; and the plan builder's view of emulated nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "exec/plan_lowering.hpp"
#include "net/node_layout.hpp"
#include "net/net_layout.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "tune/selection_table.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

NetLayout layout_for(int ranks, int nodes, int K = 3, uint32_t depth = 4, uint32_t slot = 4096) {
  NetLayout l;
  l.connections = K;
  l.depth = depth;
  l.slot_bytes = slot;
  l.node_of_rank = net::node_layout(std::vector<uint64_t>(static_cast<size_t>(ranks), 7), nodes).node_of_rank;
  return l;
}

TEST(NetLayout, PeersOnOtherNodes) {
  NetLayout l = layout_for(4, 2);
  EXPECT_EQ(l.cross_peers(0), (std::vector<int>{2, 3}));
  EXPECT_EQ(l.cross_peers(3), (std::vector<int>{0, 1}));
  EXPECT_EQ(l.cross_index(0, 2), 0);
  EXPECT_EQ(l.cross_index(0, 3), 1);
  EXPECT_EQ(l.cross_index(0, 1), -1);
  EXPECT_EQ(l.cross_index(2, 2), -1);
  EXPECT_EQ(l.channels(0), 2 * 3 * 2);
  NetLayout two = layout_for(2, 2);
  EXPECT_EQ(two.cross_peers(0), (std::vector<int>{1}));
  EXPECT_EQ(two.cross_peers(1), (std::vector<int>{0}));
  NetLayout one = layout_for(4, 1);
  EXPECT_TRUE(one.cross_peers(0).empty());
  EXPECT_EQ(one.total(0), 0u);
  EXPECT_THROW(one.posted(0, 1, 0), Error);
}

// Every counter, staging area and slot area of every rank: disjoint, inside the region,
// counters on their own 64 bytes and slots 16-byte aligned; the offsets a sender computes for
// its peer's slots and counters are the ones the peer uses.
TEST(NetLayout, AreasAreDisjointAndAgreeBetweenPeers) {
  for (auto [R, N] : {std::pair{2, 2}, std::pair{4, 2}, std::pair{5, 2}, std::pair{6, 3}, std::pair{4, 4}}) {
    NetLayout l = layout_for(R, N);
    const uint64_t fifo = uint64_t{l.depth} * l.slot_bytes;
    for (int r = 0; r < R; ++r) {
      std::vector<std::pair<uint64_t, uint64_t>> areas;
      for (int q : l.cross_peers(r))
        for (int k = 0; k < l.connections; ++k) {
          areas.push_back({l.posted(r, q, k), 8});
          areas.push_back({l.acked(r, q, k), 8});
          EXPECT_EQ(l.posted(r, q, k) % 64, 0u);
          EXPECT_EQ(l.acked(r, q, k) % 64, 0u);
          EXPECT_LE(l.acked(r, q, k) + 64, l.counter_bytes(r));
          areas.push_back({l.out(r, q, k), fifo});
          areas.push_back({l.in(r, q, k), fifo});
          EXPECT_EQ(l.out(r, q, k) % 16, 0u);
          EXPECT_EQ(l.in(r, q, k) % 16, 0u);
          // What r's send end puts into, and the counters r's proxy writes, lie in q's region.
          EXPECT_LE(l.in(q, r, k) + fifo, l.total(q));
          EXPECT_LE(l.posted(q, r, k) + 8, l.counter_bytes(q));
        }
      std::sort(areas.begin(), areas.end());
      for (size_t i = 0; i < areas.size(); ++i) {
        EXPECT_LE(areas[i].first + areas[i].second, l.total(r)) << "R=" << R << " rank " << r;
        if (i + 1 < areas.size()) {
          EXPECT_LE(areas[i].first + areas[i].second, areas[i + 1].first) << "R=" << R << " rank " << r << " area " << i;
        }
      }
    }
  }
}

TEST(NetLayout, LimitsOfAProxyAreClearErrors) {
  NetLayout many = layout_for(8, 2, 200);
  try {
    many.check(0, 1024);
    ADD_FAILURE() << "1600 channels accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("lower WEFT_CONNECTIONS"), std::string::npos) << e.what();
  }
  NetLayout big = layout_for(4, 2, 32, 64, 1u << 20);
  try {
    big.check(0, 1024);
    ADD_FAILURE() << big.total(0) << " bytes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 GiB"), std::string::npos) << e.what();
  }
  // The defaults (32 connections, depth 4, 512 KiB) for 4 ranks as 2 nodes fit.
  EXPECT_NO_THROW(layout_for(4, 2, 32, 4, 512u << 10).check(0, 1024));
}

// The plan builder sees the emulated nodes: compiled algorithms are built for N nodes of
// nranks / N GPUs (GPUPerNode), and WEFT_GPUS_PER_NODE still wins where given.
TEST(NetLayout, PlanBuilderSeesEmulatedNodes) {
  unsetenv("WEFT_GPUS_PER_NODE");
  setenv("WEFT_EMULATE_NODES", "2", 1);
  Plan p = make_plan(Collective::AllReduce, 4, "hm_allreduce", "Simple", 1, false, 0);
  EXPECT_EQ(p.topology, "h200-emulated-2x2");
  EXPECT_NO_THROW(check_plan_on_emulator(lower_plan(p, 4, 32), 4));
  Plan ring = make_plan(Collective::AllGather, 4, "ring_allgather", "Simple", 1, false, 0);
  EXPECT_EQ(ring.topology, "h200-emulated-2x2");
  // Three nodes do not divide four ranks: one node, as without emulation.
  setenv("WEFT_EMULATE_NODES", "3", 1);
  EXPECT_EQ(make_plan(Collective::AllReduce, 4, "hm_allreduce", "Simple", 1, false, 0).topology, "h200-1x4");
  unsetenv("WEFT_EMULATE_NODES");
  EXPECT_EQ(make_plan(Collective::AllReduce, 4, "hm_allreduce", "Simple", 1, false, 0).topology, "h200-1x4");
}

// What a communicator over emulated nodes runs: the default table's plan (never the
// one-shot kernel) with Simple, compiled for 2 nodes x 2 (and 2 x 1), for every collective,
// size and placement: every such plan builds and passes the emulator.
TEST(NetLayout, EveryDefaultPlanBuildsForEmulatedNodes) {
  unsetenv("WEFT_GPUS_PER_NODE");
  setenv("WEFT_EMULATE_NODES", "2", 1);
  for (int R : {2, 4})
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::AllToAll,
                         Collective::Broadcast, Collective::Reduce})
      for (uint64_t bytes = 8; bytes <= (1ull << 30); bytes *= 8)
        for (bool in_place : {false, true}) {
          Choice ch = default_selection_table().choose(c, bytes, R, in_place, true);
          try {
            Plan p = make_plan(c, R, ch.algorithm, "Simple", std::min(ch.instances, 32), in_place, 0, 4, ch.scheduler,
                               ch.allocator);
            check_plan_on_emulator(lower_plan(p, R, 32), 4);
          } catch (const Error& e) {
            ADD_FAILURE() << to_string(c) << " R=" << R << " " << bytes << " B " << ch.algorithm << ": " << e.what();
          }
        }
  unsetenv("WEFT_EMULATE_NODES");
}

}  // namespace
}  // namespace weft
