// In-kernel timestamps of the plan interpreter (docs/traces.md): the layout of the trace
// buffer the host hands to a traced launch (ExecArgs::trace) and reads back afterwards.
//
// The buffer holds one region per plan thread block of the launch (with block roles, a CUDA
// block writes one region per role): a TraceBlockHeader, then
// `cap` TraceRecords. Thread 0 of the thread block writes them; nothing else touches a region.
// A record is one invocation (slot, micro-batch) with four %globaltimer readings (ns, this
// GPU's clock). Past `cap` records the block counts but writes nothing: `count` is what it
// would have written, so count - cap records were dropped.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"

namespace weft::exec {

/// One invocation of a slot, as thread 0 of its block saw it.
struct TraceRecord {
  uint64_t wait_ns;   ///< the invocation began: its waits start (dependencies first)
  uint64_t deps_ns;   ///< every dependency met; the waits on the peer (data, credit) start
  uint64_t move_ns;   ///< every wait over (after the block's barrier): the data starts moving
  uint64_t end_ns;    ///< the data has moved (after the block's barrier), before publishing
  int32_t slot;       ///< the slot's number on this rank (the interpreter's slot index)
  uint32_t mb;        ///< micro-batch
  uint32_t rpos;      ///< receive FIFO position (message number, low 32 bits); 0 if none
  uint32_t spos;      ///< send FIFO position; 0 if none
};
static_assert(sizeof(TraceRecord) == 48);

/// The head of one block's region.
struct TraceBlockHeader {
  uint64_t start_ns;  ///< the block started (after reading its plan)
  uint64_t end_ns;    ///< the block ended its last invocation; 0 if it stopped early
  uint32_t count;     ///< records the block made (written: min(count, cap))
  uint32_t cap;       ///< records its region holds
  uint64_t reserved;
};
static_assert(sizeof(TraceBlockHeader) == 32);

/// Bytes of one block's region holding `cap` records.
WEFT_HOST_DEVICE_INLINE uint64_t trace_region_bytes(uint32_t cap) {
  return sizeof(TraceBlockHeader) + static_cast<uint64_t>(cap) * sizeof(TraceRecord);
}

/// Block `b`'s header in a buffer of regions of `cap` records.
WEFT_HOST_DEVICE_INLINE TraceBlockHeader* trace_block(char* buf, uint32_t cap, uint32_t b) {
  return reinterpret_cast<TraceBlockHeader*>(buf + static_cast<uint64_t>(b) * trace_region_bytes(cap));
}

}  // namespace weft::exec
