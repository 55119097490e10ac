#include "lang/resccl_header.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>

#include "util/text.hpp"

namespace weft::resccl {
namespace {

constexpr std::string_view kStringParams[] = {"AlgoName", "OpType", "Protocol"};
constexpr std::string_view kIntParams[] = {"nRanks",  "nChannels", "nWarps", "GPUPerNode", "NICPerNode",
                                           "nChunks", "nScratch",  "Root",   "InPlace"};

/// One parameter's value and where it came from, for error messages.
struct Entry {
  bool is_string = false;
  int64_t int_value = 0;
  std::string str_value;
  int32_t expr = -1;  ///< the header's expression for an integer value; -1: none
  int line = 0;       ///< 0: not written in the header
  int column = 0;
  bool overridden = false;
  /// Parameters set by --param that the value was computed from, directly or through
  /// other parameters ("nRanks=16"), so that an error can say why the value is what it is.
  std::vector<std::string> from_overrides;
};

class Resolver {
 public:
  Resolver(const SourceText& src, const Program& prog) : src_(src), prog_(prog) {}

  HeaderValues run(const std::map<std::string, std::string>& overrides, const std::string& default_name) {
    for (const HeaderParam& hp : prog_.params) {
      Entry e;
      e.is_string = hp.is_string;
      e.expr = hp.expr;
      e.str_value = hp.str_value;
      e.line = hp.line;
      e.column = hp.column;
      entries_[hp.name] = std::move(e);
    }
    for (const auto& [name, value] : overrides) {
      apply_override(name, value);
      check_fixed_range(name);
    }
    // The header's values in the order written: a value reads only parameters written
    // before it (the parser checks), so each is final when a later one reads it, and an
    // override replaces a value before anything reads it.
    for (const HeaderParam& hp : prog_.params) {
      Entry& e = entries_[hp.name];
      if (e.is_string || e.overridden) continue;
      current_ = &hp;
      e.from_overrides.clear();
      e.int_value = value_of(hp.expr, e.from_overrides);
      // A parameter with fixed bounds is checked before a later value reads it, so that
      // GPUPerNode=0 is reported as such and not as a division by zero further on.
      check_fixed_range(hp.name);
    }

    HeaderValues h;
    const Entry* ranks = find("nRanks");
    if (ranks == nullptr) header_error("the header must set nRanks, the number of ranks");
    h.ranks = ranks->int_value;
    check_range("nRanks", 1, INT32_MAX);
    const Entry* op = find("OpType");
    if (op == nullptr) header_error("the header must set OpType, the collective (such as OpType=\"Allreduce\")");
    std::optional<Collective> c = collective_from_string(op->str_value);
    if (!c)
      at(*op, "OpType \"" + printable(op->str_value) +
                  "\" is not a collective; expected Allgather, Allreduce, Reducescatter, Alltoall, Broadcast, "
                  "Reduce or Custom");
    h.collective = *c;

    h.channels = int_or("nChannels", 1, 1, INT32_MAX);
    h.warps = int_or("nWarps", 16, 1, INT32_MAX);
    h.gpus_per_node = int_or("GPUPerNode", h.ranks, 1, INT32_MAX);
    if (h.ranks % h.gpus_per_node != 0) {
      // Ranks fill whole nodes; an algorithm evaluated for a partial node (the runtime once
      // passed 2 ranks to HM AllGather with its default GPUPerNode=4) names peers that do not exist.
      const Entry* where = find("GPUPerNode");
      at(where ? *where : *ranks,
         text::format("nRanks (%lld) must be a multiple of GPUPerNode (%lld): the ranks fill nodes of GPUPerNode GPUs "
                      "(on one node, set GPUPerNode=nRanks)",
                      static_cast<long long>(h.ranks), static_cast<long long>(h.gpus_per_node)));
    }
    h.nics_per_node = int_or("NICPerNode", 0, 0, INT32_MAX);
    h.chunks = int_or("nChunks", h.ranks, 1, INT32_MAX);
    h.scratch = int_or("nScratch", 0, 0, INT32_MAX);
    h.root = int_or("Root", 0, 0, h.ranks - 1);
    h.in_place = int_or("InPlace", 1, 0, 1) != 0;
    if ((h.collective == Collective::AllGather || h.collective == Collective::ReduceScatter) &&
        h.chunks % h.ranks != 0) {
      const Entry* where = find("nChunks");
      at(where ? *where : *ranks,
         text::format("nChunks (%lld) must be a multiple of nRanks (%lld) for %s, whose ranks each own "
                      "nChunks/nRanks chunks",
                      static_cast<long long>(h.chunks), static_cast<long long>(h.ranks),
                      std::string(to_string(h.collective)).c_str()));
    }

    if (const Entry* name = find("AlgoName"))
      h.algo_name = name->str_value;
    else
      h.algo_name = default_name;
    if (const Entry* proto = find("Protocol")) {
      std::string l = lower(proto->str_value);
      if (l == "simple") h.protocol = "Simple";
      else if (l == "ll") h.protocol = "LL";
      else if (l == "ll128") h.protocol = "LL128";
      else at(*proto, "Protocol \"" + printable(proto->str_value) + "\" is not one of Simple, LL or LL128");
    }

    h.variables = {{"nRanks", h.ranks},         {"nChannels", h.channels}, {"nWarps", h.warps},
                   {"GPUPerNode", h.gpus_per_node}, {"NICPerNode", h.nics_per_node}, {"nChunks", h.chunks},
                   {"nScratch", h.scratch},     {"Root", h.root},          {"InPlace", h.in_place ? 1 : 0}};
    for (const auto& [name, e] : entries_)
      if (!is_known_param(name)) h.variables[name] = e.int_value;
    return h;
  }

 private:
  static std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return out;
  }
  static std::string printable(std::string_view s) {
    std::string q = quote(s);  // '...' with escapes
    return q.substr(1, q.size() - 2);
  }

  const Entry* find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
  }

  [[noreturn]] void header_error(const std::string& sentence) const {
    src_.fail_at(prog_.header_line, prog_.header_column, sentence);
  }

  /// An error about a parameter: at its name in the header, or at the header when the
  /// value came from --param.
  [[noreturn]] void at(const Entry& e, const std::string& sentence) const {
    if (e.overridden || e.line == 0) header_error(sentence + (e.overridden ? " (set by --param)" : ""));
    if (!e.from_overrides.empty()) {
      std::string list;
      for (const std::string& n : e.from_overrides) list += (list.empty() ? "" : ", ") + n;
      src_.fail_at(e.line, e.column, sentence + " (computed from " + list + ", set by --param)");
    }
    src_.fail_at(e.line, e.column, sentence);
  }

  [[noreturn]] void fail_in_value(const Expr& e, const std::string& sentence,
                                  const std::vector<std::string>& overrides_read) const {
    std::string note;
    for (const std::string& n : overrides_read) note += (note.empty() ? " (with " : ", ") + n;
    if (!note.empty()) note += " set by --param)";
    src_.fail_at(e.line, e.column, "in the value of " + current_->name + ": " + sentence + note);
  }

  /// The bounds of the known integer parameters that depend on no other parameter
  /// (Root's depend on nRanks and are checked with it).
  void check_fixed_range(const std::string& name) const {
    static const struct {
      const char* name;
      int64_t lo, hi;
    } kBounds[] = {{"nRanks", 1, INT32_MAX},    {"nChannels", 1, INT32_MAX}, {"nWarps", 1, INT32_MAX},
                   {"GPUPerNode", 1, INT32_MAX}, {"NICPerNode", 0, INT32_MAX}, {"nChunks", 1, INT32_MAX},
                   {"nScratch", 0, INT32_MAX},  {"InPlace", 0, 1}};
    for (const auto& b : kBounds)
      if (name == b.name) check_range(name, b.lo, b.hi);
  }

  /// Evaluates the header expression `index` of the parameter `current_`, adding the
  /// --param values it reads to `overrides_read`. Integer arithmetic as in the body, except
  /// that `/` must divide exactly: a header value is a count, and a fraction there means
  /// the parameters do not fit together (nRanks not a multiple of GPUPerNode, say).
  int64_t value_of(int32_t index, std::vector<std::string>& overrides_read) const {
    const Expr& e = prog_.exprs[static_cast<size_t>(index)];
    auto fail_here = [&](const std::string& sentence) { fail_in_value(e, sentence, overrides_read); };
    switch (e.op) {
      case ExprOp::Int:
        return e.value;
      case ExprOp::Var: {
        const std::string& name = prog_.slot_names[static_cast<size_t>(e.value)];
        const Entry& ref = entries_.at(name);  // the parser checked that it is written before
        auto note = [&](const std::string& n) {
          if (std::find(overrides_read.begin(), overrides_read.end(), n) == overrides_read.end())
            overrides_read.push_back(n);
        };
        if (ref.overridden) note(text::format("%s=%lld", name.c_str(), static_cast<long long>(ref.int_value)));
        for (const std::string& n : ref.from_overrides) note(n);
        return ref.int_value;
      }
      case ExprOp::Neg: {
        int64_t a = value_of(e.lhs, overrides_read);
        if (a == INT64_MIN) fail_here(text::format("negating %lld overflows 64 bits", static_cast<long long>(a)));
        return -a;
      }
      default:
        break;
    }
    const int64_t a = value_of(e.lhs, overrides_read), b = value_of(e.rhs, overrides_read);
    const auto la = static_cast<long long>(a), lb = static_cast<long long>(b);
    int64_t r = 0;
    bool overflow = false;
    switch (e.op) {
      case ExprOp::Add: overflow = __builtin_add_overflow(a, b, &r); break;
      case ExprOp::Sub: overflow = __builtin_sub_overflow(a, b, &r); break;
      case ExprOp::Mul: overflow = __builtin_mul_overflow(a, b, &r); break;
      case ExprOp::Div:
        if (b == 0) fail_here(text::format("division by zero (%lld / 0)", la));
        if (a == INT64_MIN && b == -1) overflow = true;
        else if (a % b != 0)
          fail_here(text::format("%lld / %lld is not an integer; a header value must divide exactly", la, lb));
        else r = a / b;
        break;
      case ExprOp::Mod:
        if (b == 0) fail_here(text::format("modulo by zero (%lld %% 0)", la));
        if (b == -1) return 0;
        r = a % b;  // Python's modulo, as in the body: the result takes the divisor's sign
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        break;
      default:
        break;
    }
    if (overflow) {
      const char* sym = e.op == ExprOp::Add ? "+" : e.op == ExprOp::Sub ? "-" : e.op == ExprOp::Mul ? "*" : "/";
      fail_here(text::format("%lld %s %lld overflows 64 bits", la, sym, lb));
    }
    return r;
  }

  void apply_override(const std::string& name, const std::string& value) {
    Entry* e = entries_.count(name) ? &entries_[name] : nullptr;
    if (e == nullptr && !is_known_param(name)) {
      std::string declared;
      for (const HeaderParam& hp : prog_.params) declared += (declared.empty() ? "" : ", ") + hp.name;
      header_error("--param sets " + quote(name) + ", which is not a parameter of this header (it declares " +
                   (declared.empty() ? std::string("none") : declared) + ")");
    }
    Entry fresh;
    if (e == nullptr) e = &(entries_[name] = fresh);
    e->overridden = true;
    if (is_string_param(name)) {
      std::string_view v = text::trim(value);
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
        v = v.substr(1, v.size() - 2);
      e->is_string = true;
      e->str_value = std::string(v);
      return;
    }
    std::string_view v = text::trim(value);
    size_t i = (!v.empty() && v[0] == '-') ? 1 : 0;
    bool ok = i < v.size() && v.size() - i <= 18;
    for (size_t k = i; ok && k < v.size(); ++k) ok = v[k] >= '0' && v[k] <= '9';
    if (!ok) header_error("--param " + name + "=" + quote(value) + " is not an integer (at most 18 digits)");
    e->is_string = false;
    e->int_value = std::stoll(std::string(v));
  }

  void check_range(const std::string& name, int64_t lo, int64_t hi) const {
    const Entry* e = find(name);
    if (e == nullptr) return;
    if (e->int_value < lo || e->int_value > hi) {
      std::string range = hi == INT32_MAX ? text::format("at least %lld", static_cast<long long>(lo))
                                          : text::format("in [%lld, %lld]", static_cast<long long>(lo),
                                                         static_cast<long long>(hi));
      at(*e, text::format("%s is %lld, but must be %s", name.c_str(), static_cast<long long>(e->int_value),
                          range.c_str()) +
                 (hi == INT32_MAX ? " and fit in 32 bits" : ""));
    }
  }

  int64_t int_or(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
    const Entry* e = find(name);
    if (e == nullptr) return fallback;
    check_range(name, lo, hi);
    return e->int_value;
  }

  const SourceText& src_;
  const Program& prog_;
  std::map<std::string, Entry> entries_;
  const HeaderParam* current_ = nullptr;  ///< the parameter whose value is being computed
};

}  // namespace

bool is_string_param(std::string_view name) {
  return std::find(std::begin(kStringParams), std::end(kStringParams), name) != std::end(kStringParams);
}

bool is_known_param(std::string_view name) {
  return is_string_param(name) ||
         std::find(std::begin(kIntParams), std::end(kIntParams), name) != std::end(kIntParams);
}

HeaderValues resolve_header(const SourceText& src, const Program& program,
                            const std::map<std::string, std::string>& overrides, const std::string& default_name) {
  return Resolver(src, program).run(overrides, default_name);
}

}  // namespace weft::resccl
