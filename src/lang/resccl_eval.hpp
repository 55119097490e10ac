// The ResCCLang evaluator: runs a parsed Program and produces the weft::Algorithm it
// describes. A tight tree walk: variables are slots of one array, resolved by the parser.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ir/algorithm.hpp"
#include "lang/resccl_ast.hpp"
#include "lang/resccl_diagnostics.hpp"
#include "lang/resccl_header.hpp"

namespace weft::resccl {

/// Bounds that keep every input finite in time and memory. Past either, evaluation stops
/// with an error naming the statement where it stopped.
struct Limits {
  uint64_t max_statements = 100'000'000;  ///< statements executed (each loop iteration's too)
  uint64_t max_records = 50'000'000;      ///< transfers plus expects recorded
};

/// Runs `program`, whose header resolved to `header`, and returns its Algorithm (its
/// source_file is `src`'s file name, which the transfer locations point into). Throws weft::Error(Parse) at the first evaluation
/// error: a variable read before it is assigned, division or modulo by zero, 64-bit
/// overflow, range step 0, a transfer argument outside 32 bits, a limit exceeded.
Algorithm evaluate(const SourceText& src, const Program& program, const HeaderValues& header, const Limits& limits);

/// Lexes, parses, resolves the header (defaults, `overrides`) and evaluates `text` under
/// `limits`. AlgoName defaults to the stem of `filename`.
Algorithm run(std::string_view text, const std::string& filename, const std::map<std::string, std::string>& overrides,
              const Limits& limits);

}  // namespace weft::resccl
