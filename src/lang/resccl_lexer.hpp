// The ResCCLang lexer: text to tokens with line and column, Python-style indentation
// turned into Indent/Dedent tokens.
//
// Rules: spaces indent (a tab outside a comment is an error); '#' starts a comment to the
// end of the line; blank and comment-only lines are ignored; inside parentheses line
// breaks and indentation are ignored (a call may span lines); "\r\n" line ends are accepted.
#pragma once

#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

#include "lang/resccl_diagnostics.hpp"

namespace weft::resccl {

enum class Tok : uint8_t {
  Name,     ///< identifier; text is its spelling
  Int,      ///< non-negative decimal integer; value holds it
  String,   ///< "..." or '...'; text is the contents without quotes
  LParen, RParen, Comma, Colon, Assign, Plus, Minus, Star, Slash, Percent,
  Newline,  ///< end of a logical line
  Indent,   ///< the next line is indented deeper than the enclosing block
  Dedent,   ///< one block ends
  End,      ///< end of input
  KwDef, KwFor, KwIn,
};

struct Token {
  Tok kind = Tok::End;
  int line = 1;
  int column = 1;
  int64_t value = 0;
  std::string_view text;  ///< points into the SourceText
};

/// The deepest block nesting accepted (Python's own limit), so that the recursive parser
/// stays within a small stack.
inline constexpr int kMaxBlockDepth = 100;

/// Produces the tokens of one program on demand, so that memory holds the syntax tree and
/// not the token list of a large file. Throws weft::Error(Parse) with the location of the
/// first bad character, bad indentation, unterminated string or unbalanced parenthesis.
class Lexer {
 public:
  explicit Lexer(const SourceText& src) : src_(src), s_(src.text()) { indents_.push_back(0); }

  /// The next token; Tok::End at the end of the input, and again on every later call.
  Token next();

 private:
  void produce();
  void finish();
  int col() const { return static_cast<int>(pos_ - line_start_) + 1; }
  void push(Tok kind, int line, int column, int64_t value = 0, std::string_view text = {});
  void newline();
  void skip_comment();
  bool indentation();
  void number();
  void name();
  void string_literal(char quote_char);
  void punctuation(char c);

  const SourceText& src_;
  std::string_view s_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  int line_ = 1;
  bool at_line_start_ = true;
  bool finished_ = false;
  Tok last_ = Tok::End;  ///< kind of the last token produced (End: none yet)
  std::vector<int> indents_;
  std::vector<Token> parens_;  ///< open parentheses, for the "never closed" error
  std::deque<Token> pending_;
};

/// All tokens of `src`, ending with Tok::End (for tests and tools; the parser streams).
std::vector<Token> lex(const SourceText& src);

/// What a token kind is called in error messages ("'('", "a name", "the end of the line").
std::string_view describe(Tok kind);

}  // namespace weft::resccl
