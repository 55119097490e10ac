#include "tune/selection_table.hpp"

#include <algorithm>

#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "tune/selection.hpp"
#include "util/config.hpp"
#include "util/error.hpp"
#include "util/json_text.hpp"
#include "util/text.hpp"

namespace weft {

namespace {

using json = nlohmann::json;

constexpr const char* kFormat = "weft-selection";
constexpr int kVersion = 1;
constexpr int kMaxInstances = 1024;
constexpr uint64_t kMinMicrobatch = 16, kMaxMicrobatch = 1ull << 40;  // WEFT_MICROBATCH_BYTES's upper bound

/// "A", "A or B", "A, B or C" of quoted names, for messages.
std::string either(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + ("\"" + names[i] + "\"");
  return s;
}

bool listed(const std::vector<std::string>& names, const std::string& v) {
  return std::find(names.begin(), names.end(), v) != names.end();
}

/// 1-based line of byte `at` in `text`.
int line_of(std::string_view text, size_t at) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(std::min(at, text.size())), '\n'));
}

/// Lines where the objects of the top-level arrays start (the rows, in order), found by
/// scanning brackets outside strings: nlohmann keeps no positions for values.
std::vector<int> row_lines(std::string_view text) {
  std::vector<int> lines;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '{' || ch == '[') {
      if (depth == 2) lines.push_back(line_of(text, i));
      ++depth;
    } else if (ch == '}' || ch == ']') {
      --depth;
    }
  }
  return lines;
}

/// Reads one row's fields; every complaint names the file, the row's line and the path.
class RowReader {
 public:
  RowReader(const std::string& origin, int line, std::string path) : origin_(origin), line_(line), path_(std::move(path)) {}

  [[noreturn]] void bad(const std::string& field, const std::string& what) const {
    fail(ErrorCode::Parse, text::format("%s:%d: %s%s%s: %s", origin_.c_str(), line_, path_.c_str(),
                                        field.empty() ? "" : ".", field.c_str(), what.c_str()));
  }

  uint64_t unsigned_value(const json& v, const std::string& field) const {
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
      bad(field, "expected a non-negative integer, got " + v.dump());
    return v.get<uint64_t>();
  }

  /// [lo, hi] or [lo, null] (no upper bound).
  Range range(const json& row, const std::string& field, Range dflt) const {
    if (!row.contains(field)) return dflt;
    const json& v = row.at(field);
    if (!v.is_array() || v.size() != 2) bad(field, "expected [low, high] (high may be null: no limit), got " + v.dump());
    Range r;
    r.lo = unsigned_value(v[0], field + "[0]");
    r.hi = v[1].is_null() ? UINT64_MAX : unsigned_value(v[1], field + "[1]");
    if (r.hi < r.lo) bad(field, "is empty: high " + v[1].dump() + " is below low " + v[0].dump());
    return r;
  }

  std::string string(const json& row, const std::string& field) const {
    if (!row.contains(field)) bad(field, "missing");
    if (!row.at(field).is_string()) bad(field, "expected a string, got " + row.at(field).dump());
    return row.at(field).get<std::string>();
  }

  int instances_bound(const json& v, const std::string& field) const {
    uint64_t n = unsigned_value(v, field);
    if (n < 1 || n > kMaxInstances) bad(field, text::format("%llu is not in 1..%d", static_cast<unsigned long long>(n), kMaxInstances));
    return static_cast<int>(n);
  }

 private:
  const std::string& origin_;
  int line_;
  std::string path_;
};

SelectionRow read_row(const json& row, const RowReader& in) {
  if (!row.is_object()) in.bad("", "a row must be a JSON object");
  for (auto it = row.begin(); it != row.end(); ++it) {
    static const char* known[] = {"collectives", "ranks",     "bytes",     "sent_bytes", "algorithm",
                                  "protocol",    "instances", "scheduler", "allocator",  "note",      "placement",
                                  "microbatch_bytes", "executor"};
    if (std::none_of(std::begin(known), std::end(known), [&](const char* k) { return it.key() == k; }))
      in.bad(it.key(), "unknown field (docs/runtime.md lists a row's fields)");
  }
  SelectionRow r;
  if (!row.contains("collectives")) in.bad("collectives", "missing");
  const json& cs = row.at("collectives");
  if (!cs.is_array() || cs.empty()) in.bad("collectives", "expected a non-empty array of collective names");
  for (size_t i = 0; i < cs.size(); ++i) {
    std::string field = "collectives[" + std::to_string(i) + "]";
    auto c = cs[i].is_string() ? collective_from_string(cs[i].get<std::string>()) : std::nullopt;
    if (!c || *c == Collective::Custom)
      in.bad(field, cs[i].dump() + " is not AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast or Reduce");
    r.collectives.push_back(*c);
    r.collective_mask |= static_cast<uint8_t>(1u << static_cast<unsigned>(*c));
  }
  r.ranks = in.range(row, "ranks", Range{1, UINT64_MAX});
  if (r.ranks.lo < 1) in.bad("ranks", "a communicator has at least 1 rank");
  r.bytes = in.range(row, "bytes", Range{});
  r.sent_bytes = in.range(row, "sent_bytes", Range{});
  if (row.contains("placement")) {
    std::string p = in.string(row, "placement");
    if (p != "in" && p != "out") in.bad("placement", "is \"" + p + "\", expected \"in\" or \"out\"");
    for (Collective c : r.collectives)
      if (c == Collective::Broadcast || c == Collective::Reduce)
        in.bad("placement", "cannot apply to " + std::string(to_string(c)) +
                                ": its root alone is in place, and every rank must choose the same plan");
    r.placement = p == "in" ? 1 : 0;
  }
  r.algorithm = in.string(row, "algorithm");
  r.protocol = in.string(row, "protocol");
  if (!listed(selection_protocols(), r.protocol))
    in.bad("protocol", "is \"" + r.protocol + "\", expected " + either(selection_protocols()));
  r.proto = *algo::protocol_from_string(r.protocol);
  if (!row.contains("instances")) in.bad("instances", "missing");
  const json& inst = row.at("instances");
  if (inst.is_string()) {
    if (inst.get<std::string>() != "kernel") in.bad("instances", "the only word is \"kernel\" (the one-shot kernel's rule)");
    r.kernel = true;
  } else if (inst.is_object()) {
    for (auto it = inst.begin(); it != inst.end(); ++it)
      if (it.key() != "per_bytes" && it.key() != "min" && it.key() != "max")
        in.bad("instances." + it.key(), "unknown field (per_bytes, min, max)");
    for (const char* k : {"per_bytes", "min", "max"})
      if (!inst.contains(k)) in.bad(std::string("instances.") + k, "missing");
    r.per_bytes = in.unsigned_value(inst.at("per_bytes"), "instances.per_bytes");
    if (r.per_bytes == 0) in.bad("instances.per_bytes", "must be positive");
    r.min = in.instances_bound(inst.at("min"), "instances.min");
    r.max = in.instances_bound(inst.at("max"), "instances.max");
    if (r.max < r.min) in.bad("instances", "max is below min");
  } else {
    r.min = r.max = in.instances_bound(inst, "instances");
  }
  if (row.contains("scheduler")) r.scheduler = in.string(row, "scheduler");
  if (row.contains("allocator")) r.allocator = in.string(row, "allocator");
  if (row.contains("note") && !row.at("note").is_string()) in.bad("note", "expected a string");
  if (row.contains("microbatch_bytes")) {
    r.microbatch_bytes = in.unsigned_value(row.at("microbatch_bytes"), "microbatch_bytes");
    if (r.microbatch_bytes < kMinMicrobatch || r.microbatch_bytes > kMaxMicrobatch)
      in.bad("microbatch_bytes", text::format("%llu is not in %llu..%llu (bytes per chunk slot and micro-batch)",
                                              static_cast<unsigned long long>(r.microbatch_bytes),
                                              static_cast<unsigned long long>(kMinMicrobatch),
                                              static_cast<unsigned long long>(kMaxMicrobatch)));
  }
  if (row.contains("executor")) {
    r.executor = in.string(row, "executor");
    if (!listed(selection_executors(), r.executor))
      in.bad("executor", "is \"" + r.executor + "\", expected " + either(selection_executors()));
    r.plan_executor = r.executor == "gen" ? algo::Executor::Generated : algo::Executor::Interpreter;
  }

  // What the algorithm names must be able to run.
  r.algorithm_id = algo::registry().named(r.algorithm);
  if (r.algorithm_id == algo::kOneShot) {
    for (Collective c : r.collectives)
      if (!algo::registry().at(algo::kOneShot).implements(c))
        in.bad("algorithm", "oneshot runs AllReduce, AllGather, ReduceScatter, Broadcast, Reduce and AllToAll, not " +
                                std::string(to_string(c)));
    if (r.protocol != "LL") in.bad("protocol", "oneshot is LL by nature");
    if (!r.kernel) in.bad("instances", "oneshot takes \"kernel\" (its blocks follow from the payload)");
    if (row.contains("microbatch_bytes")) in.bad("microbatch_bytes", "oneshot has no micro-batches (it runs no plan)");
    if (row.contains("executor")) in.bad("executor", "oneshot is its own kernel, neither interpreted nor generated");
    return r;
  }
  if (r.kernel) in.bad("instances", "\"kernel\" is for oneshot only");
  if (r.algorithm_id == algo::kCopyEngine) {  // copy engines (exec/ce_runner.hpp)
    for (Collective c : r.collectives)
      if (!algo::registry().at(algo::kCopyEngine).implements(c))
        in.bad("algorithm", "ce runs AllGather, AllReduce, AllToAll and Broadcast, not " + std::string(to_string(c)));
    return r;
  }
  if (r.algorithm == "p2p") in.bad("algorithm", "p2p is weftSend/weftRecv's primitive, not a collective's");
  if (r.algorithm.empty()) in.bad("algorithm", "is empty");
  if (r.algorithm_id != algo::kNone) {  // hand-built
    for (Collective c : r.collectives) {
      if (!algo::registry().at(r.algorithm_id).implements(c))
        in.bad("algorithm", "the hand-built plans have no " + r.algorithm + " for " + std::string(to_string(c)));
    }
    return r;
  }
  BuildOptions bo;
  bo.compile.scheduler = r.scheduler == "auto" ? "hpds" : r.scheduler;  // auto: tune/auto_schedule.hpp
  bo.compile.allocator = r.allocator;
  try {
    check_build_options(bo);
  } catch (const Error& e) {
    in.bad(row.contains("scheduler") ? "scheduler" : "allocator", e.what());
  }
  if (source_kind(r.algorithm) == SourceKind::Builtin) {
    auto names = builtin_algorithm_names();
    if (std::find(names.begin(), names.end(), r.algorithm) == names.end() && !embedded_algorithm(r.algorithm))
      in.bad("algorithm", "'" + r.algorithm + "' is neither a named primitive (oneshot, ring, allpairs, chain) nor an algorithm of " +
                              data_dir() + "/algorithms, nor dsl:NAME or a file");
  }
  r.algorithm_id = algo::registry().compiled(r.algorithm, r.scheduler, r.allocator);
  return r;
}

}  // namespace

const std::vector<std::string>& selection_protocols() {
  static const std::vector<std::string> p = {"Simple", "LL", "LL128"};
  return p;
}

const std::vector<std::string>& selection_executors() {
  static const std::vector<std::string> e = {"interp", "gen"};
  return e;
}

SelectionTable parse_selection_table(std::string_view text, const std::string& origin) {
  json j = parse_json(text, origin, "the selection table");
  RowReader top(origin, 1, "(top)");
  if (!j.is_object()) top.bad("", "a selection table is one JSON object");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "format" && it.key() != "version" && it.key() != "description" && it.key() != "rows")
      top.bad(it.key(), "unknown field (format, version, description, rows)");
  if (!j.contains("format") || j["format"] != kFormat) top.bad("format", text::format("must be \"%s\"", kFormat));
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != kVersion)
    top.bad("version", text::format("must be %d (the only version of the format)", kVersion));
  if (j.contains("description") && !j["description"].is_string()) top.bad("description", "expected a string");
  if (!j.contains("rows") || !j["rows"].is_array() || j["rows"].empty())
    top.bad("rows", "expected a non-empty array of rows");
  SelectionTable t;
  t.origin = origin;
  const std::vector<int> lines = row_lines(text);
  const json& rows = j["rows"];
  for (size_t i = 0; i < rows.size(); ++i) {
    int line = i < lines.size() ? lines[i] : 1;
    SelectionRow r = read_row(rows[i], RowReader(origin, line, "rows[" + std::to_string(i) + "]"));
    r.line = line;
    t.rows.push_back(std::move(r));
  }
  return t;
}

SelectionTable load_selection_table(const std::string& path) {
  std::optional<std::string> contents = text::read_file(path);
  if (!contents) fail(ErrorCode::System, "cannot read the selection table '" + path + "'");
  return parse_selection_table(*contents, path);
}

SelectionTable compose_selection_tables(const SelectionTable& fallback,
                                        const std::vector<std::pair<int, SelectionTable>>& per_count) {
  if (per_count.empty()) return fallback;
  SelectionTable t;
  std::vector<int> seen;
  std::string origins;
  for (const auto& [n, table] : per_count) {
    if (n < 1) fail(ErrorCode::Parse, text::format("%s: a table for %d ranks; a communicator has at least 1", table.origin.c_str(), n));
    if (std::find(seen.begin(), seen.end(), n) != seen.end())
      fail(ErrorCode::Parse, text::format("%s: a second table for %d ranks (one table per rank count)", table.origin.c_str(), n));
    seen.push_back(n);
    origins += table.origin + ", ";
    const uint64_t want = static_cast<uint64_t>(n);
    for (size_t i = 0; i < table.rows.size(); ++i) {
      SelectionRow r = table.rows[i];
      if (!r.ranks.contains(want))
        fail(ErrorCode::Parse, text::format("%s:%d: rows[%zu].ranks: [%llu, %s] leaves out %d, the rank count this table is for",
                                            table.origin.c_str(), r.line, i, static_cast<unsigned long long>(r.ranks.lo),
                                            r.ranks.hi == UINT64_MAX ? "null" : std::to_string(r.ranks.hi).c_str(), n));
      r.ranks = Range{want, want};
      t.rows.push_back(std::move(r));
    }
  }
  t.origin = origins + fallback.origin;
  t.rows.insert(t.rows.end(), fallback.rows.begin(), fallback.rows.end());
  return t;
}

const SelectionTable& default_json_table() {
  static const SelectionTable t = parse_selection_table(default_selection_text(), "(built-in selection/default.json)");
  return t;
}

const SelectionTable& default_selection_table() {
  static const SelectionTable t = [] {
    std::vector<std::pair<int, SelectionTable>> per_count;
    for (const RankTableText& rt : builtin_rank_table_texts())
      per_count.emplace_back(rt.ranks, parse_selection_table(rt.text, "(built-in selection/" + std::string(rt.file) + ")"));
    return compose_selection_tables(default_json_table(), per_count);
  }();
  return t;
}

std::shared_ptr<const SelectionTable> selection_table_for_environment() {
  std::string path = config::get_string("WEFT_SELECTION");
  if (path.empty()) return std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &default_selection_table());
  return std::make_shared<const SelectionTable>(load_selection_table(path));
}

Choice SelectionTable::choose(Collective c, uint64_t bytes, int nranks, bool in_place, bool plans_only) const {
  const SelectionRow* r = match(c, bytes, nranks, in_place, plans_only);
  if (r == nullptr) no_row(c, bytes, nranks, in_place, plans_only);
  if (r->algorithm_id == algo::kOneShot) return Choice{kOneShot, "LL", r->instances_for(c, bytes, nranks)};
  Choice ch;
  ch.algorithm = r->algorithm;
  ch.protocol = r->protocol;
  ch.instances = r->instances_for(c, bytes, nranks);
  ch.scheduler = r->scheduler;
  ch.allocator = r->allocator;
  ch.microbatch_bytes = r->microbatch_bytes;
  ch.executor = r->executor;
  return ch;
}

void SelectionTable::no_row(Collective c, uint64_t bytes, int nranks, bool in_place, bool plans_only) const {
  fail(ErrorCode::InvalidUsage,
       text::format("the selection table %s has no row for %s of %llu bytes on %d ranks, %s%s", origin.c_str(),
                    std::string(to_string(c)).c_str(), static_cast<unsigned long long>(bytes), nranks,
                    in_place ? "in place" : "out of place", plans_only ? " (other than oneshot)" : ""));
}

std::string describe_choice(const Choice& ch) {
  if (ch.algorithm == kOneShot) return text::format("oneshot (kernel, %d blocks)", ch.instances);
  if (ch.algorithm == algo::kCopyEngineName) return "ce (copy engines into registered buffers, else the SM path)";
  // A row's micro-batch and executor, where it names them.
  std::string extra = ch.microbatch_bytes > 0 ? ", mb " + text::format_bytes(ch.microbatch_bytes) : "";
  if (!ch.executor.empty()) extra += ", " + ch.executor;
  if (algo::is_hand_built(ch.algorithm))
    return text::format("%s (hand-built, %s, x%d%s)", ch.algorithm.c_str(), ch.protocol.c_str(), ch.instances, extra.c_str());
  if (source_kind(ch.algorithm) == SourceKind::PlanFile)
    return text::format("%s (plan file, %s%s)", ch.algorithm.c_str(), ch.protocol.c_str(), extra.c_str());
  return text::format("%s (compiled %s/%s, %s, x%d%s)", ch.algorithm.c_str(), ch.scheduler.c_str(), ch.allocator.c_str(),
                      ch.protocol.c_str(), ch.instances, extra.c_str());
}

}  // namespace weft
