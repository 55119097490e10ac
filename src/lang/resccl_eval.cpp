#include "lang/resccl_eval.hpp"

#include <filesystem>
#include <unordered_map>

#include "lang/resccl_lexer.hpp"
#include "lang/resccl_parser.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::resccl {
namespace {

std::string_view op_symbol(ExprOp op) {
  switch (op) {
    case ExprOp::Add: return "+";
    case ExprOp::Sub: return "-";
    case ExprOp::Mul: return "*";
    case ExprOp::Div: return "/";
    case ExprOp::Mod: return "%";
    case ExprOp::Neg: return "-";
    default: return "?";
  }
}

class Evaluator {
 public:
  Evaluator(const SourceText& src, const Program& prog, const HeaderValues& h, const Limits& limits)
      : src_(src), p_(prog), h_(h), limits_(limits) {}

  Algorithm run() {
    const size_t nslots = p_.slot_names.size();
    values_.assign(nslots, 0);
    defined_.assign(nslots, 0);
    is_param_.assign(nslots, 0);
    for (const auto& [name, value] : h_.variables) {
      auto it = p_.slots.find(name);
      if (it == p_.slots.end()) continue;
      values_[it->second] = value;
      defined_[it->second] = 1;
      is_param_[it->second] = 1;
    }
    prepare_statements();

    a_.name = h_.algo_name;
    a_.collective = h_.collective;
    a_.ranks = static_cast<int32_t>(h_.ranks);
    const auto chunks = static_cast<int32_t>(h_.chunks);
    const auto per_rank = static_cast<int32_t>(h_.chunks / h_.ranks);
    a_.input_chunks = h_.collective == Collective::AllGather ? per_rank : chunks;
    a_.output_chunks = h_.collective == Collective::ReduceScatter ? per_rank : chunks;
    a_.scratch_chunks = static_cast<int32_t>(h_.scratch);
    a_.in_place = h_.in_place;
    a_.root = static_cast<int32_t>(h_.root);
    a_.channels = static_cast<int32_t>(h_.channels);
    a_.warps = static_cast<int32_t>(h_.warps);
    a_.gpus_per_node = static_cast<int32_t>(h_.gpus_per_node);
    a_.nics_per_node = static_cast<int32_t>(h_.nics_per_node);
    a_.protocol = h_.protocol;
    a_.source_file = src_.filename();

    // Two passes. The first only counts the transfers, so that the second writes them
    // into vectors of the exact size: at millions of transfers the evaluator is bound by
    // the memory it touches, and growing a vector by doubling touches about twice the
    // final size.
    uint64_t transfers = 0;
    if (count_transfers(transfers)) {
      a_.transfers.reserve(transfers);
      a_.transfer_locations.reserve(transfers);
    }
    block(p_.body);
    return std::move(a_);
  }

 private:
  /// The counting pass: runs the loops and the assignments their bounds depend on, and
  /// skips the rest (transfer arguments, and assignments that feed only them, cannot
  /// change control flow). Returns false, leaving the count unused, when it meets an
  /// error or a limit: the second pass then finds the program's first error itself.
  bool count_transfers(uint64_t& count) {
    mark_control_assignments();
    counting_ = true;
    bool ok = true;
    try {
      block(p_.body);
    } catch (const Error&) {
      ok = false;
    }
    count = transfers_counted_;
    counting_ = false;
    executed_ = 0;
    records_ = 0;
    for (size_t slot = 0; slot < defined_.size(); ++slot) defined_[slot] = is_param_[slot];
    for (const auto& [name, value] : h_.variables) {
      auto it = p_.slots.find(name);
      if (it != p_.slots.end()) values_[it->second] = value;
    }
    return ok;
  }

  /// Marks the assignments that loop bounds depend on, directly or through other
  /// variables: a worklist over variables, linear in the program's size.
  void mark_control_assignments() {
    const size_t nslots = p_.slot_names.size();
    std::vector<std::vector<int32_t>> assignments(nslots);  // per variable: the statements assigning it
    for (size_t i = 0; i < p_.stmts.size(); ++i)
      if (p_.stmts[i].kind == StmtKind::Assign) assignments[p_.stmts[i].slot].push_back(static_cast<int32_t>(i));
    std::vector<uint8_t> control(nslots, 0);
    std::vector<int32_t> work;
    auto mark = [&](auto&& self, int32_t index) -> void {
      const Expr& e = p_.exprs[index];
      if (e.op == ExprOp::Var && !control[e.value]) {
        control[e.value] = 1;
        work.push_back(static_cast<int32_t>(e.value));
      }
      if (e.lhs >= 0) self(self, e.lhs);
      if (e.rhs >= 0) self(self, e.rhs);
    };
    for (const Stmt& st : p_.stmts)
      if (st.kind == StmtKind::For)
        for (int k = 0; k < st.nargs; ++k) mark(mark, st.args[k]);
    control_assign_.assign(p_.stmts.size(), 0);
    while (!work.empty()) {
      int32_t slot = work.back();
      work.pop_back();
      for (int32_t i : assignments[slot]) {
        control_assign_[i] = 1;
        mark(mark, p_.stmts[i].args[0]);
      }
    }
  }

  /// Resolves what does not change between executions of a statement: the IR buffers a
  /// transfer names and its source location; rejects expect outside Custom and `data`
  /// in an out-of-place algorithm.
  void prepare_statements() {
    const Buffer data = h_.collective == Collective::ReduceScatter ? Buffer::Input : Buffer::Output;
    auto to_ir = [&](const Stmt& s, BufferName b, const char* which) {
      switch (b) {
        case BufferName::Input: return Buffer::Input;
        case BufferName::Output: return Buffer::Output;
        case BufferName::Scratch: return Buffer::Scratch;
        case BufferName::Data: break;
      }
      if (!h_.in_place)
        src_.fail_at(s.line, s.column,
                     std::string("this algorithm is out of place (InPlace=0), so the data buffer does not exist: "
                                 "give ") + which + "=input, output or scratch");
      return data;
    };
    src_buf_.resize(p_.stmts.size());
    dst_buf_.resize(p_.stmts.size());
    locations_.resize(p_.stmts.size());
    for (size_t i = 0; i < p_.stmts.size(); ++i) {
      const Stmt& s = p_.stmts[i];
      if (s.kind == StmtKind::Transfer) {
        src_buf_[i] = to_ir(s, s.src_buf, "srcBuf");
        dst_buf_[i] = to_ir(s, s.dst_buf, "dstBuf");
        locations_[i] = SourceLocation{s.line, s.column, 0};  // the file is the Algorithm's source_file
      } else if (s.kind == StmtKind::Expect && h_.collective != Collective::Custom) {
        src_.fail_at(s.line, s.column,
                     "expect(...) states the postcondition of a Custom collective, but this algorithm's OpType is " +
                         std::string(to_string(h_.collective)) + ", whose postcondition is fixed");
      }
    }
  }

  [[noreturn]] void fail_expr(const Expr& e, const std::string& sentence) const {
    src_.fail_at(e.line, e.column, sentence);
  }

  // The error paths are out of line and cold, so that eval() stays small: it is the
  // evaluator's inner loop (tens of millions of calls for a large program).
  [[noreturn]] __attribute__((noinline, cold)) void fail_undefined(const Expr& e) const {
    fail_expr(e, "variable " + p_.slot_names[e.value] + " is used before it is assigned");
  }
  [[noreturn]] __attribute__((noinline, cold)) void fail_arith(const Expr& e, int64_t a, int64_t b) const {
    const auto la = static_cast<long long>(a), lb = static_cast<long long>(b);
    if (e.op == ExprOp::Neg) fail_expr(e, text::format("negating %lld overflows 64 bits", la));
    if (e.op == ExprOp::Div && b == 0) fail_expr(e, text::format("division by zero (%lld / 0)", la));
    if (e.op == ExprOp::Mod && b == 0) fail_expr(e, text::format("modulo by zero (%lld %% 0)", la));
    fail_expr(e, text::format("%lld %s %lld overflows 64 bits", la, std::string(op_symbol(e.op)).c_str(), lb));
  }

  int64_t variable(const Expr& e) const {
    if (!defined_[e.value]) [[unlikely]]
      fail_undefined(e);
    return values_[e.value];
  }

  /// An operand: constants and variables are read here, without a call.
  int64_t operand(int32_t index) const {
    const Expr& e = exprs_[index];
    if (e.op == ExprOp::Int) return e.value;
    if (e.op == ExprOp::Var) return variable(e);
    return eval(index);
  }

  int64_t eval(int32_t index) const {
    const Expr& e = exprs_[index];
    if (e.op == ExprOp::Int) return e.value;
    if (e.op == ExprOp::Var) return variable(e);
    int64_t a = operand(e.lhs);
    if (e.op == ExprOp::Neg) {
      if (a == INT64_MIN) [[unlikely]]
        fail_arith(e, a, 0);
      return -a;
    }
    int64_t b = operand(e.rhs);
    int64_t r = 0;
    switch (e.op) {
      case ExprOp::Add:
        if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
          fail_arith(e, a, b);
        return r;
      case ExprOp::Sub:
        if (__builtin_sub_overflow(a, b, &r)) [[unlikely]]
          fail_arith(e, a, b);
        return r;
      case ExprOp::Mul:
        if (__builtin_mul_overflow(a, b, &r)) [[unlikely]]
          fail_arith(e, a, b);
        return r;
      case ExprOp::Div:
        if (b == 0 || (a == INT64_MIN && b == -1)) [[unlikely]]
          fail_arith(e, a, b);
        r = a / b;  // Python's floor division: round toward negative infinity
        if (a % b != 0 && ((a < 0) != (b < 0))) --r;
        return r;
      case ExprOp::Mod:
        if (b == 0) [[unlikely]]
          fail_arith(e, a, b);
        if (b == -1) return 0;  // INT64_MIN % -1 would trap
        r = a % b;              // Python's modulo takes the divisor's sign
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
        return r;
      default:
        return 0;  // Int, Var and Neg are handled above
    }
  }

  int32_t eval32(int32_t index, const char* what) const {
    int64_t v = eval(index);
    if (v < INT32_MIN || v > INT32_MAX)
      fail_expr(p_.exprs[index], text::format("the %s is %lld, which does not fit in 32 bits", what,
                                             static_cast<long long>(v)));
    return static_cast<int32_t>(v);
  }

  void block(const std::vector<int32_t>& body) {
    for (int32_t index : body) statement(index);
  }

  void count_statement(const Stmt& s) {
    if (++executed_ > limits_.max_statements)
      src_.fail_at(s.line, s.column,
                   text::format("the program executes more than %llu statements, weft's limit; stopped here",
                                static_cast<unsigned long long>(limits_.max_statements)));
  }

  void count_record(const Stmt& s) {
    if (++records_ > limits_.max_records)
      src_.fail_at(s.line, s.column,
                   text::format("the program records more than %llu transfers and expects, weft's limit; stopped here",
                                static_cast<unsigned long long>(limits_.max_records)));
  }

  void statement(int32_t index) {
    const Stmt& s = p_.stmts[index];
    count_statement(s);
    switch (s.kind) {
      case StmtKind::Assign: {
        if (counting_ && !control_assign_[index]) break;
        int64_t v = eval(s.args[0]);
        if (is_param_[s.slot] && v != values_[s.slot])
          src_.fail_at(s.line, s.column,
                       text::format("this assignment would change header parameter %s from %lld to %lld; set "
                                    "parameters in the header or with --param",
                                    p_.slot_names[s.slot].c_str(), static_cast<long long>(values_[s.slot]),
                                    static_cast<long long>(v)));
        values_[s.slot] = v;
        defined_[s.slot] = 1;
        break;
      }
      case StmtKind::For:
        for_loop(s);
        break;
      case StmtKind::Transfer:
        transfer(index, s);
        break;
      case StmtKind::Expect:
        expect(s);
        break;
    }
  }

  void for_loop(const Stmt& s) {
    int64_t start = 0, stop = 0, step = 1;
    if (s.nargs == 1) {
      stop = eval(s.args[0]);
    } else {
      start = eval(s.args[0]);
      stop = eval(s.args[1]);
      if (s.nargs == 3) step = eval(s.args[2]);
    }
    if (step == 0) fail_expr(p_.exprs[s.args[2]], "range's step is 0, which would never reach the stop");
    // Iteration count as Python computes it, in 128 bits so that no bound overflows.
    __int128 span = static_cast<__int128>(stop) - start;
    __int128 n = 0;
    if (step > 0 && span > 0) n = (span + step - 1) / step;
    if (step < 0 && span < 0) n = (-span + (-static_cast<__int128>(step)) - 1) / -static_cast<__int128>(step);
    const int32_t slot = s.slot;
    for (__int128 k = 0; k < n; ++k) {
      values_[slot] = static_cast<int64_t>(start + k * step);
      defined_[slot] = 1;
      block(s.body);
    }
  }

  void transfer(int32_t index, const Stmt& s) {
    if (counting_) {
      count_record(s);
      ++transfers_counted_;
      return;
    }
    Transfer t;
    t.src_rank = eval32(s.args[0], "source rank");
    t.dst_rank = eval32(s.args[1], "destination rank");
    t.step = eval32(s.args[2], "step");
    t.src_index = eval32(s.args[3], "chunk");
    t.dst_index = s.dst_chunk >= 0 ? eval32(s.dst_chunk, "destination chunk") : t.src_index;
    t.count = s.count >= 0 ? eval32(s.count, "count") : 1;
    t.src_buffer = src_buf_[index];
    t.dst_buffer = dst_buf_[index];
    t.op = s.op;
    count_record(s);
    a_.transfers.push_back(t);
    a_.transfer_locations.push_back(locations_[index]);
  }

  void expect(const Stmt& s) {
    if (counting_) {
      count_record(s);
      return;
    }
    int32_t dst_rank = eval32(s.args[0], "destination rank");
    int32_t dst_chunk = eval32(s.args[1], "destination chunk");
    int32_t src_rank = eval32(s.args[2], "source rank");
    int32_t src_chunk = eval32(s.args[3], "source chunk");
    count_record(s);
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(dst_rank)) << 32) | static_cast<uint32_t>(dst_chunk);
    auto [it, fresh] = expect_index_.emplace(key, a_.custom_postcondition.size());
    if (fresh) a_.custom_postcondition.push_back(Expectation{SlotRef{dst_rank, Buffer::Output, dst_chunk}, {}});
    a_.custom_postcondition[it->second].contributions.emplace_back(src_rank, src_chunk);
  }

  const SourceText& src_;
  const Program& p_;
  const HeaderValues& h_;
  const Limits limits_;
  const Expr* exprs_ = p_.exprs.data();
  Algorithm a_;
  std::vector<int64_t> values_;
  std::vector<uint8_t> defined_;
  std::vector<uint8_t> is_param_;
  std::vector<Buffer> src_buf_, dst_buf_;
  std::vector<SourceLocation> locations_;
  std::unordered_map<uint64_t, size_t> expect_index_;
  uint64_t executed_ = 0;
  uint64_t records_ = 0;
  bool counting_ = false;  ///< the counting pass is running
  uint64_t transfers_counted_ = 0;
  std::vector<uint8_t> control_assign_;  ///< per statement: an assignment loop bounds depend on
};

}  // namespace

Algorithm evaluate(const SourceText& src, const Program& program, const HeaderValues& header, const Limits& limits) {
  return Evaluator(src, program, header, limits).run();
}

Algorithm run(std::string_view text, const std::string& filename, const std::map<std::string, std::string>& overrides,
              const Limits& limits) {
  SourceText src(text, filename);
  Program program = parse(src);
  std::string stem = std::filesystem::path(filename).stem().string();
  HeaderValues header = resolve_header(src, program, overrides, stem.empty() ? "resccl" : stem);
  return evaluate(src, program, header, limits);
}

}  // namespace weft::resccl
