// The presets' cost figures as the simulator sees them (docs/cost-model.md lists them), and
// topology files written before tb_local_GBps existed.
#include <gtest/gtest.h>

#include "ir/topology_io.hpp"
#include "sim/cost_model.hpp"
#include "util/error.hpp"

namespace weft::sim {
namespace {

TEST(Presets, CostFiguresAreTheDocumentedOnes) {
  CostModel a = CostModel::from_topology(topology_preset("a100-2x8"));
  EXPECT_DOUBLE_EQ(a.tb_copy_GBps, 15);
  EXPECT_DOUBLE_EQ(a.tb_net_GBps, 6.25);
  EXPECT_DOUBLE_EQ(a.tb_local_GBps, 60);
  EXPECT_DOUBLE_EQ(a.hbm_GBps, 1800);
  EXPECT_DOUBLE_EQ(a.alpha_us, 1);
  EXPECT_DOUBLE_EQ(a.gamma, 0.15);
  // Fig. 4's shape: eight blocks on a NIC built for four keep about 87% of it.
  EXPECT_NEAR(a.efficiency(2.0), 0.87, 0.01);
  CostModel h = CostModel::from_topology(topology_preset("h200-1x8"));
  EXPECT_DOUBLE_EQ(h.tb_copy_GBps, 20);
  EXPECT_DOUBLE_EQ(h.tb_local_GBps, 80);
  EXPECT_DOUBLE_EQ(h.hbm_GBps, 4300);
}

TEST(Presets, FilesWithoutTheLocalRateGetTheDefault) {
  std::string text = topology_to_json(topology_preset("h200-1x2"));
  const size_t at = text.find(",\n  \"tb_local_GBps\"");
  ASSERT_NE(at, std::string::npos);
  text = text.substr(0, at) + "\n}\n";
  Topology t = topology_from_json(text, "old.json");
  EXPECT_EQ(t.tb_local_GBps, 0);
  EXPECT_DOUBLE_EQ(CostModel::from_topology(t).tb_local_GBps, 4 * t.tb_copy_GBps);
  EXPECT_EQ(topology_from_json(topology_to_json(topology_preset("a100-4x4")), "x.json").tb_local_GBps, 60);
}

TEST(Presets, CostOverridesNameTheField) {
  Topology t = topology_preset("a100-2x4");
  apply_cost_overrides(t, {{"nic_bandwidth_GBps", "50"}, {"contention_gamma", "0"}});
  EXPECT_EQ(t.nic_bandwidth_GBps, 50);
  EXPECT_EQ(t.contention_gamma, 0);
  try {
    apply_cost_overrides(t, {{"nic_bandwidth", "50"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown cost parameter 'nic_bandwidth'"), std::string::npos);
  }
  EXPECT_THROW(apply_cost_overrides(t, {{"tb_copy_GBps", "fast"}}), Error);
  EXPECT_THROW(apply_cost_overrides(t, {{"tb_copy_GBps", "-1"}}), Error);
  EXPECT_THROW(apply_cost_overrides(t, {{"tb_copy_GBps", "0"}}), Error);  // fails validation
}

}  // namespace
}  // namespace weft::sim
