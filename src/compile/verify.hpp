// The symbolic verifier (docs/design.md).
//
// Executes an Algorithm on symbolic data: every chunk slot holds the set of (rank, input
// chunk) contributions it carries; a copy overwrites the destination's set, a reduce adds
// to it (a contribution counted twice is an error). Within one step, two writes, or a
// read and a write, of one slot are a race. At the end the collective's postcondition is
// checked on every output slot. Every message names the rank, chunk and step at fault.
//
// Semantics in full:
//   - initial state: input chunk i of rank r holds {(r, i)}; output and scratch slots are
//     empty, except where in-place aliasing (canonical_slot) makes them the input;
//   - steps run in increasing order; within a step the order of transfers is free, so two
//     writes, or a read and a write, of one canonical slot by different transfers race;
//   - a transfer that reads an empty slot (its source, or the destination of a reduce) is
//     an error, and so is a reduce whose source and destination share a contribution;
//   - at the end every output slot the collective constrains must hold exactly the
//     expected set: AllGather, ReduceScatter, AllReduce, AllToAll and Broadcast constrain
//     every rank's output, Reduce only the root's, Custom the slots custom_postcondition
//     names (several expectations on one slot add up). The postcondition is checked only
//     when the steps ran without error, so that one fault is not reported twice.
// Shape errors (check_shape) come first and alone. Messages carry the transfer's
// file:line:column when Algorithm::transfer_locations is filled. Cost: linear in the
// chunks moved; memory about 29 bytes per slot plus one ranks-bit set per partially
// reduced slot (HM AllReduce at 1,024 ranks: docs/verify.md gives the measurement).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft {

struct VerifyOptions {
  size_t max_errors = 10;  ///< keep at most this many messages (all are counted)
  /// Bound on the symbolic state (slots, access records and contribution sets); an
  /// algorithm that needs more is rejected with an error rather than exhausting memory.
  uint64_t max_memory_bytes = uint64_t{4} << 30;
  /// Bound on chunk moves (the sum of transfer counts), so that no input runs for long.
  uint64_t max_chunk_moves = uint64_t{1} << 30;
};

struct VerifyResult {
  bool ok = true;
  std::vector<std::string> errors;  ///< one sentence each, naming rank, chunk and step
  size_t error_count = 0;           ///< errors found (errors keeps the first max_errors)
  uint64_t peak_state_bytes = 0;    ///< memory the symbolic state took at its largest
};

/// Verifies `algo`; never throws for a bad algorithm (every fault is in the result).
VerifyResult verify(const Algorithm& algo, const VerifyOptions& options = {});
/// Throws weft::Error(Verify) with the first errors joined (one per line), if any.
void verify_or_throw(const Algorithm& algo);

}  // namespace weft
