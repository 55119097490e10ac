// Topology files (JSON) and the built-in presets. The format is documented field by field
// in docs/topology.md; the presets' figures and where each comes from are listed there too.
#include "ir/topology_io.hpp"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/text.hpp"

namespace weft {

namespace {

using nlohmann::json;

constexpr const char* kFormat = "weft-topology";
constexpr int kVersion = 1;

/// One field of the file: its name and how it moves between JSON and the struct.
struct Field {
  const char* name;
  std::function<json(const Topology&)> get;
  /// Sets the field from `v`; returns an error phrase ("must be ...") or empty.
  std::function<std::string(Topology&, const json&)> set;
};

std::string set_int(int32_t& out, const json& v) {
  if (!v.is_number_integer()) return "must be an integer";
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                             : (v.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
                                v.get<int64_t>() > std::numeric_limits<int32_t>::max()))
    return "is out of the range of a 32-bit integer";
  out = static_cast<int32_t>(v.get<int64_t>());
  return {};
}

std::string set_double(double& out, const json& v) {
  if (!v.is_number()) return "must be a number";
  out = v.get<double>();
  if (!std::isfinite(out)) return "must be finite";
  return {};
}

std::string set_string(std::string& out, const json& v) {
  if (!v.is_string()) return "must be a string";
  out = v.get<std::string>();
  return {};
}

std::string set_int_list(std::vector<int32_t>& out, const json& v) {
  if (!v.is_array()) return "must be an array of integers";
  out.clear();
  for (size_t i = 0; i < v.size(); ++i) {
    int32_t x = 0;
    std::string e = set_int(x, v[i]);
    if (!e.empty()) return text::format("has element %zu that %s", i, e.c_str());
    out.push_back(x);
  }
  return {};
}

#define WEFT_TOPO_FIELD(member, setter)                                                                          \
  Field {                                                                                                        \
#member, [](const Topology& t) { return json(t.member); }, [](Topology & t,                                  \
                                                                  const json& v) { return setter(t.member, v); } \
  }

/// Every field of Topology, in file order. `description`, `tb_local_GBps` (0 means the
/// simulator's default) and `intra_node_link` ("nvlink"), added after the first files were
/// written, are optional.
const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      WEFT_TOPO_FIELD(name, set_string),
      WEFT_TOPO_FIELD(description, set_string),
      WEFT_TOPO_FIELD(gpu, set_string),
      WEFT_TOPO_FIELD(nodes, set_int),
      WEFT_TOPO_FIELD(gpus_per_node, set_int),
      WEFT_TOPO_FIELD(nics_per_node, set_int),
      WEFT_TOPO_FIELD(nic_of_gpu, set_int_list),
      WEFT_TOPO_FIELD(nodes_per_rack, set_int),
      WEFT_TOPO_FIELD(nvlink_bandwidth_GBps, set_double),
      WEFT_TOPO_FIELD(nvlink_latency_us, set_double),
      WEFT_TOPO_FIELD(nic_bandwidth_GBps, set_double),
      WEFT_TOPO_FIELD(nic_latency_us, set_double),
      WEFT_TOPO_FIELD(aggregation_latency_us, set_double),
      WEFT_TOPO_FIELD(rack_uplink_bandwidth_GBps, set_double),
      WEFT_TOPO_FIELD(tb_copy_GBps, set_double),
      WEFT_TOPO_FIELD(tb_net_GBps, set_double),
      WEFT_TOPO_FIELD(hbm_bandwidth_GBps, set_double),
      WEFT_TOPO_FIELD(primitive_overhead_us, set_double),
      WEFT_TOPO_FIELD(contention_gamma, set_double),
      WEFT_TOPO_FIELD(tb_local_GBps, set_double),
      WEFT_TOPO_FIELD(intra_node_link, set_string),
  };
  return f;
}

#undef WEFT_TOPO_FIELD

/// Parses "<prefix>NxG" into N and G; false when the name does not have that shape.
bool parse_shape(const std::string& name, const std::string& prefix, int64_t& n, int64_t& g) {
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  std::string_view rest = std::string_view(name).substr(prefix.size());
  size_t x = rest.find('x');
  if (x == std::string_view::npos || x == 0 || x + 1 == rest.size()) return false;
  auto number = [](std::string_view s, int64_t& out) {
    if (s.size() > 9) return false;  // keeps the value far from overflow; bounds are checked after
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  return number(rest.substr(0, x), n) && number(rest.substr(x + 1), g);
}

[[noreturn]] void unknown_preset(const std::string& name, const std::string& why) {
  std::string known;
  for (const std::string& p : topology_preset_names()) known += (known.empty() ? "" : ", ") + p;
  fail(ErrorCode::InvalidArgument,
       text::format("unknown topology preset '%s'%s; the presets are %s", name.c_str(), why.c_str(), known.c_str()));
}

// Figures: docs/topology.md says where each comes from (measured, from the paper, or assumed).
Topology h200(int32_t gpus) {
  Topology t;
  t.name = text::format("h200-1x%d", gpus);
  t.gpu = "h200";
  t.description = text::format(
      "One H200 SXM node of %d GPUs on NVSwitch. NVLink, per-thread-block and HBM rates are the team's "
      "measurements; latencies and overheads are assumptions (docs/topology.md).",
      gpus);
  t.nodes = 1;
  t.gpus_per_node = gpus;
  t.nics_per_node = 0;
  t.nodes_per_rack = 1;
  t.nvlink_bandwidth_GBps = 370;  // SM stores between two GPUs, per direction (measured)
  t.nvlink_latency_us = 2.0;
  t.tb_copy_GBps = 20;          // one thread block's NVLink copy rate (measured)
  t.hbm_bandwidth_GBps = 4300;  // copy, read + write (measured)
  t.primitive_overhead_us = 1.0;
  t.contention_gamma = 0.15;    // docs/cost-model.md: the shape of paper 001 Fig. 4
  t.tb_local_GBps = 80;         // docs/cost-model.md: 4 x tb_copy_GBps, to be measured
  return t;
}

Topology a100(int32_t nodes, int32_t gpus) {
  Topology t;
  t.name = text::format("a100-%dx%d", nodes, gpus);
  t.gpu = "a100";
  t.description = text::format(
      "%d node%s of %d A100 GPUs (NVSwitch, 300 GB/s per GPU per direction), 200 Gb/s RoCE NICs shared by two "
      "GPUs, two-tier Clos: the cluster of ResCCL (SIGCOMM 2025) section 5.1. Per-thread-block rates, latencies "
      "and rack size are chosen in docs/topology.md.",
      nodes, nodes == 1 ? "" : "s", gpus);
  t.nodes = nodes;
  t.gpus_per_node = gpus;
  t.nics_per_node = std::max(1, gpus / 2);
  for (int32_t g = 0; g < gpus; ++g) t.nic_of_gpu.push_back(g / 2);
  t.nodes_per_rack = 2;
  t.nvlink_bandwidth_GBps = 300;
  t.nvlink_latency_us = 2.0;
  t.nic_bandwidth_GBps = 25;  // 200 Gb/s
  t.nic_latency_us = 5.0;     // the paper: inter-node latency is at least 2.5x intra-node
  t.aggregation_latency_us = 1.0;
  t.rack_uplink_bandwidth_GBps = 0;  // non-blocking Clos
  t.tb_copy_GBps = 15;
  t.tb_net_GBps = 6.25;  // the paper's Fig. 4: four thread blocks saturate one NIC
  t.hbm_bandwidth_GBps = 1800;
  t.primitive_overhead_us = 1.0;
  t.contention_gamma = 0.15;  // docs/cost-model.md: the shape of paper 001 Fig. 4
  t.tb_local_GBps = 60;       // docs/cost-model.md: 4 x tb_copy_GBps
  return t;
}

/// Largest cluster the a100 family generates (GPUs in all).
constexpr int64_t kMaxGpus = int64_t{1} << 20;

}  // namespace

std::vector<std::string> topology_preset_names() {
  return {"h200-1x2", "h200-1x4", "h200-1x8", "a100-NxG (N >= 1 nodes, G in 1, 2, 4, 8)"};
}

Topology topology_preset(const std::string& name) {
  int64_t n = 0, g = 0;
  if (parse_shape(name, "h200-", n, g)) {
    if (n != 1 || (g != 2 && g != 4 && g != 8)) unknown_preset(name, " (h200 presets are one node of 2, 4 or 8 GPUs)");
    return h200(static_cast<int32_t>(g));
  }
  if (parse_shape(name, "a100-", n, g)) {
    if (g != 1 && g != 2 && g != 4 && g != 8) unknown_preset(name, " (a100 nodes have 1, 2, 4 or 8 GPUs)");
    if (n < 1 || n * g > kMaxGpus)
      unknown_preset(name, text::format(" (a100 clusters have 1 to %lld GPUs)", static_cast<long long>(kMaxGpus)));
    return a100(static_cast<int32_t>(n), static_cast<int32_t>(g));
  }
  unknown_preset(name, "");
}

std::string topology_to_json(const Topology& t) {
  json j = json::object();
  j["format"] = kFormat;
  j["version"] = kVersion;
  for (const Field& f : fields()) j[f.name] = f.get(t);
  // nlohmann sorts object keys; keep the documented order instead for people reading it.
  std::string out = "{\n";
  std::vector<std::string> order = {"format", "version"};
  for (const Field& f : fields()) order.push_back(f.name);
  for (size_t i = 0; i < order.size(); ++i)
    out += "  \"" + order[i] + "\": " + j[order[i]].dump() + (i + 1 < order.size() ? ",\n" : "\n");
  return out + "}\n";
}

Topology topology_from_json(std::string_view text, const std::string& origin) {
  json j = parse_json(text, origin, "the topology file");
  auto bad = [&](const std::string& what) { fail(ErrorCode::Parse, origin + ": " + what); };
  if (!j.is_object()) bad("a topology file must hold one JSON object");
  if (!j.contains("format") || j["format"] != kFormat) bad(text::format("field 'format' must be \"%s\"", kFormat));
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion)
    bad(text::format("field 'version' must be %d (the only version of the format)", kVersion));

  Topology t;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "format" || key == "version") continue;
    const Field* field = nullptr;
    for (const Field& f : fields())
      if (key == f.name) field = &f;
    if (!field) bad("unknown field '" + key + "' (docs/topology.md lists the fields)");
    std::string e = field->set(t, it.value());
    if (!e.empty()) bad("field '" + key + "' " + e);
  }
  for (const Field& f : fields())
    if (std::string(f.name) != "description" && std::string(f.name) != "tb_local_GBps" &&
        std::string(f.name) != "intra_node_link" && !j.contains(f.name))
      bad(std::string("missing field '") + f.name + "'");
  try {
    t.validate();
  } catch (const Error& e) {
    fail(ErrorCode::InvalidArgument, origin + ": " + e.what());
  }
  return t;
}

Topology load_topology(const std::string& spec) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(spec, ec)) {
    if (spec.find('/') != std::string::npos || spec.ends_with(".json"))
      fail(ErrorCode::InvalidArgument, "cannot open topology file '" + spec + "': no such file");
    return topology_preset(spec);
  }
  std::ifstream in(spec, std::ios::binary);
  if (!in) fail(ErrorCode::System, "cannot open topology file '" + spec + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail(ErrorCode::System, "cannot read topology file '" + spec + "'");
  return topology_from_json(text.str(), spec);
}

}  // namespace weft
