#include "lang/resccl_lexer.hpp"

#include <string>

#include "util/text.hpp"

namespace weft::resccl {

std::string_view describe(Tok kind) {
  switch (kind) {
    case Tok::Name: return "a name";
    case Tok::Int: return "an integer";
    case Tok::String: return "a string";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Assign: return "'='";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::Newline: return "the end of the line";
    case Tok::Indent: return "an indented block";
    case Tok::Dedent: return "the end of the block";
    case Tok::End: return "the end of the file";
    case Tok::KwDef: return "'def'";
    case Tok::KwFor: return "'for'";
    case Tok::KwIn: return "'in'";
  }
  return "a token";
}

namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

}  // namespace

Token Lexer::next() {
  while (pending_.empty()) produce();
  Token t = pending_.front();
  pending_.pop_front();
  return t;
}

/// Scans until at least one token is pending.
void Lexer::produce() {
  if (finished_) {
    push(Tok::End, line_, col());
    return;
  }
  while (pos_ < s_.size()) {
    if (at_line_start_ && parens_.empty()) {
      if (!indentation()) continue;  // blank or comment-only line consumed
      if (!pending_.empty()) return;
    }
    char c = s_[pos_];
    if (c == ' ' || c == '\r') {
      ++pos_;
    } else if (c == '\t') {
      src_.fail_at(line_, col(), "a tab is not allowed here; ResCCLang indents and separates with spaces");
    } else if (c == '#') {
      skip_comment();
    } else if (c == '\n') {
      if (parens_.empty()) push(Tok::Newline, line_, col());
      newline();
    } else if (is_digit(c)) {
      number();
    } else if (is_name_start(c)) {
      name();
    } else if (c == '"' || c == '\'') {
      string_literal(c);
    } else {
      punctuation(c);
    }
    if (!pending_.empty()) return;
  }
  finish();
}

void Lexer::finish() {
  if (!parens_.empty()) src_.fail_at(parens_.back().line, parens_.back().column, "this '(' is never closed");
  if (last_ != Tok::End && last_ != Tok::Newline) push(Tok::Newline, line_, col());
  while (indents_.size() > 1) {
    indents_.pop_back();
    push(Tok::Dedent, line_, col());
  }
  push(Tok::End, line_, col());
  finished_ = true;
}

void Lexer::push(Tok kind, int line, int column, int64_t value, std::string_view text) {
  pending_.push_back(Token{kind, line, column, value, text});
  last_ = kind;
}

void Lexer::newline() {
  ++pos_;
  ++line_;
  line_start_ = pos_;
  at_line_start_ = true;
}

void Lexer::skip_comment() {
  while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
}

/// Measures the indentation of a new line and emits Indent/Dedent tokens. Returns false
/// when the line is blank or a comment (consumed whole, no tokens).
bool Lexer::indentation() {
  size_t p = pos_;
  while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\r')) ++p;
  if (p < s_.size() && s_[p] == '\t') {
    // A tab in a line that holds only a comment is harmless; anywhere else in the
    // indentation it is ambiguous.
    size_t q = p;
    while (q < s_.size() && (s_[q] == ' ' || s_[q] == '\t' || s_[q] == '\r')) ++q;
    if (q < s_.size() && s_[q] != '#' && s_[q] != '\n')
      src_.fail_at(line_, static_cast<int>(p - line_start_) + 1,
                   "a tab is not allowed in indentation; indent with spaces");
    p = q;
  }
  if (p >= s_.size()) {
    pos_ = p;
    return false;
  }
  if (s_[p] == '#' || s_[p] == '\n') {
    pos_ = p;
    skip_comment();
    if (pos_ < s_.size()) newline();
    return false;
  }
  int width = static_cast<int>(p - pos_);
  pos_ = p;
  at_line_start_ = false;
  if (width > indents_.back()) {
    if (static_cast<int>(indents_.size()) > kMaxBlockDepth)
      src_.fail_at(line_, col(), text::format("blocks nest more than %d levels deep", kMaxBlockDepth));
    indents_.push_back(width);
    push(Tok::Indent, line_, col());
  } else {
    while (width < indents_.back()) {
      indents_.pop_back();
      push(Tok::Dedent, line_, col());
    }
    if (width != indents_.back())
      src_.fail_at(line_, col(),
                   text::format("this line is indented by %d spaces, which matches no enclosing block (%d spaces)",
                                width, indents_.back()));
  }
  return true;
}

void Lexer::number() {
  int column = col();
  size_t start = pos_;
  int64_t v = 0;
  bool overflow = false;
  while (pos_ < s_.size() && is_digit(s_[pos_])) {
    int d = s_[pos_] - '0';
    if (v > (INT64_MAX - d) / 10) overflow = true;
    if (!overflow) v = v * 10 + d;
    ++pos_;
  }
  if (pos_ < s_.size() && is_name_char(s_[pos_]))
    src_.fail_at(line_, column, "invalid number " + quote(s_.substr(start, pos_ + 1 - start)) +
                                    "; a number is decimal digits only");
  if (overflow)
    src_.fail_at(line_, column, "the integer " + quote(s_.substr(start, pos_ - start)) +
                                    " does not fit in 64 bits");
  push(Tok::Int, line_, column, v, s_.substr(start, pos_ - start));
}

void Lexer::name() {
  int column = col();
  size_t start = pos_;
  while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
  std::string_view t = s_.substr(start, pos_ - start);
  Tok kind = Tok::Name;
  if (t == "def") kind = Tok::KwDef;
  else if (t == "for") kind = Tok::KwFor;
  else if (t == "in") kind = Tok::KwIn;
  push(kind, line_, column, 0, t);
}

void Lexer::string_literal(char quote_char) {
  int column = col();
  size_t start = ++pos_;
  while (pos_ < s_.size() && s_[pos_] != quote_char && s_[pos_] != '\n') ++pos_;
  if (pos_ >= s_.size() || s_[pos_] != quote_char)
    src_.fail_at(line_, column, "this string is not closed on its line");
  push(Tok::String, line_, column, 0, s_.substr(start, pos_ - start));
  ++pos_;
}

void Lexer::punctuation(char c) {
  int column = col();
  Tok kind;
  switch (c) {
    case '(': kind = Tok::LParen; break;
    case ')': kind = Tok::RParen; break;
    case ',': kind = Tok::Comma; break;
    case ':': kind = Tok::Colon; break;
    case '=': kind = Tok::Assign; break;
    case '+': kind = Tok::Plus; break;
    case '-': kind = Tok::Minus; break;
    case '*': kind = Tok::Star; break;
    case '/': kind = Tok::Slash; break;
    case '%': kind = Tok::Percent; break;
    default:
      src_.fail_at(line_, column, "unexpected character " + quote(std::string_view(&s_[pos_], 1)));
  }
  if (kind == Tok::LParen) {
    if (parens_.size() >= 1000) src_.fail_at(line_, column, "parentheses nest more than 1000 deep");
    parens_.push_back(Token{Tok::LParen, line_, column, 0, {}});
  } else if (kind == Tok::RParen) {
    if (parens_.empty()) src_.fail_at(line_, column, "this ')' closes no '('");
    parens_.pop_back();
  }
  push(kind, line_, column);
  ++pos_;
}

std::vector<Token> lex(const SourceText& src) {
  Lexer lexer(src);
  std::vector<Token> tokens;
  do tokens.push_back(lexer.next());
  while (tokens.back().kind != Tok::End);
  return tokens;
}

}  // namespace weft::resccl
