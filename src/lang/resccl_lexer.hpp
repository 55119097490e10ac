// The ResCCLang lexer: text to tokens with line and column, Python-style indentation
// turned into Indent/Dedent tokens.
//
// Rules: spaces indent (a tab outside a comment is an error); '#' starts a comment to the
// end of the line; blank and comment-only lines are ignored; inside parentheses line
// breaks and indentation are ignored (a call may span lines); "\r\n" line ends are accepted.
#pragma once

#include <cstdint>
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

/// Splits `src` into tokens ending with Tok::End. Throws weft::Error(Parse) with the
/// location of the first bad character, bad indentation, unterminated string or
/// unbalanced parenthesis.
std::vector<Token> lex(const SourceText& src);

/// What a token kind is called in error messages ("'('", "a name", "the end of the line").
std::string_view describe(Tok kind);

}  // namespace weft::resccl
