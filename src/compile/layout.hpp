// Buffer placement: which physical chunk slot each transfer reads and writes.
//
// In place, every slot is named by its canonical form (ir/algorithm.hpp, canonical_slot), so
// that two names of one memory location compare equal in every later stage and in the Plan.
//
// Out of place, an algorithm written in place (all of ResCCLang) is rewritten so that the
// user's input buffer is never written: a read of a canonical slot that no earlier step has
// written reads the input buffer; a write goes to the output buffer when the slot is part of
// the rank's output, else to a scratch slot allocated here (per rank, after the algorithm's
// own scratch); output slots that no transfer writes get a local Copy from the input. A
// Reduce into a slot not yet written reads its accumulator from the input and writes the
// output (one rrc, no extra pass); a local Reduce, whose primitive has no separate
// accumulator operand, gets a local Copy first. A transfer whose slots map to
// non-contiguous physical slots is split into contiguous pieces.
//
// Aggregation (paper 004 §4.4) happens here too, before scheduling: transfers of one step on
// one link with the same operation and contiguous source, destination (and accumulator) slots
// become one transfer of larger count. Doing it before scheduling matters for HPDS, which
// never puts two tasks on one link into one sub-pipeline and so would keep them apart.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft {

struct PlacedAlgorithm {
  /// Transfers with placed slots, sorted by step (stable); `in_place` is the aliasing the
  /// placed names assume, scratch_chunks includes the slots allocated here.
  Algorithm algo;
  /// Per transfer: where a Reduce reads its accumulator (the destination unless placement
  /// split the two); equal to the destination for copies.
  std::vector<SlotRef> acc;
  /// Per transfer: the indices of the original Algorithm's transfers it implements (none for
  /// a copy added here), as compressed rows: origin_ids[origin_offsets[i] .. origin_offsets[i+1]).
  std::vector<int32_t> origin_offsets{0};
  std::vector<int32_t> origin_ids;

  std::span<const int32_t> origins_of(size_t i) const {
    return {origin_ids.data() + origin_offsets[i], origin_ids.data() + origin_offsets[i + 1]};
  }
  /// Appends a transfer with at most one origin (-1: none).
  void push(const Transfer& t, SlotRef accumulator, int32_t origin) {
    algo.transfers.push_back(t);
    acc.push_back(accumulator);
    if (origin >= 0) origin_ids.push_back(origin);
    origin_offsets.push_back(static_cast<int32_t>(origin_ids.size()));
  }
};

/// Places `algo`'s slots for in-place (`in_place` true) or out-of-place buffers. An algorithm
/// written out of place, or a Custom collective (which has no aliasing rule), is kept as
/// written whatever `in_place` asks; the result's algo.in_place says what was done.
PlacedAlgorithm place_buffers(const Algorithm& algo, bool in_place, bool aggregate = true);

/// Whether place_buffers keeps `algo`'s slots where it put them (place_as_written) rather
/// than running the value placement, which takes memory per chunk slot (compiler.cpp's
/// estimate asks).
bool places_as_written(const Algorithm& algo, bool in_place);

/// The algorithm's slots as written (made canonical when it is in place), sorted by step, no
/// aggregation.
PlacedAlgorithm place_as_written(const Algorithm& algo);

/// Merges, within each step, transfers on one link with the same operation and contiguous
/// slots (see above). Keeps the transfers sorted by step.
void aggregate_transfers(PlacedAlgorithm& placed);

}  // namespace weft
