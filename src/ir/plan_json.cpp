#include "ir/plan_json.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

constexpr const char* kFormat = "weft-plan";

void put_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += text::format("\\u%04x", c);
        else out.push_back(c);
    }
  }
  out.push_back('"');
}

void put_range(std::string& out, const BufferRange& r) {
  out += "[";
  put_string(out, to_string(r.buffer));
  out += ", " + std::to_string(r.index) + "]";
}

using nlohmann::json;

/// Typed access to a JSON object with errors naming the file and the path.
class Reader {
 public:
  Reader(const std::string& origin) : origin_(origin) {}

  [[noreturn]] void bad(const std::string& path, const std::string& what) const {
    fail(ErrorCode::Parse, origin_ + ": " + path + ": " + what);
  }
  const json& field(const json& obj, const std::string& path, const char* name) const {
    if (!obj.is_object()) bad(path, "expected an object");
    auto it = obj.find(name);
    if (it == obj.end()) bad(path, std::string("missing field \"") + name + "\"");
    return *it;
  }
  int32_t integer(const json& v, const std::string& path) const {
    if (!v.is_number_integer()) bad(path, "expected an integer");
    int64_t x = v.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX) bad(path, "integer out of range");
    return static_cast<int32_t>(x);
  }
  int32_t integer(const json& obj, const std::string& path, const char* name) const {
    return integer(field(obj, path, name), path + "." + name);
  }
  std::string string(const json& obj, const std::string& path, const char* name) const {
    const json& v = field(obj, path, name);
    if (!v.is_string()) bad(path + "." + name, "expected a string");
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& path, const char* name) const {
    const json& v = field(obj, path, name);
    if (!v.is_boolean()) bad(path + "." + name, "expected true or false");
    return v.get<bool>();
  }
  const json& array(const json& obj, const std::string& path, const char* name) const {
    const json& v = field(obj, path, name);
    if (!v.is_array()) bad(path + "." + name, "expected an array");
    return v;
  }
  /// Refuses a field of `obj` that is not one of `known` (a misspelt field would otherwise be
  /// dropped silently).
  void only(const json& obj, const std::string& path, std::initializer_list<const char*> known) const {
    if (!obj.is_object()) bad(path, "expected an object");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (!ok) {
        std::string names;
        for (const char* k : known) names += std::string(names.empty() ? "" : ", ") + k;
        bad(path, "unknown field \"" + it.key() + "\" (the fields are " + names + "; docs/plan-format.md)");
      }
    }
  }
  BufferRange range(const json& obj, const std::string& path, const char* name) const {
    const json& v = field(obj, path, name);
    std::string p = path + "." + name;
    if (!v.is_array() || v.size() != 2 || !v[0].is_string()) bad(p, "expected [buffer, index]");
    auto b = buffer_from_string(v[0].get<std::string>());
    if (!b) bad(p, "unknown buffer \"" + v[0].get<std::string>() + "\" (input, output or scratch)");
    return {*b, integer(v[1], p + "[1]")};
  }

 private:
  std::string origin_;
};

Slot read_slot(const Reader& in, const json& j, const std::string& path) {
  in.only(j, path, {"primitive", "send_peer", "recv_peer", "channel", "src", "dst", "count", "instance", "instances",
                    "subpipeline", "deps", "tasks"});
  Slot s;
  std::string prim = in.string(j, path, "primitive");
  auto p = primitive_from_string(prim);
  if (!p) in.bad(path + ".primitive", "unknown primitive \"" + prim + "\"");
  s.primitive = *p;
  s.send_peer = in.integer(j, path, "send_peer");
  s.recv_peer = in.integer(j, path, "recv_peer");
  s.channel = in.integer(j, path, "channel");
  s.src = in.range(j, path, "src");
  s.dst = in.range(j, path, "dst");
  s.count = in.integer(j, path, "count");
  s.instance = in.integer(j, path, "instance");
  s.instances = in.integer(j, path, "instances");
  s.subpipeline = in.integer(j, path, "subpipeline");
  const json& deps = in.array(j, path, "deps");
  for (size_t i = 0; i < deps.size(); ++i) {
    std::string dp = path + ".deps[" + std::to_string(i) + "]";
    if (!deps[i].is_array() || deps[i].size() != 2) in.bad(dp, "expected [thread block, slot]");
    s.deps.push_back({in.integer(deps[i][0], dp + "[0]"), in.integer(deps[i][1], dp + "[1]")});
  }
  const json& tasks = in.array(j, path, "tasks");
  for (size_t i = 0; i < tasks.size(); ++i) s.tasks.push_back(in.integer(tasks[i], path + ".tasks[" + std::to_string(i) + "]"));
  return s;
}

}  // namespace

std::string plan_to_json(const Plan& p) {
  std::string out;
  out += "{\n  \"format\": ";
  put_string(out, kFormat);
  out += ",\n  \"version\": " + std::to_string(p.version);
  out += ",\n  \"algorithm\": ";
  put_string(out, p.algorithm);
  out += ",\n  \"collective\": ";
  put_string(out, to_string(p.collective));
  out += ",\n  \"num_ranks\": " + std::to_string(p.num_ranks);
  out += ",\n  \"input_chunks\": " + std::to_string(p.input_chunks);
  out += ",\n  \"output_chunks\": " + std::to_string(p.output_chunks);
  out += ",\n  \"scratch_chunks\": " + std::to_string(p.scratch_chunks);
  out += std::string(",\n  \"in_place\": ") + (p.in_place ? "true" : "false");
  out += ",\n  \"root\": " + std::to_string(p.root);
  out += ",\n  \"protocol\": ";
  put_string(out, p.protocol);
  out += ",\n  \"execution\": ";
  put_string(out, to_string(p.execution));
  out += ",\n  \"scheduler\": ";
  put_string(out, p.scheduler);
  out += ",\n  \"allocator\": ";
  put_string(out, p.allocator);
  out += ",\n  \"topology\": ";
  put_string(out, p.topology);
  out += ",\n  \"num_subpipelines\": " + std::to_string(p.num_subpipelines);
  out += ",\n  \"ranks\": [";
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPlan& rp = p.ranks[r];
    out += r ? ",\n" : "\n";
    out += "    {\"rank\": " + std::to_string(rp.rank) + ", \"tbs\": [";
    for (size_t t = 0; t < rp.tbs.size(); ++t) {
      out += t ? ",\n" : "\n";
      out += "      {\"slots\": [";
      const auto& slots = rp.tbs[t].slots;
      for (size_t i = 0; i < slots.size(); ++i) {
        const Slot& s = slots[i];
        out += i ? ",\n" : "\n";
        out += "        {\"primitive\": ";
        put_string(out, to_string(s.primitive));
        out += ", \"send_peer\": " + std::to_string(s.send_peer) + ", \"recv_peer\": " + std::to_string(s.recv_peer);
        out += ", \"channel\": " + std::to_string(s.channel) + ", \"src\": ";
        put_range(out, s.src);
        out += ", \"dst\": ";
        put_range(out, s.dst);
        out += ", \"count\": " + std::to_string(s.count) + ", \"instance\": " + std::to_string(s.instance);
        out += ", \"instances\": " + std::to_string(s.instances) + ", \"subpipeline\": " + std::to_string(s.subpipeline);
        out += ", \"deps\": [";
        for (size_t d = 0; d < s.deps.size(); ++d)
          out += (d ? ", [" : "[") + std::to_string(s.deps[d].tb) + ", " + std::to_string(s.deps[d].slot) + "]";
        out += "], \"tasks\": [";
        for (size_t k = 0; k < s.tasks.size(); ++k) out += (k ? ", " : "") + std::to_string(s.tasks[k]);
        out += "]}";
      }
      out += slots.empty() ? "]}" : "\n      ]}";
    }
    out += rp.tbs.empty() ? "]}" : "\n    ]}";
  }
  out += p.ranks.empty() ? "]" : "\n  ]";
  if (!p.links.empty()) {  // written only when recorded, so plans without them read back equal
    out += ",\n  \"links\": [";
    for (size_t i = 0; i < p.links.size(); ++i) {
      const PlanLink& l = p.links[i];
      out += text::format("%s\n    {\"src\": %d, \"dst\": %d, \"channel\": \"%s\"}", i ? "," : "", l.src, l.dst,
                          std::string(to_string(l.channel)).c_str());
    }
    out += "\n  ]";
  }
  out += "\n}\n";
  return out;
}

Plan plan_from_json(std::string_view text, const std::string& origin) {
  const json j = parse_json(text, origin, "the plan");  // file:line:col of malformed text
  Reader in(origin);
  if (!j.is_object()) in.bad("(top)", "expected a JSON object");
  in.only(j, "(top)", {"format", "version", "algorithm", "collective", "num_ranks", "input_chunks", "output_chunks",
                       "scratch_chunks", "in_place", "root", "protocol", "execution", "scheduler", "allocator", "topology",
                       "num_subpipelines", "ranks", "links"});
  std::string format = in.string(j, "(top)", "format");
  if (format != kFormat) in.bad("format", "is \"" + format + "\", expected \"" + kFormat + "\"");
  Plan p;
  p.version = in.integer(j, "(top)", "version");
  if (p.version > Plan::kVersion || p.version < 1)
    in.bad("version", text::format("plan format version %d is not supported (this weft reads version %d)", p.version,
                                   Plan::kVersion));
  p.algorithm = in.string(j, "(top)", "algorithm");
  std::string coll = in.string(j, "(top)", "collective");
  auto c = collective_from_string(coll);
  if (!c) in.bad("collective", "unknown collective \"" + coll + "\"");
  p.collective = *c;
  p.num_ranks = in.integer(j, "(top)", "num_ranks");
  p.input_chunks = in.integer(j, "(top)", "input_chunks");
  p.output_chunks = in.integer(j, "(top)", "output_chunks");
  p.scratch_chunks = in.integer(j, "(top)", "scratch_chunks");
  p.in_place = in.boolean(j, "(top)", "in_place");
  p.root = in.integer(j, "(top)", "root");
  p.protocol = in.string(j, "(top)", "protocol");
  if (p.protocol != "Simple" && p.protocol != "LL" && p.protocol != "LL128")
    in.bad("protocol", "is \"" + p.protocol + "\", expected \"Simple\", \"LL\" or \"LL128\"");
  std::string exec = in.string(j, "(top)", "execution");
  if (exec == "task") p.execution = ExecutionModel::Task;
  else if (exec == "algorithm") p.execution = ExecutionModel::Algorithm;
  else in.bad("execution", "is \"" + exec + "\", expected \"task\" or \"algorithm\"");
  p.scheduler = in.string(j, "(top)", "scheduler");
  p.allocator = in.string(j, "(top)", "allocator");
  p.topology = in.string(j, "(top)", "topology");
  p.num_subpipelines = in.integer(j, "(top)", "num_subpipelines");
  if (p.num_ranks > 0 && (p.root < 0 || p.root >= p.num_ranks))
    in.bad("root", text::format("%d is not a rank in [0, %d)", p.root, p.num_ranks));
  const json& ranks = in.array(j, "(top)", "ranks");
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::string rpath = "ranks[" + std::to_string(r) + "]";
    RankPlan rp;
    in.only(ranks[r], rpath, {"rank", "tbs"});
    rp.rank = in.integer(ranks[r], rpath, "rank");
    const json& tbs = in.array(ranks[r], rpath, "tbs");
    for (size_t t = 0; t < tbs.size(); ++t) {
      std::string tpath = rpath + ".tbs[" + std::to_string(t) + "]";
      ThreadBlock tb;
      in.only(tbs[t], tpath, {"slots"});
      const json& slots = in.array(tbs[t], tpath, "slots");
      for (size_t i = 0; i < slots.size(); ++i)
        tb.slots.push_back(read_slot(in, slots[i], tpath + ".slots[" + std::to_string(i) + "]"));
      rp.tbs.push_back(std::move(tb));
    }
    p.ranks.push_back(std::move(rp));
  }
  if (j.contains("links")) {
    const json& links = in.array(j, "(top)", "links");
    for (size_t i = 0; i < links.size(); ++i) {
      const std::string lpath = "links[" + std::to_string(i) + "]";
      in.only(links[i], lpath, {"src", "dst", "channel"});
      PlanLink l;
      l.src = in.integer(links[i], lpath, "src");
      l.dst = in.integer(links[i], lpath, "dst");
      const std::string kind = in.string(links[i], lpath, "channel");
      auto k = channel_kind_from_string(kind);
      if (!k) in.bad(lpath + ".channel", "is \"" + kind + "\", expected \"memory\", \"port-ce\" or \"port-net\"");
      l.channel = *k;
      p.links.push_back(l);
    }
  }
  try {
    validate_plan(p);
  } catch (const Error& e) {
    fail(ErrorCode::Verify, origin + ": " + e.what());
  }
  return p;
}

Plan load_plan(const std::string& path) {
  std::optional<std::string> contents = text::read_file(path);
  if (!contents) fail(ErrorCode::System, "cannot read plan file " + path);
  return plan_from_json(*contents, path);
}

void save_plan(const Plan& plan, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(ErrorCode::System, "cannot write plan file " + path);
  std::string text = plan_to_json(plan);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  f.close();
  if (!f) fail(ErrorCode::System, "cannot write plan file " + path);
}

}  // namespace weft
