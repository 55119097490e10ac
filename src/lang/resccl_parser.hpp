// The ResCCLang parser: tokens to a Program (resccl_ast.hpp).
//
//   program   ::= ["def"] "ResCCLAlgo" "(" [param ("," param)* [","]] ")" ":" block
//   param     ::= name "=" ( exp | string )     -- exp: over the parameters written before it
//   block     ::= NEWLINE INDENT statement+ DEDENT | simple NEWLINE
//   statement ::= "for" name "in" "range" "(" exp ["," exp ["," exp]] ")" ":" block
//               | simple NEWLINE
//   simple    ::= name "=" exp
//               | ("transfer" | "Transfer") "(" exp "," exp "," exp "," exp "," comm
//                     ("," keyword "=" value)* ")"
//               | "expect" "(" exp "," exp "," exp "," exp ")"
//   comm      ::= recv | rrc  (bare or quoted)
//   exp       ::= term (("+" | "-") term)*
//   term      ::= unary (("*" | "/" | "%") unary)*
//   unary     ::= "-" unary | integer | name | "(" exp ")"
//
// Names are resolved to variable slots here; what can only be known by running the
// program (a variable read before it is assigned, a division by zero) is the evaluator's.
#pragma once

#include <vector>

#include "lang/resccl_ast.hpp"
#include "lang/resccl_diagnostics.hpp"
#include "lang/resccl_lexer.hpp"

namespace weft::resccl {

/// Deepest nesting of parentheses and unary minus inside one expression.
inline constexpr int kMaxExprNesting = 200;
/// Deepest expression tree (a long chain a+b+c+... is deep too); bounds the evaluator's recursion.
inline constexpr int kMaxExprDepth = 1000;

/// Parses `src`, pulling tokens from a Lexer as it goes (the token list is never held
/// whole). Throws weft::Error(Parse) at the first lexical error anywhere in the file, else
/// at the first syntax error.
Program parse(const SourceText& src);

}  // namespace weft::resccl
