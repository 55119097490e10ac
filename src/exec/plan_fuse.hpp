// Fusions on a lowered plan that take passes over the data off the Simple bulk path
// (WEFT_FUSE_COPY; docs/runtime.md, "Large messages against NCCL"). The plan's messages are
// unchanged, so a rank that fuses talks to one that does not; the runtime runs the fused plan
// on the CPU emulator like any other before it reaches a GPU.
//
//   copy-send   a kSend slot followed in its thread block by a kCopy of the same chunks (the
//               Broadcast root: send the input, copy it to the output) becomes one slot that
//               loads each piece once and stores it to the staging slot and to the copy's
//               destination (DevSlot::flags kFusedCopy, the copy's dst fields); the copy slot
//               becomes a kNop that keeps its counter and dependencies.
//   fold        a thread block whose only slots are such copies, waiting on nothing and waited
//               on by nothing (an out-of-place AllGather's local copy, one block per instance),
//               is folded into the sends of the same chunks in other blocks and removed: the
//               rank runs fewer thread blocks (NCCL copies its own chunk while sending it).
//   dead scratch a receive-reduce-copy-send into scratch chunks no slot of the rank reads
//               becomes receive-reduce-send (a ReduceScatter ring's middle steps): one store
//               per element less.
//
// A copy fuses only where its chunks have the same valid lengths in both buffers (equal chunk
// slots per group, the same position within the group, neither buffer scratch, source and
// destination different buffers), so the fused send moves exactly the elements the copy did.
#pragma once

#include <cstdint>

#include "exec/plan_lowering.hpp"

namespace weft {

/// What fuse_copies changed, summed over the ranks.
struct FuseReport {
  int32_t copy_sends = 0;     ///< copies fused into the send before them (copy slot now kNop)
  int32_t folded_blocks = 0;  ///< copy-only thread blocks folded into sends and removed
  int32_t dead_scratch = 0;   ///< rrcs into unread scratch made rrs
  int32_t total() const { return copy_sends + folded_blocks + dead_scratch; }
};

/// Applies the three fusions to every rank of `lp` (its lowered arrays, and its plan's thread
/// blocks where one is removed, so that the two keep the same numbering).
FuseReport fuse_copies(LoweredPlan& lp);

}  // namespace weft
