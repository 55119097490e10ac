// Topology detection on fake layers: a fake sysfs tree under a temporary root, a fake GPU
// layer and a fake NVLink layer (ir/topology_detect.hpp).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <unistd.h>

#include "ir/topology_detect.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::detect {
namespace {

namespace fs = std::filesystem;

class FakeGpus : public GpuProbe {
 public:
  std::vector<GpuInfo> gpus;
  bool peer = false;
  std::string why;
  bool up = true;
  int count(std::string* w) override {
    if (!up) *w = why;
    return up ? static_cast<int>(gpus.size()) : -1;
  }
  GpuInfo gpu(int i) override { return gpus.at(static_cast<size_t>(i)); }
  bool can_access_peer(int, int) override { return peer; }
};

class FakeNvlink : public NvlinkProbe {
 public:
  std::map<std::string, std::vector<NvlinkEnd>> by_bus;
  bool up = true;
  bool available(std::string* w) override {
    if (!up) *w = "fake NVML absent";
    return up;
  }
  std::optional<std::vector<NvlinkEnd>> links(const std::string& bus, std::string* w) override {
    auto it = by_bus.find(bus);
    if (it == by_bus.end()) {
      *w = "unknown GPU " + bus;
      return std::nullopt;
    }
    return it->second;
  }
};

GpuInfo h100(const std::string& bus) {
  return GpuInfo{"NVIDIA H100 80GB HBM3", 132, int64_t{80} << 30, 9, 0, bus};
}

/// A temporary sysfs root, removed at the end of the test.
class FakeSysfs {
 public:
  FakeSysfs() {
    root_ = fs::temp_directory_path() / text::format("weft_sysfs_%d_%p", static_cast<int>(::getpid()), static_cast<void*>(this));
    fs::create_directories(root_);
  }
  ~FakeSysfs() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  std::string root() const { return root_.string(); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  /// A PCI device at devices/<path> linked from bus/pci/devices/<bus id>.
  fs::path pci(const std::string& path, int numa) {
    const fs::path dev = root_ / "devices" / path;
    fs::create_directories(dev);
    std::ofstream(dev / "numa_node") << numa << "\n";
    fs::create_directories(root_ / "bus/pci/devices");
    fs::create_symlink(dev, root_ / "bus/pci/devices" / dev.filename());
    return dev;
  }
  void ib(const std::string& dev, const fs::path& pcidev, const std::string& rate, const std::string& state = "4: ACTIVE") {
    const fs::path d = root_ / "class/infiniband" / dev;
    fs::create_directories(d / "ports/1");
    fs::create_symlink(pcidev, d / "device");
    std::ofstream(d / "ports/1/rate") << rate << "\n";
    std::ofstream(d / "ports/1/state") << state << "\n";
  }
  void net(const std::string& ifn, const fs::path* pcidev, const std::string& speed) {
    const fs::path d = root_ / "class/net" / ifn;
    fs::create_directories(d);
    if (pcidev != nullptr) fs::create_symlink(*pcidev, d / "device");
    std::ofstream(d / "speed") << speed << "\n";
    std::ofstream(d / "operstate") << "up\n";
  }

 private:
  fs::path root_;
};

MachineInfo run(FakeSysfs& sys, GpuProbe* g, NvlinkProbe* n) {
  DetectOptions o;
  o.sysfs_root = sys.root();
  o.gpus = g;
  o.nvlink = n;
  return detect_machine(o);
}

TEST(TopologyDetect, EightGpusOnNvswitchAreAllToAll) {
  FakeSysfs sys;
  FakeGpus g;
  FakeNvlink nv;
  for (int i = 0; i < 8; ++i) {
    const std::string bus = text::format("0000:%02x:00.0", 0x18 + 0x10 * i);
    g.gpus.push_back(h100(bus));
    // 18 links each to one of four NVSwitches (their own PCI addresses).
    for (int l = 0; l < 18; ++l) nv.by_bus[bus].push_back({NvlinkEnd::Kind::Switch, text::format("0000:%02x:00.0", 0xc0 + l % 4)});
  }
  MachineInfo m = run(sys, &g, &nv);
  ASSERT_EQ(m.gpus.size(), 8u);
  EXPECT_EQ(m.link_source, "nvml");
  for (int a = 0; a < 8; ++a) {
    EXPECT_EQ(m.switch_links[static_cast<size_t>(a)], 18);
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(m.link[static_cast<size_t>(a)][static_cast<size_t>(b)], LinkClass::NvSwitch) << a << "->" << b;
      }
  }
  const Topology t = machine_topology(m);
  EXPECT_EQ(t.name, "detected-h100-1x8");
  EXPECT_EQ(t.gpu, "h100");
  EXPECT_EQ(t.gpus_per_node, 8);
  EXPECT_EQ(t.nics_per_node, 0);
  EXPECT_DOUBLE_EQ(t.nvlink_bandwidth_GBps, 18 * 25.0);  // 18 NVLink 4 links x 25 GB/s per direction
  EXPECT_FALSE(m.estimates.empty());
  const std::string s = machine_summary(m);
  EXPECT_NE(s.find("nvswitch"), std::string::npos) << s;
  EXPECT_NE(s.find("Estimated"), std::string::npos) << s;
}

TEST(TopologyDetect, TwoGpusWithEighteenDirectLinks) {
  FakeSysfs sys;
  FakeGpus g;
  FakeNvlink nv;
  g.gpus = {h100("0000:18:00.0"), h100("00000000:2A:00.0")};  // NVML-style 8-digit domain, upper case
  for (int l = 0; l < 18; ++l) {
    nv.by_bus["0000:18:00.0"].push_back({NvlinkEnd::Kind::Gpu, "0000:2a:00.0"});
    nv.by_bus["0000:2a:00.0"].push_back({NvlinkEnd::Kind::Unknown, "0000:18:00.0"});  // no device type: matched by bus id
  }
  MachineInfo m = run(sys, &g, &nv);
  ASSERT_EQ(m.gpus.size(), 2u);
  EXPECT_EQ(m.gpus[1].pci_bus_id, "0000:2a:00.0");
  EXPECT_EQ(m.nvlinks[0][1], 18);
  EXPECT_EQ(m.nvlinks[1][0], 18);
  EXPECT_EQ(m.switch_links[0], 0);
  EXPECT_EQ(m.link[0][1], LinkClass::Nvlink);
  EXPECT_EQ(m.link[1][0], LinkClass::Nvlink);
  EXPECT_DOUBLE_EQ(machine_topology(m).nvlink_bandwidth_GBps, 450.0);
  EXPECT_NE(machine_summary(m).find("nvlink:18"), std::string::npos);
}

TEST(TopologyDetect, OneVisibleGpuKeepsItsNvlinkPort) {
  FakeSysfs sys;
  FakeGpus g;
  FakeNvlink nv;
  g.gpus = {h100("0000:18:00.0")};  // its 18 links go to GPUs this process does not see
  for (int l = 0; l < 18; ++l) nv.by_bus["0000:18:00.0"].push_back({NvlinkEnd::Kind::Gpu, "0000:2a:00.0"});
  MachineInfo m = run(sys, &g, &nv);
  EXPECT_EQ(m.active_links[0], 18);
  const Topology t = machine_topology(m);
  EXPECT_DOUBLE_EQ(t.nvlink_bandwidth_GBps, 450.0);
  EXPECT_EQ(t.intra_node_link, "nvlink");
}

TEST(TopologyDetect, PcieOnlyUsesTheLinkSpeedAndSaysSo) {
  FakeSysfs sys;
  FakeGpus g;
  FakeNvlink nv;
  nv.up = false;
  g.peer = true;
  g.gpus = {h100("0000:18:00.0"), h100("0000:98:00.0")};
  for (const char* p : {"pci0000:00/0000:00:01.0/0000:18:00.0", "pci0000:80/0000:80:01.0/0000:98:00.0"}) {
    fs::path d = sys.pci(p, 0);
    std::ofstream(d / "current_link_speed") << "32.0 GT/s PCIe\n";
    std::ofstream(d / "current_link_width") << "16\n";
  }
  MachineInfo m = run(sys, &g, &nv);
  EXPECT_EQ(m.link_source, "cuda peer access");
  EXPECT_EQ(m.link[0][1], LinkClass::Pcie);
  EXPECT_NEAR(m.gpu_pcie_GBps[0], 32.0 * 16 * 128 / 130 / 8, 1e-9);
  const Topology t = machine_topology(m);
  EXPECT_NEAR(t.nvlink_bandwidth_GBps, 63.0, 0.1);
  EXPECT_EQ(t.intra_node_link, "pcie");
  bool noted = false;
  for (const std::string& n : m.notes) noted = noted || n.find("fake NVML absent") != std::string::npos;
  EXPECT_TRUE(noted);
  bool pcie_estimate = false;
  for (const std::string& e : m.estimates) pcie_estimate = pcie_estimate || e.find("PCIe") != std::string::npos;
  EXPECT_TRUE(pcie_estimate);
}

TEST(TopologyDetect, NicsByLocality) {
  FakeSysfs sys;
  FakeGpus g;
  g.gpus = {h100("0000:18:00.0"), h100("0000:98:00.0"), h100("0000:1a:00.0")};
  sys.pci("pci0000:00/0000:00:01.0/0000:18:00.0", 0);
  sys.pci("pci0000:80/0000:80:01.0/0000:98:00.0", 1);
  sys.pci("pci0000:80/0000:80:02.0/0000:1a:00.0", 1);  // NUMA 1, own root port
  const fs::path n0 = sys.pci("pci0000:00/0000:00:01.0/0000:17:00.0", 0);
  const fs::path n1 = sys.pci("pci0000:80/0000:80:01.0/0000:97:00.0", 1);
  const fs::path e1 = sys.pci("pci0000:00/0000:00:05.0/0000:05:00.0", 0);
  sys.ib("mlx5_1", n1, "200 Gb/sec (4X HDR)");
  sys.ib("mlx5_0", n0, "400 Gb/sec (4X NDR)");
  sys.ib("mlx5_2", n0, "400 Gb/sec (4X NDR)", "1: DOWN");
  sys.net("eth1", &e1, "100000");  // Ethernet: listed, unused while RDMA ports are active
  sys.net("docker0", nullptr, "10000");  // virtual: skipped
  MachineInfo m = run(sys, &g, nullptr);
  ASSERT_EQ(m.nics.size(), 4u);
  EXPECT_EQ(m.nics[0].name, "mlx5_0/1");
  EXPECT_DOUBLE_EQ(m.nics[0].rate_Gbps, 400);
  EXPECT_EQ(m.nics[0].numa_node, 0);
  EXPECT_EQ(m.nics[0].pci_bus_id, "0000:17:00.0");
  EXPECT_DOUBLE_EQ(m.nics[1].rate_Gbps, 200);
  EXPECT_FALSE(m.nics[2].active);
  EXPECT_EQ(m.nics[3].name, "eth1");
  EXPECT_DOUBLE_EQ(m.nics[3].rate_Gbps, 100);
  EXPECT_EQ(m.used_nics, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.nic_of_gpu, (std::vector<int>{0, 1, 1}));  // same root port, same root port, same NUMA node
  EXPECT_EQ(m.gpu_numa, (std::vector<int>{0, 1, 1}));
  const Topology t = machine_topology(m);
  EXPECT_EQ(t.nics_per_node, 2);
  EXPECT_EQ(t.nic_of_gpu, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(t.nic_bandwidth_GBps, 25.0);  // the slowest used port: 200 Gb/s
  EXPECT_GT(t.tb_net_GBps, 0);
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyDetect, MalformedSysfsValuesAreIgnoredWithNotes) {
  FakeSysfs sys;
  FakeGpus g;
  g.gpus = {h100("0000:18:00.0"), h100("zz:1"), h100("0000:1a:00.0")};
  const fs::path d = sys.pci("pci0000:00/0000:00:01.0/0000:18:00.0", 0);
  std::ofstream(d / "numa_node") << "abc\n";
  std::ofstream(d / "current_link_speed") << "fast\n";
  std::ofstream(d / "current_link_width") << "16\n";
  const fs::path d2 = sys.pci("pci0000:00/0000:00:02.0/0000:1a:00.0", 3);
  std::ofstream(d2 / "numa_node") << std::string(100000, '7');  // far over the size bound
  std::ofstream(d2 / "current_link_speed") << "16.0 GT/s PCIe\n";
  std::ofstream(d2 / "current_link_width") << "4096\n";
  const fs::path n = sys.pci("pci0000:00/0000:00:03.0/0000:17:00.0", 0);
  sys.ib("mlx5_0", n, "garbage");
  sys.ib("mlx5_1", n, "999999 Gb/sec (4X NDR)");
  sys.ib("mlx5_2", n, "nan Gb/sec");
  sys.ib("mlx5_3", n, "400 Gb/sec (4X NDR)");
  sys.write("class/infiniband/bad\x01name/ports/1/rate", "400 Gb/sec\n");
  const fs::path e = sys.pci("pci0000:00/0000:00:04.0/0000:05:00.0", 0);
  sys.net("eth0", &e, "-1");  // a down link reads -1: not an error, not active
  sys.net("eth1", &e, "12345678901234567890");
  MachineInfo m;
  ASSERT_NO_THROW(m = run(sys, &g, nullptr));
  ASSERT_EQ(m.gpus.size(), 3u);
  EXPECT_EQ(m.gpus[1].pci_bus_id, "");
  EXPECT_EQ(m.gpu_numa, (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(m.gpu_pcie_GBps, (std::vector<double>{0, 0, 0}));
  ASSERT_EQ(m.nics.size(), 3u) << machine_summary(m);  // mlx5_3 and the two Ethernet ports
  EXPECT_EQ(m.nics[0].name, "mlx5_3/1");
  EXPECT_FALSE(m.nics[1].active);
  EXPECT_FALSE(m.nics[2].active);
  const std::string all = machine_summary(m);
  for (const char* want : {"'abc' is not a NUMA node", "'garbage' is not a rate", "'999999 Gb/sec (4X NDR)' is not a rate",
                           "'nan Gb/sec' is not a rate", "'zz:1' malformed", "not a device name", "not understood",
                           "is not a speed in Mb/s"})
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
  EXPECT_NO_THROW(machine_topology(m).validate());
}

TEST(TopologyDetect, NoGpuLayerSaysWhy) {
  FakeSysfs sys;
  FakeGpus g;
  g.up = false;
  g.why = "libcuda.so.1 cannot be loaded: fake";
  MachineInfo m = run(sys, &g, nullptr);
  EXPECT_TRUE(m.gpus.empty());
  try {
    machine_topology(m);
    FAIL() << "no GPU must not give a topology";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidUsage);
    EXPECT_NE(std::string(e.what()).find("libcuda.so.1 cannot be loaded: fake"), std::string::npos) << e.what();
  }
  DetectOptions o;
  o.sysfs_root = sys.root() + "/absent";
  MachineInfo none = detect_machine(o);
  EXPECT_NE(machine_summary(none).find("is not a directory"), std::string::npos);
}

TEST(TopologyDetect, BusIds) {
  EXPECT_EQ(normalize_bus_id("0000:18:00.0"), "0000:18:00.0");
  EXPECT_EQ(normalize_bus_id("00000000:AB:1f.7"), "0000:ab:1f.7");
  for (const char* bad : {"", "18:00.0", "0000:18:00", "0000:18:00.8", "0000:18:20.0", "0000:1:00.0", "g000:18:00.0",
                          "0001000000:18:00.0", "0000:18:00.0x"})
    EXPECT_FALSE(normalize_bus_id(bad).has_value()) << bad;
  EXPECT_DOUBLE_EQ(nvlink_link_GBps(8, 0), 25);
  EXPECT_DOUBLE_EQ(nvlink_link_GBps(10, 0), 50);
  EXPECT_DOUBLE_EQ(nvlink_link_GBps(5, 2), 0);
}

TEST(TopologyDetect, WeftTopologyVariable) {
  ::unsetenv("WEFT_TOPOLOGY");
  Topology t = configured_topology(4);
  EXPECT_EQ(t.name, "h200-1x4");
  EXPECT_EQ(t.gpus_per_node, 4);
  ::setenv("WEFT_TOPOLOGY", "a100-2x4", 1);
  t = configured_topology(8);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.nics_per_node, 2);
  t = configured_topology(3);  // another rank count: one node of the ranks, the preset's figures
  EXPECT_EQ(t.nodes, 1);
  EXPECT_EQ(t.gpus_per_node, 3);
  EXPECT_EQ(t.nics_per_node, 0);
  EXPECT_DOUBLE_EQ(t.nvlink_bandwidth_GBps, 300);
  EXPECT_NO_THROW(t.validate());
  ::setenv("WEFT_TOPOLOGY", "/nonexistent/topo.json", 1);
  try {
    configured_topology(2);
    FAIL() << "a missing file must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_TOPOLOGY=/nonexistent/topo.json"), std::string::npos) << e.what();
  }
  ::unsetenv("WEFT_TOPOLOGY");
}

}  // namespace
}  // namespace weft::detect
