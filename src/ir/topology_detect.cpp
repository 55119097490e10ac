#include "ir/topology_detect.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include "ir/topology_io.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::detect {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxFileBytes = 4096;  // sysfs attributes are short; more is hostile
constexpr size_t kMaxEntries = 256;     // devices per sysfs class directory
constexpr int kMaxGpus = 1024;

/// The trimmed first line of a small file; nullopt when missing, unreadable or too long.
std::optional<std::string> read_attr(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::string s(kMaxFileBytes + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  if (s.size() > kMaxFileBytes) return std::nullopt;
  if (size_t nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

/// Printable shown form of an untrusted value, bounded.
std::string shown(std::string_view v) {
  std::string out;
  for (char c : v.substr(0, 40)) out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (v.size() > 40) out += "...";
  return out;
}

std::optional<int64_t> parse_int(std::string_view s, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

/// Leading decimal number ("400", "2.5", "16.0") and the rest of the text.
std::optional<double> parse_leading_number(std::string_view s, std::string_view* rest) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() || !(v == v)) return std::nullopt;
  if (rest != nullptr) *rest = s.substr(static_cast<size_t>(p - s.data()));
  return v;
}

bool safe_name(const std::string& n) {
  if (n.empty() || n.size() > 64 || n[0] == '.') return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':'; });
}

/// Sorted entry names of a directory, bounded and filtered to safe names.
std::vector<std::string> list_dir(const fs::path& dir, std::vector<std::string>& notes) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (!safe_name(n)) {
      notes.push_back(dir.string() + ": entry '" + shown(n) + "' ignored (not a device name)");
      continue;
    }
    if (out.size() == kMaxEntries) {
      notes.push_back(dir.string() + ": more than " + std::to_string(kMaxEntries) + " entries; the rest ignored");
      break;
    }
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int read_numa(const fs::path& dev, std::vector<std::string>& notes) {
  auto v = read_attr(dev / "numa_node");
  if (!v) return -1;
  auto n = parse_int(*v, -1, 1023);
  if (!n) {
    notes.push_back((dev / "numa_node").string() + ": '" + shown(*v) + "' is not a NUMA node (-1..1023); ignored");
    return -1;
  }
  return static_cast<int>(*n);
}

/// The resolved PCI device behind a class device's "device" link, its bus id and NUMA node.
void pci_of(const fs::path& classdev, NicInfo& nic, std::vector<std::string>& notes) {
  std::error_code ec;
  fs::path real = fs::canonical(classdev / "device", ec);
  if (ec) return;
  nic.pci_path = real.string();
  nic.pci_bus_id = normalize_bus_id(real.filename().string()).value_or("");
  nic.numa_node = read_numa(real, notes);
}

void detect_ib(const fs::path& root, MachineInfo& m) {
  const fs::path cls = root / "class" / "infiniband";
  for (const std::string& dev : list_dir(cls, m.notes)) {
    NicInfo base;
    base.kind = "infiniband";
    pci_of(cls / dev, base, m.notes);
    for (const std::string& port : list_dir(cls / dev / "ports", m.notes)) {
      NicInfo nic = base;
      nic.name = dev + "/" + port;
      const fs::path pp = cls / dev / "ports" / port;
      auto rate = read_attr(pp / "rate");
      std::string_view rest;
      std::optional<double> r = rate ? parse_leading_number(*rate, &rest) : std::nullopt;
      if (!rate) {
        m.notes.push_back((pp / "rate").string() + ": unreadable; port ignored");
        continue;
      }
      if (!r || *r <= 0 || *r > 10000 || rest.substr(0, 7) != " Gb/sec") {
        m.notes.push_back((pp / "rate").string() + ": '" + shown(*rate) + "' is not a rate like '400 Gb/sec (4X NDR)'; port ignored");
        continue;
      }
      nic.rate_Gbps = *r;
      auto state = read_attr(pp / "state");
      nic.active = !state || state->find("ACTIVE") != std::string::npos;
      m.nics.push_back(std::move(nic));
    }
  }
}

void detect_net(const fs::path& root, MachineInfo& m) {
  const fs::path cls = root / "class" / "net";
  for (const std::string& ifn : list_dir(cls, m.notes)) {
    if (ifn == "lo") continue;
    NicInfo nic;
    nic.kind = "net";
    nic.name = ifn;
    pci_of(cls / ifn, nic, m.notes);
    if (nic.pci_path.empty()) continue;  // virtual interface (bridge, veth, bond)
    const bool dup = std::any_of(m.nics.begin(), m.nics.end(), [&](const NicInfo& o) {
      return o.kind == "infiniband" && !o.pci_bus_id.empty() && o.pci_bus_id == nic.pci_bus_id;
    });
    if (dup) continue;  // the Ethernet face of an RDMA device already listed
    auto speed = read_attr(cls / ifn / "speed");
    if (speed) {
      auto mbps = parse_int(*speed, -1, 10'000'000);
      if (!mbps)
        m.notes.push_back((cls / ifn / "speed").string() + ": '" + shown(*speed) + "' is not a speed in Mb/s; ignored");
      else if (*mbps > 0)
        nic.rate_Gbps = static_cast<double>(*mbps) / 1000.0;
    }
    auto oper = read_attr(cls / ifn / "operstate");
    nic.active = nic.rate_Gbps > 0 && (!oper || *oper == "up" || *oper == "unknown");
    m.nics.push_back(std::move(nic));
  }
}

/// PCIe rate of a device from current_link_speed ("16.0 GT/s PCIe") and current_link_width.
double pcie_GBps(const fs::path& dev, std::vector<std::string>& notes) {
  auto sp = read_attr(dev / "current_link_speed");
  auto wd = read_attr(dev / "current_link_width");
  if (!sp || !wd) return 0;
  std::string_view rest;
  auto gts = parse_leading_number(*sp, &rest);
  auto w = parse_int(*wd, 1, 32);
  if (!gts || *gts <= 0 || *gts > 256 || rest.substr(0, 5) != " GT/s" || !w) {
    notes.push_back(dev.string() + ": PCIe link '" + shown(*sp) + "' x '" + shown(*wd) + "' not understood; ignored");
    return 0;
  }
  const double encoding = *gts >= 8 ? 128.0 / 130.0 : 0.8;
  return *gts * static_cast<double>(*w) * encoding / 8.0;
}

size_t common_components(const std::string& a, const std::string& b) {
  const fs::path pa(a), pb(b);
  size_t n = 0;
  for (auto ia = pa.begin(), ib = pb.begin(); ia != pa.end() && ib != pb.end() && *ia == *ib; ++ia, ++ib) ++n;
  return n;
}

void detect_links(const DetectOptions& o, MachineInfo& m) {
  const size_t n = m.gpus.size();
  m.nvlinks.assign(n, std::vector<int>(n, 0));
  m.switch_links.assign(n, 0);
  m.active_links.assign(n, 0);
  m.link.assign(n, std::vector<LinkClass>(n, LinkClass::None));
  std::string why;
  bool nvml = o.nvlink != nullptr && o.nvlink->available(&why);
  if (o.nvlink == nullptr) why = "no NVLink layer";
  if (!nvml && n > 1) m.notes.push_back("NVLink links not detected (" + why + "); CUDA peer access is used instead");
  else if (!nvml) m.notes.push_back("NVLink layer not loaded (" + why + ")");
  std::map<std::string, size_t> by_bus;
  for (size_t g = 0; g < n; ++g)
    if (!m.gpus[g].pci_bus_id.empty()) by_bus[m.gpus[g].pci_bus_id] = g;
  bool any_nvml = false;
  for (size_t g = 0; nvml && g < n; ++g) {
    std::string w;
    auto ends = m.gpus[g].pci_bus_id.empty() ? std::nullopt : o.nvlink->links(m.gpus[g].pci_bus_id, &w);
    if (!ends) {
      m.notes.push_back(text::format("GPU %zu: NVLink links not read (%s)", g, w.empty() ? "no PCI bus id" : w.c_str()));
      continue;
    }
    any_nvml = true;
    m.active_links[g] = static_cast<int>(ends->size());
    for (const NvlinkEnd& e : *ends) {
      auto it = by_bus.find(e.pci_bus_id);
      if (e.kind == NvlinkEnd::Kind::Switch) ++m.switch_links[g];
      else if (it != by_bus.end() && it->second != g) ++m.nvlinks[g][it->second];
      else if (e.kind == NvlinkEnd::Kind::Unknown) ++m.switch_links[g];  // not a GPU weft sees
    }
  }
  m.link_source = any_nvml ? "nvml" : (o.gpus != nullptr && n > 0 ? "cuda peer access" : "none");
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      if (m.nvlinks[a][b] > 0) m.link[a][b] = LinkClass::Nvlink;
      else if (m.switch_links[a] > 0 && m.switch_links[b] > 0) m.link[a][b] = LinkClass::NvSwitch;
      else if (o.gpus != nullptr && o.gpus->can_access_peer(static_cast<int>(a), static_cast<int>(b)))
        m.link[a][b] = LinkClass::Pcie;
      else m.link[a][b] = LinkClass::None;
    }
  if (!any_nvml && n > 1)
    m.notes.push_back("without NVML, GPU pairs with peer access are taken as PCIe (NVLink cannot be told apart)");
}

/// Active NICs used by the topology: the RDMA ports if any is active, else the Ethernet ones;
/// each GPU takes the nearest (longest common PCI path, then NUMA node, then least shared).
void assign_nics(MachineInfo& m) {
  const bool rdma = std::any_of(m.nics.begin(), m.nics.end(), [](const NicInfo& n) { return n.active && n.kind == "infiniband"; });
  m.used_nics.clear();
  for (size_t i = 0; i < m.nics.size(); ++i)
    if (m.nics[i].active && (m.nics[i].kind == "infiniband") == rdma) m.used_nics.push_back(static_cast<int>(i));
  m.nic_of_gpu.assign(m.gpus.size(), -1);
  std::vector<int> load(m.used_nics.size(), 0);
  for (size_t g = 0; g < m.gpus.size(); ++g) {
    int best = -1;
    std::tuple<size_t, int, int> best_score{};
    for (size_t k = 0; k < m.used_nics.size(); ++k) {
      const NicInfo& nic = m.nics[static_cast<size_t>(m.used_nics[k])];
      const size_t path = m.gpu_pci_path[g].empty() || nic.pci_path.empty() ? 0 : common_components(m.gpu_pci_path[g], nic.pci_path);
      const int numa = m.gpu_numa[g] >= 0 && m.gpu_numa[g] == nic.numa_node ? 1 : 0;
      std::tuple<size_t, int, int> score{path, numa, -load[k]};
      if (best < 0 || score > best_score) best = static_cast<int>(k), best_score = score;
    }
    m.nic_of_gpu[g] = best;
    if (best >= 0) ++load[static_cast<size_t>(best)];
  }
}

}  // namespace

std::string_view to_string(LinkClass c) {
  switch (c) {
    case LinkClass::Nvlink: return "nvlink";
    case LinkClass::NvSwitch: return "nvswitch";
    case LinkClass::Pcie: return "pcie";
    case LinkClass::None: return "none";
  }
  return "none";
}

std::optional<std::string> normalize_bus_id(std::string_view s) {
  // domain:bus:device.function, domain 4 or 8 hex digits.
  auto hex = [](std::string_view t, size_t digits_lo, size_t digits_hi, unsigned& out) {
    if (t.size() < digits_lo || t.size() > digits_hi) return false;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out, 16);
    return ec == std::errc() && p == t.data() + t.size();
  };
  const size_t c1 = s.find(':'), c2 = s.find(':', c1 == std::string_view::npos ? 0 : c1 + 1), dot = s.rfind('.');
  if (c1 == std::string_view::npos || c2 == std::string_view::npos || dot == std::string_view::npos || dot < c2) return std::nullopt;
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  if (!hex(s.substr(0, c1), 4, 8, dom) || !hex(s.substr(c1 + 1, c2 - c1 - 1), 2, 2, bus) ||
      !hex(s.substr(c2 + 1, dot - c2 - 1), 2, 2, dev) || !hex(s.substr(dot + 1), 1, 1, fn) || dom > 0xffff || dev > 0x1f || fn > 7)
    return std::nullopt;
  return text::format("%04x:%02x:%02x.%x", dom, bus, dev, fn);
}

double nvlink_link_GBps(int major, int minor) {
  (void)minor;
  if (major == 6) return 20;              // NVLink 1 (P100)
  if (major == 7 || major == 8 || major == 9) return 25;  // NVLink 2, 3, 4 (V100, A100, H100/H200)
  if (major == 10) return 50;             // NVLink 5 (B200)
  return 0;
}

MachineInfo detect_machine(const DetectOptions& o) {
  MachineInfo m;
  const fs::path root(o.sysfs_root);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) m.notes.push_back("sysfs root " + o.sysfs_root + " is not a directory: no NIC, NUMA or PCIe figures");
  std::string why;
  const int count = o.gpus != nullptr ? o.gpus->count(&why) : -1;
  if (o.gpus == nullptr) why = "no GPU layer";
  if (count < 0) m.notes.push_back("GPUs not detected: " + why);
  else if (count > kMaxGpus) m.notes.push_back(text::format("the GPU layer reports %d GPUs; more than %d is not believed", count, kMaxGpus));
  for (int g = 0; g >= 0 && g < count && count <= kMaxGpus; ++g) {
    GpuInfo info = o.gpus->gpu(g);
    if (!info.pci_bus_id.empty()) {
      auto norm = normalize_bus_id(info.pci_bus_id);
      if (!norm) m.notes.push_back(text::format("GPU %d: PCI bus id '%s' malformed; ignored", g, shown(info.pci_bus_id).c_str()));
      info.pci_bus_id = norm.value_or("");
    }
    m.gpus.push_back(info);
    std::string path;
    int numa = -1;
    double pcie = 0;
    if (!info.pci_bus_id.empty()) {
      fs::path dev = fs::canonical(root / "bus" / "pci" / "devices" / info.pci_bus_id, ec);
      if (!ec) {
        path = dev.string();
        numa = read_numa(dev, m.notes);
        pcie = pcie_GBps(dev, m.notes);
      }
    }
    m.gpu_pci_path.push_back(path);
    m.gpu_numa.push_back(numa);
    m.gpu_pcie_GBps.push_back(pcie);
  }
  detect_links(o, m);
  detect_ib(root, m);
  detect_net(root, m);
  assign_nics(m);
  return m;
}

Topology machine_topology(MachineInfo& m) {
  if (m.gpus.empty()) {
    std::string why = "no GPU detected";
    for (const std::string& n : m.notes) why += "; " + n;
    fail(ErrorCode::InvalidUsage, why);
  }
  const GpuInfo& g0 = m.gpus[0];
  const bool hopper_up = g0.cc_major >= 9;
  std::string gen;  // "h100" from "NVIDIA H100 80GB HBM3"
  for (size_t i = 0; i < g0.name.size() && gen.empty(); ++i) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(g0.name[i])));
    if ((c == 'a' || c == 'b' || c == 'h' || c == 'l' || c == 'v') && i + 2 < g0.name.size() &&
        std::isdigit(static_cast<unsigned char>(g0.name[i + 1])) && std::isdigit(static_cast<unsigned char>(g0.name[i + 2])) &&
        (i == 0 || g0.name[i - 1] == ' ')) {
      size_t j = i + 1;
      while (j < g0.name.size() && std::isdigit(static_cast<unsigned char>(g0.name[j]))) ++j;
      gen = std::string(1, c) + g0.name.substr(i + 1, j - i - 1);
    }
  }
  if (gen.empty()) gen = "gpu";
  const int n = static_cast<int>(m.gpus.size());
  // Execution figures from the nearest preset: h200's for Hopper and newer, a100's otherwise.
  Topology t = hopper_up ? topology_preset("h200-1x2") : topology_preset("a100-1x2");
  const Topology net = topology_preset("a100-1x2");
  t.name = text::format("detected-%s-1x%d", gen.c_str(), n);
  t.gpu = gen;
  t.nodes = 1;
  t.gpus_per_node = n;
  m.estimates.clear();
  m.estimates.push_back(text::format("tb_copy_GBps, tb_local_GBps, hbm_bandwidth_GBps, nvlink_latency_us, primitive_overhead_us, "
                                     "contention_gamma: the %s preset's figures, not measured here",
                                     hopper_up ? "h200" : "a100"));
  // The link figure: the slowest GPU's NVLink port (links x per-link rate), or PCIe.
  double port = 0;
  bool all_nvlink = n > 1, any_nvlink = false;
  for (int a = 0; a < n; ++a) {
    const int links = m.active_links[static_cast<size_t>(a)];  // to switches, visible GPUs and others
    const double rate = links * nvlink_link_GBps(m.gpus[static_cast<size_t>(a)].cc_major, m.gpus[static_cast<size_t>(a)].cc_minor);
    port = a == 0 ? rate : std::min(port, rate);
    for (int b = 0; b < n; ++b) {
      const LinkClass c = m.link[static_cast<size_t>(a)][static_cast<size_t>(b)];
      if (a == b) continue;
      const bool nv = c == LinkClass::Nvlink || c == LinkClass::NvSwitch;
      all_nvlink = all_nvlink && nv;
      any_nvlink = any_nvlink || nv;
    }
  }
  double pcie = 0;
  for (double p : m.gpu_pcie_GBps) pcie = pcie == 0 ? p : (p > 0 ? std::min(pcie, p) : pcie);
  if (n == 1 && port > 0) all_nvlink = true;  // one GPU visible (CUDA_VISIBLE_DEVICES): its port
  if (all_nvlink && port > 0) {
    t.nvlink_bandwidth_GBps = port;
    m.estimates.push_back(text::format("nvlink_bandwidth_GBps %.0f: detected link count x %.0f GB/s per link per direction "
                                       "(the NVLink generation's rate, not measured)",
                                       port, nvlink_link_GBps(g0.cc_major, g0.cc_minor)));
  } else {
    if (n > 1) t.intra_node_link = "pcie";
    t.nvlink_bandwidth_GBps = pcie > 0 ? pcie : (hopper_up ? 63.0 : 31.5);
    m.estimates.push_back(text::format(
        "nvlink_bandwidth_GBps %.1f carries a PCIe rate (%s)%s", t.nvlink_bandwidth_GBps,
        pcie > 0 ? "from the GPUs' PCIe link speed and width" : "no PCIe figure in sysfs: PCIe x16 of the GPU's generation assumed (gen5 for Hopper and newer, else gen4)",
        any_nvlink ? "; some GPU pairs have NVLink but not all, and the topology model has one link class" : ""));
  }
  t.nics_per_node = static_cast<int32_t>(m.used_nics.size());
  t.nic_of_gpu.clear();
  if (t.nics_per_node > 0) {
    double rate = 0;
    for (int k : m.used_nics) rate = rate == 0 ? m.nics[static_cast<size_t>(k)].rate_Gbps : std::min(rate, m.nics[static_cast<size_t>(k)].rate_Gbps);
    t.nic_bandwidth_GBps = rate / 8.0;
    for (int g = 0; g < n; ++g) t.nic_of_gpu.push_back(std::max(0, m.nic_of_gpu[static_cast<size_t>(g)]));
    t.nic_latency_us = net.nic_latency_us;
    t.aggregation_latency_us = net.aggregation_latency_us;
    t.tb_net_GBps = net.tb_net_GBps;
    m.estimates.push_back("nic_latency_us, aggregation_latency_us, tb_net_GBps: the a100 preset's figures; nic_bandwidth_GBps: "
                          "the slowest used NIC's signalled rate / 8");
  } else {
    t.nic_bandwidth_GBps = t.nic_latency_us = t.aggregation_latency_us = t.tb_net_GBps = 0;
  }
  t.nodes_per_rack = 1;
  t.rack_uplink_bandwidth_GBps = 0;
  t.description = text::format("Detected on this machine: %d x %s (%d SMs, %.0f GiB), links from %s, %d NIC%s used. Estimated "
                               "figures: see `weft topology --detect --summary` and docs/topology.md (Detection).",
                               n, g0.name.c_str(), g0.sm_count, static_cast<double>(g0.memory_bytes) / (1 << 30),
                               m.link_source.c_str(), t.nics_per_node, t.nics_per_node == 1 ? "" : "s");
  t.validate();
  return t;
}

std::string machine_summary(const MachineInfo& m) {
  std::string s = text::format("GPUs: %zu (links from %s)\n", m.gpus.size(), m.link_source.empty() ? "none" : m.link_source.c_str());
  s += "  #  name                            SMs  memory    cc    pci           numa  pcie GB/s  nvlinks(switch)\n";
  for (size_t g = 0; g < m.gpus.size(); ++g) {
    const GpuInfo& i = m.gpus[g];
    s += text::format("  %-2zu %-30s %4d  %6.1f GiB %d.%d  %-12s  %4d  %9.1f  %d\n", g, shown(i.name).c_str(), i.sm_count,
                      static_cast<double>(i.memory_bytes) / (1 << 30), i.cc_major, i.cc_minor,
                      i.pci_bus_id.empty() ? "?" : i.pci_bus_id.c_str(), m.gpu_numa[g], m.gpu_pcie_GBps[g], m.switch_links[g]);
  }
  if (m.gpus.size() > 1) {
    s += "Links (row -> column; nvlink:N direct NVLinks, nvswitch, pcie, none):\n     ";
    for (size_t b = 0; b < m.gpus.size(); ++b) s += text::format(" %-10zu", b);
    s += "\n";
    for (size_t a = 0; a < m.gpus.size(); ++a) {
      s += text::format("  %-2zu ", a);
      for (size_t b = 0; b < m.gpus.size(); ++b) {
        std::string c = a == b ? "-" : std::string(to_string(m.link[a][b]));
        if (a != b && m.link[a][b] == LinkClass::Nvlink) c += ":" + std::to_string(m.nvlinks[a][b]);
        s += text::format(" %-10s", c.c_str());
      }
      s += "\n";
    }
  }
  s += text::format("NICs: %zu\n", m.nics.size());
  for (size_t k = 0; k < m.nics.size(); ++k) {
    const NicInfo& nic = m.nics[k];
    const bool used = std::find(m.used_nics.begin(), m.used_nics.end(), static_cast<int>(k)) != m.used_nics.end();
    std::string gpus;
    for (size_t g = 0; g < m.nic_of_gpu.size(); ++g)
      if (m.nic_of_gpu[g] >= 0 && m.used_nics[static_cast<size_t>(m.nic_of_gpu[g])] == static_cast<int>(k))
        gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    s += text::format("  %-16s %-10s %-8s %7.1f Gb/s  pci %-12s numa %d%s%s\n", nic.name.c_str(), nic.kind.c_str(),
                      nic.active ? "active" : "down", nic.rate_Gbps, nic.pci_bus_id.empty() ? "?" : nic.pci_bus_id.c_str(),
                      nic.numa_node, used ? "  used by GPUs " : "", used ? (gpus.empty() ? "none" : gpus.c_str()) : "");
  }
  if (!m.notes.empty()) s += "Not detected / ignored:\n";
  for (const std::string& n : m.notes) s += "  - " + n + "\n";
  if (!m.estimates.empty()) s += "Estimated (not detected):\n";
  for (const std::string& e : m.estimates) s += "  - " + e + "\n";
  return s;
}

MachineInfo detect_this_machine(const std::string& sysfs_root) {
  auto gpus = cuda_driver_probe();
  auto nvlink = nvml_probe();
  DetectOptions o;
  o.sysfs_root = sysfs_root;
  o.gpus = gpus.get();
  o.nvlink = nvlink.get();
  return detect_machine(o);
}

Topology configured_topology(int nranks) {
  const std::string spec = config::get_string("WEFT_TOPOLOGY");
  Topology t;
  try {
    if (spec.empty()) {
      t = topology_preset("h200-1x8");
    } else if (spec == "detect") {
      static std::once_flag once;
      static std::optional<Topology> detected;
      static std::string error;
      std::call_once(once, [] {
        try {
          MachineInfo m = detect_this_machine();
          detected = machine_topology(m);
        } catch (const Error& e) {
          error = e.what();
        }
      });
      if (!detected) fail(ErrorCode::InvalidUsage, error);
      t = *detected;
    } else {
      t = load_topology(spec);
    }
  } catch (const Error& e) {
    fail(e.code(), "WEFT_TOPOLOGY=" + spec + ": " + e.what());
  }
  if (t.num_gpus() != nranks) {
    t.name = text::format("%s-as-1x%d", t.name.c_str(), nranks);
    if (spec.empty()) t.name = text::format("h200-1x%d", nranks);
    t.nodes = 1;
    t.gpus_per_node = nranks;
    t.nics_per_node = 0;
    t.nic_of_gpu.clear();
    t.nic_bandwidth_GBps = t.nic_latency_us = t.aggregation_latency_us = t.tb_net_GBps = t.rack_uplink_bandwidth_GBps = 0;
    t.nodes_per_rack = 1;
  }
  return t;
}

}  // namespace weft::detect
