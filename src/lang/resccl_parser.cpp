#include "lang/resccl_parser.hpp"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "lang/resccl_header.hpp"
#include "util/text.hpp"

namespace weft::resccl {
namespace {

class Parser {
 public:
  explicit Parser(const SourceText& src) : src_(src), lexer_(src) {}

  Program run() {
    header();
    p_.body = block();
    if (peek().kind != Tok::End)
      error(peek(), "this statement comes after the algorithm's body; every statement belongs in "
                    "ResCCLAlgo's indented block");
    return std::move(p_);
  }

 private:
  // ---- token access --------------------------------------------------------------
  // The parser looks at most two tokens ahead; tokens are copied out (they are small),
  // so no reference outlives the lookahead buffer.
  const Token& peek(size_t k = 0) {
    while (ahead_.size() <= k) ahead_.push_back(lexer_.next());
    return ahead_[k];
  }
  Token next() {
    peek();
    Token tk = ahead_.front();
    ahead_.pop_front();
    return tk;
  }
  bool accept(Tok kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }
  static bool is_name(const Token& tk, std::string_view text) { return tk.kind == Tok::Name && tk.text == text; }

  std::string found(const Token& tk) const {
    switch (tk.kind) {
      case Tok::Name: return quote(tk.text);
      case Tok::Int: return std::string(tk.text);
      case Tok::String: return "the string \"" + std::string(tk.text.substr(0, 40)) + "\"";
      default: return std::string(describe(tk.kind));
    }
  }
  [[noreturn]] void error(const Token& at, const std::string& sentence) const {
    src_.fail_at(at.line, at.column, sentence);
  }
  Token expect(Tok kind, std::string_view what) {
    if (peek().kind != kind) error(peek(), "expected " + std::string(what) + ", found " + found(peek()));
    return next();
  }

  // ---- header --------------------------------------------------------------------
  void header() {
    if (peek().kind == Tok::Indent) error(peek(), "the header ResCCLAlgo(...): must not be indented");
    accept(Tok::KwDef);
    Token head = peek();
    if (!is_name(head, "ResCCLAlgo"))
      error(head, "expected the header ResCCLAlgo(nRanks=..., OpType=..., ...):, found " + found(head));
    next();
    p_.header_line = head.line;
    p_.header_column = head.column;
    expect(Tok::LParen, "'(' after ResCCLAlgo");
    if (!accept(Tok::RParen)) {
      for (;;) {
        header_param();
        if (accept(Tok::Comma)) {
          if (accept(Tok::RParen)) break;
          continue;
        }
        expect(Tok::RParen, "',' or ')' in the header");
        break;
      }
    }
    expect(Tok::Colon, "':' after the header");
    check_header_references();
    for (const HeaderParam& hp : p_.params) {
      param_names_.insert(hp.name);
      if (hp.is_string) string_params_.insert(hp.name);
    }
  }

  void header_param() {
    Token name = expect(Tok::Name, "a parameter name");
    auto [first, fresh] = header_lines_.emplace(std::string(name.text), name.line);
    if (!fresh)
      error(name, text::format("parameter %s is given twice (first on line %d)", first->first.c_str(), first->second));
    expect(Tok::Assign, "'=' after the parameter name " + std::string(name.text));
    HeaderParam hp;
    hp.name = std::string(name.text);
    hp.line = name.line;
    hp.column = name.column;
    Token v = peek();
    if (v.kind == Tok::String) {
      hp.is_string = true;
      hp.str_value = std::string(v.text);
      next();
    } else if (v.kind == Tok::Comma || v.kind == Tok::RParen || v.kind == Tok::End || v.kind == Tok::Newline) {
      error(v, "expected an integer expression or a string as the value of " + hp.name + ", found " + found(v));
    } else {
      hp.expr = expression();
    }
    if (is_string_param(hp.name) && !hp.is_string)
      error(name, hp.name + " must be a string, such as " + hp.name + "=\"...\"");
    if (!is_string_param(hp.name) && hp.is_string) error(name, hp.name + " must be an integer, not a string");
    p_.params.push_back(std::move(hp));
  }

  /// The names an expression reads, in the order they are written.
  std::vector<const Expr*> names_in(int32_t root) const {
    std::vector<const Expr*> names;
    std::vector<int32_t> work{root};
    while (!work.empty()) {  // iterative: a header value may be a long chain a+b+c+...
      const Expr& e = p_.exprs[work.back()];
      work.pop_back();
      if (e.op == ExprOp::Var) names.push_back(&e);
      if (e.lhs >= 0) work.push_back(e.lhs);
      if (e.rhs >= 0) work.push_back(e.rhs);
    }
    std::sort(names.begin(), names.end(), [](const Expr* a, const Expr* b) {
      return std::pair(a->line, a->column) < std::pair(b->line, b->column);
    });
    return names;
  }

  /// A header value may read only the integer parameters written before it, so that the
  /// values can be computed in the order written and no cycle can form. Reports the first
  /// name, in file order, that breaks the rule: a parameter reading itself or one that
  /// reads it back (a cycle), a parameter written later, or a name the header lacks.
  void check_header_references() {
    std::unordered_map<std::string, size_t> index;  // parameter -> its position in the header
    for (size_t i = 0; i < p_.params.size(); ++i) index.emplace(p_.params[i].name, i);
    const std::string rule = "a header value may use only the parameters written before it";
    for (size_t i = 0; i < p_.params.size(); ++i) {
      const HeaderParam& hp = p_.params[i];
      if (hp.is_string) continue;
      for (const Expr* ref : names_in(hp.expr)) {
        const std::string& name = p_.slot_names[static_cast<size_t>(ref->value)];
        auto it = index.find(name);
        if (it != index.end() && it->second < i) continue;
        if (it == index.end()) {
          std::string what = is_known_param(name)
                                 ? name + ", which this header does not write (a default cannot be used here: write " +
                                       name + "=... before " + hp.name + ")"
                                 : quote(name) + ", which is not a parameter of this header";
          src_.fail_at(ref->line, ref->column, "the value of " + hp.name + " uses " + what + "; " + rule);
        }
        if (it->second == i)
          src_.fail_at(ref->line, ref->column, "the value of " + hp.name + " uses " + hp.name +
                                                   " itself, a cycle; " + rule);
        std::vector<std::string> path = path_between(it->second, i, index);
        if (!path.empty()) {
          std::string chain = hp.name;
          for (const std::string& n : path) chain += " -> " + n;
          src_.fail_at(ref->line, ref->column, "the value of " + hp.name + " uses " + name +
                                                   ", which depends on it in turn, a cycle (" + chain + "); " + rule);
        }
        const HeaderParam& later = p_.params[it->second];
        src_.fail_at(ref->line, ref->column,
                     text::format("the value of %s uses %s, which is written after it (line %d, column %d); %s",
                                  hp.name.c_str(), name.c_str(), later.line, later.column, rule.c_str()));
      }
    }
  }

  /// The names along a chain of header references from parameter `from` to parameter
  /// `to` (from's name first, to's last), or nothing when `from` does not depend on `to`.
  std::vector<std::string> path_between(size_t from, size_t to,
                                        const std::unordered_map<std::string, size_t>& index) const {
    std::vector<size_t> parent(p_.params.size(), SIZE_MAX);
    std::vector<size_t> work{from};
    parent[from] = from;
    while (!work.empty()) {  // breadth or depth does not matter: any chain proves the cycle
      size_t k = work.back();
      work.pop_back();
      if (k == to) {
        std::vector<std::string> path;
        for (size_t at = to; at != from; at = parent[at]) path.push_back(p_.params[at].name);
        path.push_back(p_.params[from].name);
        std::reverse(path.begin(), path.end());
        return path;
      }
      if (p_.params[k].is_string) continue;
      for (const Expr* ref : names_in(p_.params[k].expr)) {
        auto it = index.find(p_.slot_names[static_cast<size_t>(ref->value)]);
        if (it == index.end() || parent[it->second] != SIZE_MAX) continue;
        parent[it->second] = k;
        work.push_back(it->second);
      }
    }
    return {};
  }

  bool is_param(std::string_view name) const {
    return is_known_param(name) || param_names_.count(std::string(name)) != 0;
  }
  bool is_string(std::string_view name) const {
    return is_string_param(name) || string_params_.count(std::string(name)) != 0;
  }

  // ---- blocks and statements -----------------------------------------------------
  std::vector<int32_t> block() {
    std::vector<int32_t> body;
    if (accept(Tok::Newline)) {
      if (peek().kind != Tok::Indent) error(peek(), "expected an indented block after ':', found " + found(peek()));
      next();
      while (peek().kind != Tok::Dedent && peek().kind != Tok::End) body.push_back(statement());
      expect(Tok::Dedent, "the end of the block");
    } else {
      if (peek().kind == Tok::KwFor)
        error(peek(), "a for loop cannot follow ':' on the same line; start it on a new, indented line");
      body.push_back(statement());
    }
    return body;
  }

  int32_t statement() {
    Token tk = peek();
    if (tk.kind == Tok::KwFor) return for_statement();
    int32_t index;
    if (tk.kind == Tok::Name && peek(1).kind == Tok::Assign) {
      index = assignment();
    } else if (tk.kind == Tok::Name && peek(1).kind == Tok::LParen) {
      index = call();
    } else if (tk.kind == Tok::Name) {
      error(peek(1), "expected '=' or '(' after " + quote(tk.text) + ", found " + found(peek(1)));
    } else if (tk.kind == Tok::Indent) {
      error(tk, "this line is indented more than the block it belongs to");
    } else {
      error(tk, "expected a statement (an assignment, a for loop, transfer(...) or expect(...)), found " + found(tk));
    }
    expect(Tok::Newline, "the end of the statement");
    return index;
  }

  int32_t add(Stmt s) {
    p_.stmts.push_back(std::move(s));
    return static_cast<int32_t>(p_.stmts.size() - 1);
  }

  int32_t assignment() {
    Token name = next();
    if (is_string(name.text))
      error(name, std::string(name.text) + " is a string header parameter and cannot be assigned");
    next();  // '='
    Stmt s;
    s.kind = StmtKind::Assign;
    s.line = name.line;
    s.column = name.column;
    s.slot = p_.intern(name.text);
    s.nargs = 1;
    s.args[0] = expression();
    return add(std::move(s));
  }

  int32_t for_statement() {
    Token kw = next();
    Token var = expect(Tok::Name, "a loop variable after 'for'");
    if (is_param(var.text))
      error(var, "the loop variable " + std::string(var.text) +
                     " is a header parameter, which the loop would change; choose another name");
    expect(Tok::KwIn, "'in' after the loop variable");
    Token r = peek();
    if (!is_name(r, "range")) error(r, "expected range(...) after 'in', found " + found(r));
    next();
    Token open = expect(Tok::LParen, "'(' after range");
    std::vector<std::pair<int32_t, Token>> args = arguments();
    if (args.empty()) error(open, "range takes 1 to 3 arguments (start, stop, step), not 0");
    if (args.size() > 3)
      error(args[3].second, text::format("range takes 1 to 3 arguments (start, stop, step), not %zu", args.size()));
    expect(Tok::Colon, "':' after range(...)");
    Stmt s;
    s.kind = StmtKind::For;
    s.line = kw.line;
    s.column = kw.column;
    s.slot = p_.intern(var.text);
    s.nargs = static_cast<int32_t>(args.size());
    for (size_t k = 0; k < args.size(); ++k) s.args[k] = args[k].first;
    s.body = block();
    return add(std::move(s));
  }

  /// Comma-separated expressions up to and including ')' (a trailing comma is allowed).
  std::vector<std::pair<int32_t, Token>> arguments() {
    std::vector<std::pair<int32_t, Token>> args;
    if (accept(Tok::RParen)) return args;
    for (;;) {
      Token at = peek();
      if (at.kind == Tok::Name && peek(1).kind == Tok::Assign)
        error(at, "keyword arguments are not accepted here; only transfer(...) takes them");
      args.emplace_back(expression(), at);
      if (accept(Tok::Comma)) {
        if (accept(Tok::RParen)) break;
        continue;
      }
      expect(Tok::RParen, "',' or ')'");
      break;
    }
    return args;
  }

  int32_t call() {
    Token name = next();
    if (name.text == "transfer" || name.text == "Transfer") return transfer(name);
    if (name.text == "expect") return expect_statement(name);
    if (name.text == "range") error(name, "range(...) may only follow 'for ... in'");
    error(name, "unknown function " + quote(name.text) + "; a statement calls transfer(...) or expect(...)");
  }

  int32_t expect_statement(const Token& name) {
    next();  // '('
    std::vector<std::pair<int32_t, Token>> args = arguments();
    if (args.size() != 4)
      error(name, text::format("expect takes 4 arguments (dstRank, dstChunk, srcRank, srcChunk), not %zu", args.size()));
    Stmt s;
    s.kind = StmtKind::Expect;
    s.line = name.line;
    s.column = name.column;
    s.nargs = 4;
    for (int k = 0; k < 4; ++k) s.args[k] = args[k].first;
    return add(std::move(s));
  }

  static bool is_comm_word(std::string_view s) { return s == "recv" || s == "rrc"; }

  int32_t transfer(const Token& name) {
    next();  // '('
    struct Arg {
      Token at;
      bool comm = false;  // a string or a bare recv/rrc
      int32_t expr = -1;
    };
    std::vector<Arg> pos;
    Stmt s;
    s.kind = StmtKind::Transfer;
    s.line = name.line;
    s.column = name.column;
    bool seen[4] = {false, false, false, false};
    bool keywords = false;
    if (!accept(Tok::RParen)) {
      for (;;) {
        Token at = peek();
        if (at.kind == Tok::Name && peek(1).kind == Tok::Assign) {
          keywords = true;
          keyword_argument(s, seen);
        } else if (keywords) {
          error(at, "a positional argument cannot follow a keyword argument");
        } else if (at.kind == Tok::String ||
                   (at.kind == Tok::Name && (is_comm_word(at.text) || pos.size() == 4) &&
                    (peek(1).kind == Tok::Comma || peek(1).kind == Tok::RParen))) {
          // The communication type: a string, or a lone name in fifth place (recv and
          // rrc are recognised anywhere, so that a misplaced one gets a clear message).
          next();
          pos.push_back({at, true, -1});
        } else {
          pos.push_back({at, false, expression()});
        }
        if (accept(Tok::Comma)) {
          if (accept(Tok::RParen)) break;
          continue;
        }
        expect(Tok::RParen, "',' or ')' in transfer(...)");
        break;
      }
    }
    if (pos.size() != 5)
      error(name, text::format("transfer takes 5 arguments (src, dst, step, chunk, recv|rrc), not %zu", pos.size()));
    static const char* const kArgNames[4] = {"source rank", "destination rank", "step", "chunk"};
    for (int k = 0; k < 4; ++k) {
      if (pos[k].comm)
        error(pos[k].at, text::format("argument %d of transfer is the %s, an integer expression; the communication "
                                      "type (recv or rrc) comes fifth", k + 1, kArgNames[k]));
      s.args[k] = pos[k].expr;
    }
    s.nargs = 4;
    const Arg& c = pos[4];
    if (!c.comm) error(c.at, "the fifth argument of transfer is the communication type, recv or rrc, not an expression");
    std::string_view word = c.at.text;
    if (word == "recv")
      s.op = TransferOp::Copy;
    else if (word == "rrc")
      s.op = TransferOp::Reduce;
    else
      error(c.at, "unknown communication type " + quote(word) + "; expected recv (copy) or rrc (reduce)");
    return add(std::move(s));
  }

  void keyword_argument(Stmt& s, bool seen[4]) {
    Token name = next();
    next();  // '='
    static const char* const kNames[4] = {"dstChunk", "count", "srcBuf", "dstBuf"};
    int k = 0;
    while (k < 4 && name.text != kNames[k]) ++k;
    if (k == 4)
      error(name, "unknown keyword argument " + quote(name.text) +
                      " of transfer; expected dstChunk, count, srcBuf or dstBuf");
    if (seen[k]) error(name, std::string("keyword argument ") + kNames[k] + " is given twice");
    seen[k] = true;
    if (k == 0) {
      s.dst_chunk = expression();
    } else if (k == 1) {
      s.count = expression();
    } else {
      Token v = peek();
      if (v.kind != Tok::Name && v.kind != Tok::String)
        error(v, std::string(kNames[k]) + " must be data, input, output or scratch, not " + found(v));
      BufferName b;
      if (v.text == "data") b = BufferName::Data;
      else if (v.text == "input") b = BufferName::Input;
      else if (v.text == "output") b = BufferName::Output;
      else if (v.text == "scratch") b = BufferName::Scratch;
      else error(v, std::string(kNames[k]) + " must be data, input, output or scratch, not " + quote(v.text));
      next();
      (k == 2 ? s.src_buf : s.dst_buf) = b;
    }
  }

  // ---- expressions ---------------------------------------------------------------
  int32_t make(ExprOp op, const Token& at, int32_t lhs, int32_t rhs, int64_t value = 0) {
    int depth = 1;
    if (lhs >= 0) depth = std::max(depth, depth_[lhs] + 1);
    if (rhs >= 0) depth = std::max(depth, depth_[rhs] + 1);
    if (depth > kMaxExprDepth)
      error(at, text::format("this expression is too large (more than %d nested operations)", kMaxExprDepth));
    p_.exprs.push_back(Expr{op, lhs, rhs, value, at.line, at.column});
    depth_.push_back(depth);
    return static_cast<int32_t>(p_.exprs.size() - 1);
  }

  struct NestGuard {
    Parser& p;
    NestGuard(Parser& parser, const Token& at) : p(parser) {
      if (++p.nesting_ > kMaxExprNesting)
        p.error(at, text::format("this expression nests more than %d levels deep", kMaxExprNesting));
    }
    ~NestGuard() { --p.nesting_; }
  };

  int32_t expression() {
    NestGuard guard(*this, peek());
    int32_t lhs = term();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      Token op = next();
      int32_t rhs = term();
      lhs = make(op.kind == Tok::Plus ? ExprOp::Add : ExprOp::Sub, op, lhs, rhs);
    }
    return lhs;
  }

  int32_t term() {
    int32_t lhs = unary();
    for (;;) {
      Tok k = peek().kind;
      ExprOp op;
      if (k == Tok::Star) op = ExprOp::Mul;
      else if (k == Tok::Slash) op = ExprOp::Div;
      else if (k == Tok::Percent) op = ExprOp::Mod;
      else return lhs;
      Token at = next();
      int32_t rhs = unary();
      lhs = make(op, at, lhs, rhs);
    }
  }

  int32_t unary() {
    Token tk = peek();
    if (tk.kind == Tok::Minus) {
      NestGuard guard(*this, tk);
      next();
      int32_t operand = unary();
      Expr& e = p_.exprs[operand];
      if (e.op == ExprOp::Int) {  // fold: literals are >= -INT64_MAX, so negation is exact
        e.value = -e.value;
        e.line = tk.line;
        e.column = tk.column;
        return operand;
      }
      return make(ExprOp::Neg, tk, operand, -1);
    }
    if (tk.kind == Tok::Int) {
      next();
      return make(ExprOp::Int, tk, -1, -1, tk.value);
    }
    if (tk.kind == Tok::Name) {
      next();
      if (is_string(tk.text))
        error(tk, std::string(tk.text) + " is a string header parameter; expressions compute with integers only");
      return make(ExprOp::Var, tk, -1, -1, p_.intern(tk.text));
    }
    if (tk.kind == Tok::LParen) {
      next();
      int32_t e = expression();
      expect(Tok::RParen, "')'");
      return e;
    }
    error(tk, "expected an expression (a number, a name, '-' or '('), found " + found(tk));
  }

  const SourceText& src_;
  Lexer lexer_;
  std::deque<Token> ahead_;
  Program p_;
  std::vector<int> depth_;  ///< per expression node: depth of its subtree
  int nesting_ = 0;
  std::unordered_map<std::string, int> header_lines_;  ///< header parameter -> its line
  std::unordered_set<std::string> param_names_;
  std::unordered_set<std::string> string_params_;
};

}  // namespace

Program parse(const SourceText& src) {
  // A first lexical pass over the whole file, keeping no tokens: lexical errors come
  // first wherever they are, so that an unclosed '(' is reported as such and not as the
  // syntax error it causes lines later.
  Lexer check(src);
  while (check.next().kind != Tok::End) {
  }
  return Parser(src).run();
}

}  // namespace weft::resccl
