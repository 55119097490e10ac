// The one-shot small-message path for AllReduce, AllGather and ReduceScatter (and Broadcast
// and Reduce where WEFT_ALGO names it for them): shared by
// the host (runtime/collectives.cpp, the arena layout) and the kernel
// (exec/oneshot_kernel.cuh).
//
// Each rank writes its data as LL packets straight into every peer's one-shot receive
// area, then waits for the peers' packets in its own area and combines them in rank order
// (the host reference's order, so every rank gets the same bits). One kernel launch, one
// hop, no staging slots, no counters to publish.
//
// Receive area of a rank: for every source rank s, two parities, kOneShotBlocks blocks of
// kOneShotBlockBytes (packets of 16 bytes holding 8 data bytes). Thread block b only ever
// touches the block-b regions, whatever the call's size, and keeps its own epoch counter
// (one per thread block, in the rank's own memory): a call uses the packet flag epoch + 1
// and the parity epoch % 2, then the counter grows by one. Every rank runs the same
// number of thread blocks for a given call (the choice depends only on the call's
// arguments), so block b's epoch is the same on all ranks. Two parities suffice: a rank can
// start block b's next-but-one call only after receiving the peers' packets of the next
// one, which they send only after their previous kernel has ended, i.e. after they have
// read the area this call will overwrite. Nothing is ever reset, so the path replays in a
// CUDA graph; stale packets never match because their flag is an older epoch's.
#pragma once

#include <cstdint>

#include "exec/exec_plan.hpp"
#include "plan/oneshot_limits.hpp"

namespace weft::exec {

/// Broadcast and Reduce run the AllReduce's exchange (every rank writes to and polls every
/// peer, which keeps the epochs' two parities safe): Broadcast's non-roots send zeros and every
/// rank keeps the root's words; Reduce's non-roots store nothing. AllToAll sends as
/// ReduceScatter does (its block p of the input to rank p) and stores as AllGather does
/// (rank p's packets into its block p of the output; its own block copied from its input).
enum OneShotMode : uint8_t {
  kOneShotAllReduce = 0, kOneShotAllGather = 1, kOneShotReduceScatter = 2, kOneShotBroadcast = 3, kOneShotReduce = 4,
  kOneShotAllToAll = 5
};
/// The modes whose sends take a block of the input per destination (ReduceScatter, AllToAll).
WEFT_HOST_DEVICE_INLINE bool oneshot_sends_blocks(uint8_t mode) {
  return mode == kOneShotReduceScatter || mode == kOneShotAllToAll;
}
/// The modes that store every rank's words into its own block of the output (AllGather, AllToAll).
WEFT_HOST_DEVICE_INLINE bool oneshot_stores_blocks(uint8_t mode) {
  return mode == kOneShotAllGather || mode == kOneShotAllToAll;
}

/// Byte offset, within a rank's one-shot area, of the region source `src` writes for
/// parity `parity` and thread block `block`.
WEFT_HOST_DEVICE_INLINE uint64_t oneshot_region(int src, int parity, int block) {
  return ((static_cast<uint64_t>(src) * 2 + static_cast<uint64_t>(parity)) * kOneShotBlocks +
          static_cast<uint64_t>(block)) * kOneShotBlockBytes;
}
/// Bytes of a rank's one-shot area for `ranks` ranks, epoch counters included (at the end).
WEFT_HOST_DEVICE_INLINE uint64_t oneshot_area_bytes(int ranks) {
  return oneshot_region(ranks, 0, 0) + 4096;
}
/// Offset of the epoch counters (kOneShotBlocks uint64_t) within the area.
WEFT_HOST_DEVICE_INLINE uint64_t oneshot_epochs(int ranks) { return oneshot_region(ranks, 0, 0); }

/// Everything one launch needs (passed by value, about 200 bytes).
struct OneShotArgs {
  const char* in;           ///< AllReduce/AllGather: `bytes`; ReduceScatter, AllToAll: nranks x `bytes`
  char* out;                ///< AllReduce/ReduceScatter: `bytes`; AllGather, AllToAll: nranks x `bytes`
  uint64_t bytes;           ///< payload per rank and peer (count x element size)
  uint64_t words_per_block; ///< 8-byte words each thread block covers (the last may cover fewer)
  char* area;               ///< this rank's one-shot area
  char* peer_area[kOneShotMaxRanks];  ///< every rank's area as this rank addresses it
  uint64_t* epochs;         ///< kOneShotBlocks counters, this rank's memory
  uint64_t timeout_ns;
  uint32_t* error_claim;
  ErrorRecord* error;
  volatile uint32_t* abort;
  int32_t rank;
  int32_t nranks;
  int32_t root;             ///< Broadcast, Reduce
  uint8_t mode;             ///< OneShotMode
  uint8_t op;               ///< weftRedOp_t; avg divides in the kernel
  uint8_t dtype;
  uint8_t one_word;         ///< 1: one word per thread, every peer polled at once (oneshot_kernel<T, 1>);
                            ///< 0: up to kOneShotWordsPerThread, the peers in rank order
};

}  // namespace weft::exec
