// Replay: a Plan turned back into an Algorithm, so that the symbolic verifier can check what
// the plan really does (docs/design.md).
//
// Each micro-batch is split by the plan's instances into lanes (the least common multiple of
// every slot's `instances`); a lane is moved by exactly one instance of each primitive, so
// replaying lane by lane covers every byte. For one lane, slots are paired across connections
// and merged as in the deadlock check; each merged node gets the step of its longest path from
// the start (so two nodes the plan does not order share a step, and the verifier's race check
// sees any conflict between them), plus its position along the forwarding chain. Primitives
// become transfers: a receive copies or reduces what its sender forwards (a send's source, an
// rcs's or rrcs's result, an rrs's unstored sum, replayed through a scratch slot); an rrc whose
// accumulator differs from its destination (out-of-place plans) first copies it there.
#pragma once

#include "ir/algorithm.hpp"
#include "ir/plan.hpp"

namespace weft {

/// Number of lanes of a plan (1 when every slot has one instance).
int32_t plan_lanes(const Plan& plan);

/// The algorithm lane `lane` of `plan` executes. Throws Verify if the plan's connections do
/// not pair up or its slots form a cycle (see compile/deadlock.hpp). The result names the
/// plan's collective and buffers; a Custom collective's postcondition is not in the plan, so
/// the caller copies it from the original algorithm.
Algorithm replay_plan(const Plan& plan, int32_t lane = 0);

}  // namespace weft
