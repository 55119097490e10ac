// Copy-engine collectives as plans (docs/port-channels.md, "Copy-engine collectives").
//
// ce_plan builds an AllGather or AllReduce plan whose every link is a port channel by copy
// engine ("port-ce" in the plan's `links`): all-pairs, so that each rank's copies go to every
// peer at once, each on its own copy-engine stream. lower_ce_plan turns one rank's slots into
// the program the copy-engine runner runs (exec/ce_runner.hpp): a Send becomes a
// put-with-signal trigger whose destination is the paired Recv's chunk in the peer's buffer
// (zero copy: the copy engine writes the peer's output or scratch directly), a Recv a bounded
// wait for that signal, Copy and Reduce local steps (a copy-engine memcpy, or the few thread
// blocks of the reduce kernel). Before any put into a peer, the program waits for the peer's
// "ready" signal, which the peer posts when its call starts: nothing lands in a user buffer
// before its owner has reached the collective. The executor ends with a flush (every put of
// this rank has landed, so the caller may reuse its input).
//
// Host-only (no CUDA): the CPU tests run these programs on host memory through the proxy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"

namespace weft::ce {

/// The algorithm name that selects the copy-engine path (WEFT_ALGO=ce, a table row "ce").
inline constexpr const char* kAlgorithm = "ce";
/// Ranks the copy-engine path runs (its programs travel as kernel arguments).
inline constexpr int kMaxRanks = 8;
/// Thread blocks of the AllReduce's reduce step, at most.
inline constexpr int kMaxReduceBlocks = 8;
/// AllReduce cuts each rank's part into pieces of at least this many bytes (at most
/// kMaxPieces), so that the copy engines carry piece k + 1 while the SMs reduce piece k.
inline constexpr uint64_t kPieceBytes = 8ull << 20;
inline constexpr int kMaxPieces = 8;

/// Whether the copy-engine path implements collective c (AllGather, AllReduce).
bool supports(Collective c);

/// The all-pairs plan for c among `nranks` ranks, every link port-ce. AllGather: one chunk
/// of input, R of output; out of place, a local Copy of the input into the rank's own
/// output chunk. AllReduce, each rank's part of the buffers cut into `pieces` chunk slots
/// (R x pieces of input and output, (R - 1) x pieces of scratch): a reduce-scatter (rank r
/// sends its input piece k of rank q's part to rank q's scratch) on channel 0, the reduction
/// of each piece of the rank's own part (Copy, then Reduce of each peer's scratch piece
/// into it), an all-gather of each reduced piece on channel 1. Throws InvalidArgument for
/// another collective, nranks outside 2..kMaxRanks, or pieces outside 1..kMaxPieces (1 for
/// AllGather).
Plan ce_plan(Collective c, int nranks, bool in_place, int pieces = 1);

enum class StepOp : uint8_t {
  Signal,  ///< post a signal to `peer` ("ready": this rank's buffers may be written)
  Wait,    ///< wait (bounded) for the next signal from `peer`
  Put,     ///< copy `src` (this rank's) to `dst` in `peer`'s buffers, then signal it
  Copy,    ///< local: dst := src
  Reduce,  ///< local: dst := dst (+) src
  Flush,   ///< wait (bounded) until every put of this rank has landed
};
std::string_view to_string(StepOp op);

struct Step {
  StepOp op = StepOp::Signal;
  int32_t peer = -1;   ///< Signal, Wait, Put
  BufferRange src{};   ///< Put, Copy, Reduce
  BufferRange dst{};   ///< Put (the peer's buffer), Copy, Reduce
  int32_t count = 1;   ///< chunk slots moved
  bool operator==(const Step&) const = default;
};

/// "put in[0..1) -> rank 1 out[0..1)", "wait rank 2", for tests and logs.
std::string describe(const Step& s);

/// Every rank's program for `plan`: a plan whose slots are Send, Recv, Copy and Reduce only,
/// with `links` recorded and every link port-ce. Sends go out as soon as their operands are
/// ready; a Recv is waited for when a later step needs its data, else at the end; local
/// steps that follow one another stay adjacent (the executor fuses them). Checks that the
/// signals each pair of ranks exchanges meet in the same order at both ends (one counter
/// per peer carries them). Throws InvalidUsage saying what the plan has that the copy-engine
/// executor cannot run.
std::vector<std::vector<Step>> lower_ce_plan(const Plan& plan);

/// Where a plan's chunk slots lie in one call's buffers, in bytes. AllGather: every chunk is
/// the call's count x element size. AllReduce: the count is cut into R x `pieces` chunks of
/// whole 16-byte multiples (the last ones shorter or empty); scratch chunks are full size.
struct Geometry {
  int pieces = 1;                     ///< the plan's pieces (ce_plan) for this call
  uint64_t chunk = 0;                 ///< bytes per chunk slot
  uint64_t total[3] = {0, 0, 0};      ///< bytes of the input, output and scratch buffers
  uint64_t offset(const BufferRange& b) const { return static_cast<uint64_t>(b.index) * chunk; }
  /// Bytes of `count` slots from `b`, clipped to its buffer.
  uint64_t length(const BufferRange& b, int32_t count) const;
};
/// `piece_bytes`: the AllReduce's smallest piece (tests use small ones).
Geometry make_geometry(Collective c, int nranks, uint64_t count, uint64_t elem_size, uint64_t piece_bytes = kPieceBytes);

/// A peer's allocation as this process mapped it through CUDA IPC: the peer's address of
/// what was opened, where it landed here, and the whole range the driver mapped here
/// (cuMemGetAddressRange of the mapping, which covers the peer's whole driver chunk when
/// the peer's cudaMalloc was sub-allocated from one).
struct PeerMapping {
  int peer = 0;
  uint64_t peer_address = 0;  ///< in the peer's process
  uint64_t peer_bytes = 0;    ///< the peer's allocation there
  uint64_t local = 0;         ///< that address here
  uint64_t local_base = 0, local_bytes = 0;  ///< the mapped range here
};

/// The mapping, newest first, that already holds the peer's [address, address + bytes)
/// (translated by its offset from the mapping's peer address), or -1. Used when the driver
/// refuses to open a new handle because its memory is already mapped here (a peer's
/// buffer sub-allocated in a chunk opened for an earlier buffer, freed or still live): the
/// newest mapping wins, as a peer range mapped later reflects the peer's current memory.
int covering_mapping(const std::vector<PeerMapping>& maps, int peer, uint64_t address, uint64_t bytes);

/// The mappings of `peer` whose allocation overlaps the peer's allocation [address, address
/// + bytes) that carries a handle not seen before: live allocations of one process never
/// overlap, so each of these is stale (the peer freed it and its addresses were reused), its
/// mapping no longer the peer's memory; they are closed before the new handle is opened.
std::vector<size_t> stale_mappings(const std::vector<PeerMapping>& maps, int peer, uint64_t address, uint64_t bytes);

}  // namespace weft::ce
