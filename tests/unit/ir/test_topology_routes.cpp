#include <gtest/gtest.h>

#include "ir/topology.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

Topology two_by_four() {
  Topology t;
  t.name = "test-2x4";
  t.nodes = 2;
  t.gpus_per_node = 4;
  t.nics_per_node = 2;
  t.nic_of_gpu = {0, 0, 1, 1};
  t.nvlink_bandwidth_GBps = 300;
  t.nic_bandwidth_GBps = 25;
  t.tb_copy_GBps = 20;
  t.tb_net_GBps = 8;
  t.hbm_bandwidth_GBps = 2000;
  return t;
}

TEST(Topology, IntraNodeRouteUsesPorts) {
  Topology t = two_by_four();
  ASSERT_NO_THROW(t.validate());
  auto r = t.route(0, 1);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1], (ResourceId{ResourceKind::NvlinkEgress, 0}));
  EXPECT_EQ(r[2], (ResourceId{ResourceKind::NvlinkIngress, 1}));
}

TEST(Topology, GpusSharingANicConflictAcrossNodes) {
  Topology t = two_by_four();
  auto a = t.conflict_resources(0, 4);
  auto b = t.conflict_resources(1, 6);
  EXPECT_EQ(a[0], b[0]);  // GPUs 0 and 1 share NIC 0 of node 0
  EXPECT_NE(a[1], b[1]);
  EXPECT_EQ(t.nic_of(6), 3);
}

TEST(Topology, SelfRouteIsAnError) {
  Topology t = two_by_four();
  EXPECT_THROW(t.route(3, 3), Error);
  EXPECT_THROW(t.route(0, 9), Error);
}

TEST(Topology, ValidateNamesTheField) {
  Topology t = two_by_four();
  t.nic_of_gpu = {0, 0, 1};
  try {
    t.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nic_of_gpu"), std::string::npos);
  }
}

}  // namespace
}  // namespace weft
