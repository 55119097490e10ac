// Reduce chains in another order (docs/compile.md, "Reduce chains in another order").
//
// A reduce chain is a run of Reduce transfers into one destination slot, from different
// sources, that nothing else touches in between: HM AllReduce's intra-node
// ReduceScatter reduces each chunk into its owner from the node's other GPUs one after the
// other, in the order the algorithm wrote (peer i+1 first, then i+2, ...), the same for every
// chunk. Reductions commute, so the chain may run in any order: order_chains exchanges the
// steps of a chain's transfers so that they run in the order of a key per transfer (the
// placer's, sim/op_blocks.hpp), which may differ from chunk to chunk.
#pragma once

#include <vector>

#include "ir/algorithm.hpp"

namespace weft {

/// The algorithm's reduce chains of two transfers or more, each its transfers' indices in
/// step order: Reduce transfers into the same destination (rank, buffer, index and count;
/// in-place aliasing taken into account), in distinct steps, none reading a slot that
/// overlaps the destination, where no other transfer reads or writes the destination from
/// the chain's first step to its last and none writes a source of the chain in that window
/// (so each source holds the same value at every step of it). Chains are listed in the
/// order of their first transfer.
std::vector<std::vector<int32_t>> reduce_chains(const Algorithm& algo);

/// The algorithm with each reduce chain's transfers run in the order of `keys` (one per
/// transfer, by index; lower first, ties in step order): the chain's steps are dealt out in
/// that order, nothing else changes. The result computes the same values as `algo` up to
/// the order of the reductions. `keys` must be empty (the algorithm is returned as it is)
/// or have one entry per transfer (else InvalidArgument).
Algorithm order_chains(const Algorithm& algo, const std::vector<double>& keys);

}  // namespace weft
