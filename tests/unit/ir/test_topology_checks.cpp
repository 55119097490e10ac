// Topology checks of issue 19: a GPU naming a NIC that does not exist, and cost figures so
// large or small that the simulator's times would overflow or vanish, are refused with the
// field and its bounds.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "ir/topology.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

std::string error_of(const Topology& t) {
  try {
    t.validate();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(TopologyChecks, AGpuNamingAMissingNicIsRefused) {
  Topology t = topology_preset("h200-1x2");
  ASSERT_EQ(t.nics_per_node, 0);
  EXPECT_EQ(error_of(t), "");
  t.nic_of_gpu = {0, 3};
  EXPECT_EQ(error_of(t), "topology h200-1x2: nic_of_gpu[0] = 0 names a NIC, but nics_per_node is 0 (a topology "
                         "without NICs has nic_of_gpu [])");
  Topology a = topology_preset("a100-2x2");
  a.nic_of_gpu[1] = 3;
  EXPECT_EQ(error_of(a), "topology a100-2x2: nic_of_gpu[1] = 3 is out of range [0, 1)");
  // Through a file, the message names the file first.
  std::string json = topology_to_json(topology_preset("h200-1x2"));
  json.replace(json.find("\"nic_of_gpu\": []"), 16, "\"nic_of_gpu\": [0, 3]");
  try {
    topology_from_json(json, "t.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("t.json: topology h200-1x2: nic_of_gpu[0] = 0 names a NIC", 0), 0u) << e.what();
  }
}

TEST(TopologyChecks, CostFiguresHaveBounds) {
  const Topology base = topology_preset("a100-2x8");
  EXPECT_EQ(error_of(base), "");
  auto with = [&](double Topology::*field, double v) {
    Topology t = base;
    t.*field = v;
    return error_of(t);
  };
  EXPECT_EQ(with(&Topology::tb_copy_GBps, 1e300),
            "topology a100-2x8: tb_copy_GBps = 1e+300 is out of range: it must be between 0.001 and 1e+06 GB/s");
  EXPECT_EQ(with(&Topology::nic_bandwidth_GBps, 1e-9),
            "topology a100-2x8: nic_bandwidth_GBps = 1e-09 is out of range: it must be between 0.001 and 1e+06 GB/s");
  EXPECT_EQ(with(&Topology::primitive_overhead_us, 2e6),
            "topology a100-2x8: primitive_overhead_us = 2e+06 is out of range: it must be between 0 and 1e+06 us");
  EXPECT_EQ(with(&Topology::contention_gamma, 1e4),
            "topology a100-2x8: contention_gamma = 10000 is out of range: it must be between 0 and 1000");
  EXPECT_NE(with(&Topology::hbm_bandwidth_GBps, std::numeric_limits<double>::infinity()), "");
  EXPECT_NE(with(&Topology::nvlink_latency_us, std::numeric_limits<double>::quiet_NaN()), "");
  // The bounds themselves, and 0 where 0 means "unset", are accepted.
  EXPECT_EQ(with(&Topology::tb_copy_GBps, 1e6), "");
  EXPECT_EQ(with(&Topology::tb_copy_GBps, 1e-3), "");
  EXPECT_EQ(with(&Topology::tb_local_GBps, 0), "");
  EXPECT_EQ(with(&Topology::rack_uplink_bandwidth_GBps, 0), "");
  EXPECT_EQ(with(&Topology::nic_latency_us, 1e6), "");
  EXPECT_EQ(with(&Topology::contention_gamma, 1e3), "");
}

}  // namespace
}  // namespace weft
