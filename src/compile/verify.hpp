// The symbolic verifier (DESIGN.md part 2).
//
// Executes an Algorithm on symbolic data: every chunk slot holds the set of (rank, input
// chunk) contributions it carries; a copy overwrites the destination's set, a reduce adds
// to it (a contribution counted twice is an error). Within one step, two writes, or a
// read and a write, of one slot are a race. At the end the collective's postcondition is
// checked on every output slot. Every message names the rank, chunk and step at fault.
#pragma once

#include <string>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft {

struct VerifyOptions {
  size_t max_errors = 10;  ///< stop collecting after this many
};

struct VerifyResult {
  bool ok = true;
  std::vector<std::string> errors;  ///< one sentence each, naming rank, chunk and step
};

VerifyResult verify(const Algorithm& algo, const VerifyOptions& options = {});
/// Throws weft::Error(Verify) with the first errors joined, if any.
void verify_or_throw(const Algorithm& algo);

}  // namespace weft
