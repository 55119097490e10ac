// Plan files: versioned JSON (format: docs/plan-format.md).
//
// plan_from_json(plan_to_json(p)) == p for every valid Plan. The reader rejects, with one
// sentence naming the file and the JSON path, malformed JSON, a wrong "format", a newer
// "version", a missing, mistyped or unknown field, a protocol other than Simple, LL or LL128,
// a root outside the ranks, and a plan that validate_plan refuses.
#pragma once

#include <string>
#include <string_view>

#include "ir/plan.hpp"
#include "ir/plan_core.hpp"  // validate_plan

namespace weft {

/// JSON text of a plan: one object, each slot on its own line.
std::string plan_to_json(const Plan& plan);
/// Parses JSON text; `origin` names the file in error messages. Throws Parse for malformed
/// or mistyped input, Verify for a structurally inconsistent plan.
Plan plan_from_json(std::string_view text, const std::string& origin);

/// Reads a plan file; throws System naming the path if it cannot be read.
Plan load_plan(const std::string& path);
/// Writes a plan file; throws System naming the path if it cannot be written.
void save_plan(const Plan& plan, const std::string& path);


}  // namespace weft
