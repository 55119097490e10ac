// Plan files as a plan source: what `weft compile -o plan.json` writes (ir/plan_json.hpp,
// docs/plan-format.md), read back and checked before anything runs it. This path uses ir/
// and compile/deadlock only: no front-end (lang/) is called to run a plan file.
#pragma once

#include <cstdint>
#include <string>

#include "ir/plan.hpp"

namespace weft {

/// True when `source` names a plan file: it ends in ".json".
bool is_plan_file_path(const std::string& source);

/// Checks a plan read from `origin` (a plan file) before it runs: it is for `ranks` ranks
/// (`ranks_of` names what has them, e.g. "topology h200-1x8" or "the communicator"), and it
/// cannot deadlock with FIFOs of `fifo_depth` messages (0: every send waits for its
/// receive). Throws InvalidArgument for the rank count, Verify naming the cycle.
void check_plan_file(const Plan& plan, const std::string& origin, int32_t ranks, const std::string& ranks_of,
                     int32_t fifo_depth);

}  // namespace weft
