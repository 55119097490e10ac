// The buffer contract of a collective call: which of the caller's buffers a plan may read and
// write. NCCL's API (which weft's matches) leaves some buffers undefined, and a plan that
// touches them is wrong on a GPU however correct its result looks:
//
//   - out of place, the input (send) buffer is never written;
//   - Reduce: ranks other than the root have no output; out of place their receive buffer may
//     be anything (even NULL), in place it is their send buffer; neither is ever written;
//   - Broadcast: ranks other than the root have no input; out of place their send buffer may
//     be anything (even NULL), so it is never read.
//
// Scratch belongs to the plan. The compiler's placement (layout.hpp) keeps the contract by
// construction; compile() checks every plan against it, and tests check plans read from files.
#pragma once

#include <string>

#include "ir/plan.hpp"

namespace weft {

/// "" when `plan` keeps its collective's buffer contract, else one sentence naming the first
/// slot (rank, thread block, slot) that breaks it and how.
std::string buffer_contract_violation(const Plan& plan);

}  // namespace weft
