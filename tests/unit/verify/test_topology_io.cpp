// Topology presets and files: presets validate, every file under topologies/ is its
// preset and round-trips, malformed files give an error naming the field and the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The message of the weft::Error that `f` throws (fails the test if none).
template <class F>
std::string error_of(F f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected an error";
  return {};
}

TEST(TopologyPresets, H200) {
  for (int g : {2, 4, 8}) {
    Topology t = topology_preset("h200-1x" + std::to_string(g));
    EXPECT_NO_THROW(t.validate());
    EXPECT_EQ(t.num_gpus(), g);
    EXPECT_EQ(t.nics_per_node, 0);
    EXPECT_EQ(t.nvlink_bandwidth_GBps, 370);
    EXPECT_EQ(t.tb_copy_GBps, 20);
    EXPECT_EQ(t.hbm_bandwidth_GBps, 4300);
  }
}

TEST(TopologyPresets, A100Family) {
  for (int n : {1, 2, 3, 4, 16, 128})
    for (int g : {1, 2, 4, 8}) {
      std::string name = "a100-" + std::to_string(n) + "x" + std::to_string(g);
      Topology t = topology_preset(name);
      EXPECT_NO_THROW(t.validate()) << name;
      EXPECT_EQ(t.name, name);
      EXPECT_EQ(t.num_gpus(), n * g);
      EXPECT_EQ(t.nics_per_node, g == 1 ? 1 : g / 2) << name;
      for (int i = 0; i < g; ++i) EXPECT_EQ(t.nic_of_gpu[i], i / 2);
      EXPECT_EQ(t.nic_bandwidth_GBps, 25);  // 200 Gb/s
      EXPECT_EQ(t.nvlink_bandwidth_GBps, 300);
      EXPECT_GE(t.nic_latency_us, 2.5 * t.nvlink_latency_us);     // paper 001: inter >= 2.5x intra
      EXPECT_DOUBLE_EQ(4 * t.tb_net_GBps, t.nic_bandwidth_GBps);  // Fig. 4: four TBs fill a NIC
    }
  // Two GPUs share a NIC; the paper's 4x8 cluster has four NICs per node.
  Topology t = topology_preset("a100-4x8");
  EXPECT_EQ(t.nics_per_node, 4);
  EXPECT_EQ(t.nic_of(0), t.nic_of(1));
  EXPECT_NE(t.nic_of(1), t.nic_of(2));
  EXPECT_EQ(topology_preset("a100-128x8").num_gpus(), 1024);
}

TEST(TopologyPresets, UnknownNamesListThePresets) {
  for (const char* bad : {"a100-2x3", "h200-2x8", "h200-1x16", "tpu-1x1", "a100-0x8", "a100-x8", "a100-2x", "a100-2x4x",
                          "a100--2x4", "a100-99999999999x8", "a100-200000x8", ""}) {
    std::string e = error_of([&] { topology_preset(bad); }, ErrorCode::InvalidArgument);
    EXPECT_NE(e.find("unknown topology preset '" + std::string(bad) + "'"), std::string::npos) << e;
    EXPECT_NE(e.find("h200-1x2, h200-1x4, h200-1x8, a100-NxG"), std::string::npos) << e;
  }
}

TEST(TopologyFiles, EveryFileIsItsPresetAndRoundTrips) {
  fs::path dir = fs::path(WEFT_TEST_DATA_DIR) / "topologies";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    std::string text = read(entry.path());
    Topology t = topology_from_json(text, entry.path().string());
    EXPECT_NO_THROW(t.validate());
    EXPECT_EQ(t.name, entry.path().stem().string());
    // The file is exactly what the preset generator writes (regenerate it if this fails).
    EXPECT_EQ(t, topology_preset(t.name)) << entry.path();
    EXPECT_EQ(topology_to_json(t), text) << entry.path();
    EXPECT_EQ(topology_from_json(topology_to_json(t), "again"), t);
    EXPECT_EQ(load_topology(entry.path().string()), t);
  }
  EXPECT_EQ(files, 7);  // h200-1x{2,4,8}, a100-{2x4,2x8,4x4,4x8}
}

TEST(TopologyFiles, RoundTripFieldByField) {
  Topology t = topology_preset("a100-2x8");
  t.description = "quotes \" and \\ and unicode \xc3\xa9";
  t.nvlink_latency_us = 0.1 + 0.2;  // not exactly representable in decimal
  t.contention_gamma = 1e-300;
  t.rack_uplink_bandwidth_GBps = 12.5;
  Topology u = topology_from_json(topology_to_json(t), "mem");
  EXPECT_EQ(u.name, t.name);
  EXPECT_EQ(u.description, t.description);
  EXPECT_EQ(u.gpu, t.gpu);
  EXPECT_EQ(u.nodes, t.nodes);
  EXPECT_EQ(u.gpus_per_node, t.gpus_per_node);
  EXPECT_EQ(u.nics_per_node, t.nics_per_node);
  EXPECT_EQ(u.nic_of_gpu, t.nic_of_gpu);
  EXPECT_EQ(u.nodes_per_rack, t.nodes_per_rack);
  EXPECT_EQ(u.nvlink_bandwidth_GBps, t.nvlink_bandwidth_GBps);
  EXPECT_EQ(u.nvlink_latency_us, t.nvlink_latency_us);
  EXPECT_EQ(u.nic_bandwidth_GBps, t.nic_bandwidth_GBps);
  EXPECT_EQ(u.nic_latency_us, t.nic_latency_us);
  EXPECT_EQ(u.aggregation_latency_us, t.aggregation_latency_us);
  EXPECT_EQ(u.rack_uplink_bandwidth_GBps, t.rack_uplink_bandwidth_GBps);
  EXPECT_EQ(u.tb_copy_GBps, t.tb_copy_GBps);
  EXPECT_EQ(u.tb_net_GBps, t.tb_net_GBps);
  EXPECT_EQ(u.hbm_bandwidth_GBps, t.hbm_bandwidth_GBps);
  EXPECT_EQ(u.primitive_overhead_us, t.primitive_overhead_us);
  EXPECT_EQ(u.contention_gamma, t.contention_gamma);
  EXPECT_EQ(u, t);
}

TEST(TopologyFiles, DescriptionIsOptional) {
  std::string text = topology_to_json(topology_preset("h200-1x2"));
  size_t at = text.find("  \"description\"");
  text.erase(at, text.find('\n', at) + 1 - at);
  Topology t = topology_from_json(text, "x.json");
  EXPECT_EQ(t.description, "");
  EXPECT_EQ(t.num_gpus(), 2);
}

/// The preset h200-1x2's file text with `from` replaced by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = topology_to_json(topology_preset("a100-2x4"));
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(TopologyFiles, MalformedFilesNameTheFieldAndTheFile) {
  struct Case {
    std::string from, to, message;
    ErrorCode code = ErrorCode::Parse;
  };
  const Case cases[] = {
      {"\"nodes\": 2", "\"nodes\": \"2\"", "bad.json: field 'nodes' must be an integer"},
      {"\"nodes\": 2", "\"nodes\": 2.5", "bad.json: field 'nodes' must be an integer"},
      {"\"nodes\": 2", "\"nodes\": 4294967296", "bad.json: field 'nodes' is out of the range of a 32-bit integer"},
      {"\"nodes\": 2,", "", "bad.json: missing field 'nodes'"},
      {"\"nodes\": 2", "\"nodes\": 2, \"node\": 2", "bad.json: unknown field 'node'"},
      {"\"tb_copy_GBps\": 15.0", "\"tb_copy_GBps\": null", "bad.json: field 'tb_copy_GBps' must be a number"},
      {"\"gpu\": \"a100\"", "\"gpu\": 100", "bad.json: field 'gpu' must be a string"},
      {"[0,0,1,1]", "[0,0,1,\"1\"]", "bad.json: field 'nic_of_gpu' has element 3 that must be an integer"},
      {"[0,0,1,1]", "3", "bad.json: field 'nic_of_gpu' must be an array of integers"},
      {"\"version\": 1", "\"version\": 2", "bad.json: field 'version' must be 1"},
      {"\"format\": \"weft-topology\"", "\"format\": \"msccl\"", "bad.json: field 'format' must be \"weft-topology\""},
      {"[0,0,1,1]", "[0,0,1]", "bad.json: topology a100-2x4: nic_of_gpu has 3 entries, expected gpus_per_node = 4",
       ErrorCode::InvalidArgument},
      {"\"nodes_per_rack\": 2", "\"nodes_per_rack\": 0", "bad.json: topology a100-2x4: nodes_per_rack must be positive",
       ErrorCode::InvalidArgument},
      {"\"nodes\": 2,", "\"nodes\": 2,,", "bad.json:7:14: the topology file is not valid JSON"},
  };
  for (const Case& c : cases) {
    std::string text = edited(c.from, c.to);
    std::string e = error_of([&] { topology_from_json(text, "bad.json"); }, c.code);
    EXPECT_EQ(e.find(c.message), 0u) << "got: " << e << "\nwant: " << c.message;
  }
  EXPECT_EQ(error_of([] { topology_from_json("[1, 2]", "a.json"); }, ErrorCode::Parse),
            "a.json: a topology file must hold one JSON object");
  std::string big = error_of([] { topology_from_json("{\"nodes\": 1e99999}", "c.json"); }, ErrorCode::Parse);
  EXPECT_NE(big.find("c.json: the topology file is not valid JSON"), std::string::npos) << big;
  std::string e = error_of([] { topology_from_json("{\n  \"format\": \n", "b.json"); }, ErrorCode::Parse);
  EXPECT_EQ(e.find("b.json:3:1: the topology file is not valid JSON"), 0u) << e;
}

TEST(TopologyFiles, LoadTopologyTakesANameOrAPath) {
  EXPECT_EQ(load_topology("a100-4x8"), topology_preset("a100-4x8"));
  std::string e = error_of([] { load_topology("no/such/file.json"); }, ErrorCode::InvalidArgument);
  EXPECT_EQ(e, "cannot open topology file 'no/such/file.json': no such file");
  e = error_of([] { load_topology("a100-4x3"); }, ErrorCode::InvalidArgument);
  EXPECT_NE(e.find("unknown topology preset 'a100-4x3'"), std::string::npos);
}

}  // namespace
}  // namespace weft
