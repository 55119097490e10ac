// Plan: what each rank's thread blocks execute, the compiler's output.
//
// The simulator and the GPU runtime both execute a Plan, under this execution model (the
// precise contract; docs/design.md, "The execution model", summarizes it):
//
// * A call's buffers are cut into chunk slots (Plan::input_chunks etc. per rank); each
//   slot is cut into micro-batches of a size chosen per call. Invocation k of a slot
//   touches micro-batch k of every chunk slot it names.
// * Each thread block runs its slots in order; slot i runs its invocation for every
//   micro-batch k = 0..n-1 before slot i+1 starts (task-level execution; under
//   ExecutionModel::Algorithm the micro-batch loop is outside the slot loop). A slot with
//   `instances` > 1 is one of that many thread blocks that split each micro-batch into
//   equal, 16-byte-aligned parts; part `instance` is this slot's.
// * Before invocation k, a slot waits until every slot named in `deps` (on the same rank)
//   has finished its invocation k; after it, it bumps its own counter.
// * Send and receive sides meet on a connection (src rank, dst rank, channel). Each
//   connection is used by exactly one thread block at each end, in the same task order,
//   so the runtime can give it a FIFO of staging slots on the receiver.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/inline_vector.hpp"

namespace weft {

/// How a thread block walks its slots and the micro-batches.
enum class ExecutionModel : uint8_t {
  Task,       ///< weft's: slot by slot, each slot over every micro-batch (paper 001 §3)
  Algorithm,  ///< per micro-batch, every slot in order (what synthesizers' runtimes and
              ///< MSCCL do; stage-level execution is this with stages on separate thread blocks)
};

std::string_view to_string(ExecutionModel m);

enum class Primitive : uint8_t {
  Send,                ///< read src, put to send_peer
  Recv,                ///< take from recv_peer, write dst
  RecvReduceCopy,      ///< rrc: dst := src (+) incoming
  RecvCopySend,        ///< rcs: dst := incoming; forward incoming to send_peer
  RecvReduceCopySend,  ///< rrcs: dst := src (+) incoming; forward dst to send_peer
  RecvReduceSend,      ///< rrs: forward src (+) incoming to send_peer; nothing stored
  Copy,                ///< local: dst := src
  Reduce,              ///< local: dst := dst (+) src
  Nop,                 ///< waits on deps only
};

std::string_view to_string(Primitive p);
/// Accepts the names above and the short forms (s, r, rrc, rcs, rrcs, rrs, cpy, re, nop).
std::optional<Primitive> primitive_from_string(std::string_view s);

/// The one table of primitives (src/ir/plan.cpp): what each reads, writes, waits on and
/// signals. Every engine (deadlock check, replay, lowering, emulator, simulator) asks it.
struct PrimitiveInfo {
  bool reads_src = false;   ///< reads its `src` chunk range
  bool writes_dst = false;  ///< writes its `dst` chunk range
  bool reads_dst = false;   ///< reads `dst` before writing it (Reduce: dst := dst (+) src)
  bool receives = false;    ///< waits on a message from `recv_peer` (and on `deps`)
  bool sends = false;       ///< signals a message to `send_peer`
  bool reduces = false;     ///< combines two operands with the call's reduction
};
const PrimitiveInfo& primitive_info(Primitive p);
inline bool primitive_sends(Primitive p) { return primitive_info(p).sends; }
inline bool primitive_receives(Primitive p) { return primitive_info(p).receives; }

/// A chunk range of one of the rank's own buffers.
struct BufferRange {
  Buffer buffer = Buffer::Output;
  int32_t index = 0;  ///< first chunk slot
  bool operator==(const BufferRange&) const = default;
};

/// Per-micro-batch wait: invocation k of the waiting slot starts after invocation k of
/// slot `slot` of thread block `tb` (same rank) has finished.
struct SlotDep {
  int32_t tb = 0;
  int32_t slot = 0;
  bool operator==(const SlotDep&) const = default;
};

struct Slot {
  Primitive primitive = Primitive::Nop;
  int32_t send_peer = -1;     ///< rank sent to, or -1
  int32_t recv_peer = -1;     ///< rank received from, or -1
  int32_t channel = 0;        ///< connection id among connections between the same two ranks
  BufferRange src;            ///< local operand read (Send, rrc, rrs, Copy, Reduce)
  BufferRange dst;            ///< local result written (Recv, rrc, rcs, rrcs, Copy, Reduce)
  int32_t count = 1;          ///< consecutive chunk slots
  int32_t instance = 0;       ///< this thread block's share of each micro-batch
  int32_t instances = 1;
  int32_t subpipeline = 0;    ///< which sub-pipeline the slot's tasks came from
  /// Kept inside the slot up to 2 entries each (a compiled plan has millions of slots, almost
  /// all with that few; see inline_vector.hpp); longer lists spill to the heap.
  InlineVector<SlotDep, 2> deps;
  InlineVector<int32_t, 2> tasks;  ///< the Algorithm's transfer indices this slot implements
  bool operator==(const Slot&) const = default;
};

/// Which channel carries the messages of one ordered pair of ranks (docs/plan-format.md,
/// "links"): chosen by the compiler from the topology's link class.
enum class ChannelKind : uint8_t {
  Memory,          ///< memory channel: the SMs load and store over NVLink ("memory")
  PortCopyEngine,  ///< port channel, a proxy moves the bytes by copy engine ("port-ce")
  PortNetwork,     ///< port channel over the network between nodes ("port-net")
};
std::string_view to_string(ChannelKind k);
std::optional<ChannelKind> channel_kind_from_string(std::string_view s);

struct PlanLink {
  int32_t src = 0;
  int32_t dst = 0;
  ChannelKind channel = ChannelKind::Memory;
  bool operator==(const PlanLink&) const = default;
};

struct ThreadBlock {
  std::vector<Slot> slots;
  bool operator==(const ThreadBlock&) const = default;
};

struct RankPlan {
  int32_t rank = 0;
  std::vector<ThreadBlock> tbs;
  bool operator==(const RankPlan&) const = default;
};

struct Plan {
  static constexpr int32_t kVersion = 1;
  int32_t version = kVersion;
  std::string algorithm;      ///< the Algorithm's name
  Collective collective = Collective::Custom;
  int32_t num_ranks = 0;
  int32_t input_chunks = 0;
  int32_t output_chunks = 0;
  int32_t scratch_chunks = 0;
  bool in_place = false;      ///< the buffers' aliasing this plan was lowered for
  int32_t root = 0;
  std::string protocol = "Simple";
  ExecutionModel execution = ExecutionModel::Task;
  std::string scheduler;      ///< which scheduler produced it
  std::string allocator;      ///< "state" or "conn"
  std::string topology;       ///< topology name it was compiled for
  int32_t num_subpipelines = 0;
  std::vector<RankPlan> ranks;
  /// One entry per ordered pair of ranks some slot sends over, sorted by (src, dst); empty:
  /// not recorded (hand-built plans, older files), which means memory channels.
  std::vector<PlanLink> links;
  bool operator==(const Plan&) const = default;

  int32_t max_tbs_per_rank() const;
  double mean_tbs_per_rank() const;
};

}  // namespace weft
