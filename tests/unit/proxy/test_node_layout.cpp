// Nodes of ranks: real hosts, and hosts split by WEFT_EMULATE_NODES.
#include <gtest/gtest.h>

#include <cstdlib>

#include "net/node_layout.hpp"
#include "util/error.hpp"

namespace weft::net {
namespace {

TEST(NodeLayout, HostsAreNodes) {
  NodeLayout l = node_layout({7, 7, 9, 9}, 0);
  EXPECT_EQ(l.node_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(l.nodes, 2);
  EXPECT_FALSE(l.emulated);
  EXPECT_TRUE(l.crosses_network(1, 2));
  EXPECT_FALSE(l.crosses_network(2, 3));
}

TEST(NodeLayout, EmulatedNodesSplitEachHost) {
  NodeLayout l = node_layout({1, 1, 1, 1}, 2);  // 4 ranks as 2 nodes x 2
  EXPECT_EQ(l.node_of_rank, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_TRUE(l.emulated);
  EXPECT_TRUE(l.crosses_network(0, 3));
  EXPECT_FALSE(l.crosses_network(0, 1));
  EXPECT_EQ(node_layout({1, 1, 1}, 2).node_of_rank, (std::vector<int>{0, 0, 1}));
  // Two hosts, interleaved ranks, each split in two.
  EXPECT_EQ(node_layout({5, 6, 5, 6, 5, 6, 5, 6}, 2).node_of_rank, (std::vector<int>{0, 2, 0, 2, 1, 3, 1, 3}));
  EXPECT_EQ(node_layout({1, 1}, 1).nodes, 1);
}

TEST(NodeLayout, TooFewRanksPerHostIsAnError) {
  try {
    node_layout({1, 1, 2}, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("host 1 (with rank 2) has 1"), std::string::npos) << e.what();
  }
}

TEST(NodeLayout, ReadsTheEnvironment) {
  setenv("WEFT_EMULATE_NODES", "4", 1);
  EXPECT_EQ(node_layout({3, 3, 3, 3}).nodes, 4);
  setenv("WEFT_EMULATE_NODES", "-1", 1);
  EXPECT_THROW(node_layout({3, 3}), Error);
  unsetenv("WEFT_EMULATE_NODES");
  EXPECT_EQ(node_layout({3, 3}).nodes, 1);
}

}  // namespace
}  // namespace weft::net
