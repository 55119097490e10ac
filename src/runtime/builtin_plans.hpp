// Plans the runtime builds by hand, for any rank count: ring, all-pairs (direct) and chain
// algorithms for every standard collective, in place and out of place, with any number
// of instances (parallel thread blocks per connection). They are the executor's first
// workload, the baseline that compiled plans are measured against, and the fallback
// when no compiled algorithm fits a communicator.
#pragma once

#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

struct BuiltinSpec {
  /// "ring", "allpairs" or "chain" (see builtin_plan_algorithms for what each collective offers).
  std::string algorithm = "ring";
  int instances = 1;
  bool in_place = false;
  int root = 0;
  std::string protocol = "Simple";
};

/// The algorithms builtin_plan offers for a collective, most bandwidth-friendly first.
std::vector<std::string> builtin_plan_algorithms(Collective c);

/// Builds the plan. Throws InvalidArgument for an algorithm the collective does not have,
/// a root out of range, or instances outside 1..64.
Plan builtin_plan(Collective c, int nranks, const BuiltinSpec& spec);

}  // namespace weft
