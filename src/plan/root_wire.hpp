// Broadcast and Reduce run the root's plan in place or out of place as its call asks, but
// every other rank always out of place (runtime/collectives.cpp: a non-root's buffers are
// never in place). The two plans of a compiled algorithm are lowered separately and may
// differ (the runtime's thread-block limit can derive fewer instances for one placement
// than for the other), yet the root's messages must be the ones its peers' out-of-place
// plan expects: else the call hangs. root_wire_difference says whether they are.
#pragma once

#include <string>

#include "ir/plan.hpp"

namespace weft {

/// "" when rank `root` of `in_place` exchanges the messages rank `root` of `out_of_place`
/// does (per ordered pair of ranks, channel and instance, the same sequence of (chunk slots,
/// instances) per message, in slot order) and both plans cut a call into the same
/// micro-batches (the same execution model, input and output chunk slots and message shapes:
/// exec/plan_lowering.hpp, make_geometry); else the first difference, in words.
std::string root_wire_difference(const Plan& in_place, const Plan& out_of_place, int root);

/// The most instances any message of `p` is cut into (1 for a plan without messages).
int max_message_instances(const Plan& p);

}  // namespace weft
