// Plans the runtime builds by hand, for any rank count: ring, all-pairs (direct) and chain
// algorithms for every standard collective, in place and out of place, with any number
// of instances (parallel thread blocks per connection). The default selection table runs
// compiled algorithms instead, except `allpairs` where no compiled plan matches it yet
// (small AllReduce and ReduceScatter, AllReduce on two ranks but in place from 2 MiB,
// in-place AllToAll;
// docs/runtime.md, "Hand-built plans that remain"). The rest stays as the reference the
// compiled plans are measured against (tests/unit/runtime/test_selection_compiled.cpp,
// selection/hand-built.json) and for WEFT_ALGO=ring|allpairs|chain.
#pragma once

#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace weft {

struct HandBuiltSpec {
  /// "ring", "allpairs" or "chain" (see hand_built_algorithms for what each collective offers).
  std::string algorithm = "ring";
  int instances = 1;
  bool in_place = false;
  int root = 0;
  std::string protocol = "Simple";
};

/// The algorithms hand_built_plan offers for a collective, most bandwidth-friendly first.
std::vector<std::string> hand_built_algorithms(Collective c);

/// Builds the plan. Throws InvalidArgument for an algorithm the collective does not have,
/// a root out of range, or instances outside 1..64.
Plan hand_built_plan(Collective c, int nranks, const HandBuiltSpec& spec);

}  // namespace weft
