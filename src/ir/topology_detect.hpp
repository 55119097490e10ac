// Topology detection: the GPUs, NVLink links and NICs of this machine, and the Topology
// (ir/topology.hpp) weft derives from them (docs/topology.md, "Detection").
//
// Everything is found at run time: GPUs through the CUDA driver (libcuda.so.1, dlopen), NVLink
// through NVML (libnvidia-ml.so.1, dlopen) or, without NVML, CUDA peer access; NICs, NUMA and
// PCIe figures from sysfs under a configurable root. The GPU and NVLink layers are interfaces so
// tests can feed fakes; sysfs input is treated as hostile (bounded reads, validated values).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/topology.hpp"

namespace weft::detect {

struct GpuInfo {
  std::string name;        ///< as the driver names it, e.g. "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int cc_major = 0, cc_minor = 0;
  std::string pci_bus_id;  ///< normalized "dddd:bb:dd.f"; empty when unknown
};

/// The GPU layer: the CUDA driver, or a fake in tests.
class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  /// Number of GPUs; -1 with *why set when the layer cannot be used.
  virtual int count(std::string* why) = 0;
  virtual GpuInfo gpu(int index) = 0;
  /// Whether GPU a can address b's memory directly (P2P over NVLink or PCIe).
  virtual bool can_access_peer(int a, int b) = 0;
};

/// What is at the far end of one active NVLink.
struct NvlinkEnd {
  enum class Kind : uint8_t { Gpu, Switch, Unknown } kind = Kind::Unknown;
  std::string pci_bus_id;  ///< normalized
};

/// The NVLink layer: NVML, or a fake in tests.
class NvlinkProbe {
 public:
  virtual ~NvlinkProbe() = default;
  /// false with *why set when the layer cannot be used.
  virtual bool available(std::string* why) = 0;
  /// One entry per active NVLink of the GPU at `bus_id`; nullopt (with *why) when the layer
  /// does not know the GPU or cannot query its links.
  virtual std::optional<std::vector<NvlinkEnd>> links(const std::string& bus_id, std::string* why) = 0;
};

enum class LinkClass : uint8_t { Nvlink, NvSwitch, Pcie, None };
std::string_view to_string(LinkClass c);

struct NicInfo {
  std::string name;       ///< "mlx5_0/1" (InfiniBand device / port) or "eth0"
  std::string kind;       ///< "infiniband" or "net"
  bool active = false;    ///< port ACTIVE / interface up with a known speed
  double rate_Gbps = 0;   ///< per direction
  int numa_node = -1;     ///< -1: unknown
  std::string pci_bus_id; ///< normalized; empty when not a PCI device
  std::string pci_path;   ///< resolved sysfs path of the PCI device (locality)
};

struct MachineInfo {
  std::vector<GpuInfo> gpus;
  std::vector<int> gpu_numa;                  ///< per GPU; -1 unknown
  std::vector<std::string> gpu_pci_path;      ///< per GPU; resolved sysfs path or empty
  std::vector<double> gpu_pcie_GBps;          ///< per GPU, from the link speed and width; 0 unknown
  std::vector<std::vector<int>> nvlinks;      ///< [a][b]: direct NVLinks a -> b
  std::vector<int> switch_links;              ///< per GPU: NVLinks to NVSwitches
  std::vector<int> active_links;              ///< per GPU: all its active NVLinks (its port)
  std::vector<std::vector<LinkClass>> link;   ///< [a][b]: how a reaches b
  std::string link_source;                    ///< "nvml", "cuda peer access" or "none"
  std::vector<NicInfo> nics;
  std::vector<int> nic_of_gpu;                ///< per GPU: index into the active NICs used, -1 none
  std::vector<int> used_nics;                 ///< indices into `nics` the topology uses
  std::vector<std::string> notes;             ///< what could not be detected, values ignored
  std::vector<std::string> estimates;         ///< figures that are estimates, not detected
};

struct DetectOptions {
  std::string sysfs_root = "/sys";
  GpuProbe* gpus = nullptr;       ///< null: no GPU layer (noted)
  NvlinkProbe* nvlink = nullptr;  ///< null: no NVLink layer (peer access is used)
};

/// Detects what the options' layers and sysfs tree show. Never throws for missing or
/// malformed input: it records a note and goes on.
MachineInfo detect_machine(const DetectOptions& opts);

/// NVLink per-link rate per direction (GB/s) for a compute capability; 0 when unknown.
double nvlink_link_GBps(int cc_major, int cc_minor);

/// The Topology of a detected machine: one node of its GPUs, NICs by locality, link figures
/// from what was detected and the rest from the preset of the nearest GPU generation (each
/// estimate is listed in info.estimates, which this fills). Throws InvalidUsage when no GPU
/// was detected, naming the notes.
Topology machine_topology(MachineInfo& info);

/// A human-readable table: GPUs, link matrix, NICs, notes and estimates.
std::string machine_summary(const MachineInfo& info);

/// Parses "0000:18:00.0" or "00000000:18:00.0" (hex, any case); nullopt when malformed.
std::optional<std::string> normalize_bus_id(std::string_view text);

/// The real layers, loaded at run time (never null; their available()/count() say why not).
std::unique_ptr<GpuProbe> cuda_driver_probe();
std::unique_ptr<NvlinkProbe> nvml_probe();

/// Detection on this machine with the real layers and `sysfs_root`.
MachineInfo detect_this_machine(const std::string& sysfs_root = "/sys");

/// The topology WEFT_TOPOLOGY names for a communicator of `nranks` ranks on one host: unset,
/// the h200-1x8 preset's figures; "detect", this machine's detected topology (detected once per
/// process); else a preset name or topology file. When the topology's GPU count differs from
/// `nranks` it is reshaped to one node of `nranks` GPUs with its figures (no NICs).
Topology configured_topology(int nranks);

}  // namespace weft::detect
