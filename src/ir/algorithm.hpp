// Algorithm: what a collective algorithm does, independent of how it is executed.
//
// An Algorithm is the output of every front-end (ResCCLang, the chunk DSL, MSCCL XML)
// and the input of the verifier and the compiler. It names the collective, the ranks,
// how each rank's buffers are cut into chunk slots, and the list of transfers that move
// or reduce chunks between slots. Steps order the transfers: everything in step s
// happens after everything in step s-1; within one step the order is free, which is why
// the verifier rejects two writes, or a read and a write, of one slot in one step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

enum class Collective : uint8_t { AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast, Reduce, Custom };

/// The three per-rank buffers an algorithm may touch.
enum class Buffer : uint8_t { Input, Output, Scratch };

enum class TransferOp : uint8_t {
  Copy,    ///< dst := src
  Reduce,  ///< dst := dst (+) src
};

std::string_view to_string(Collective c);
std::string_view to_string(Buffer b);
std::string_view to_string(TransferOp op);
/// Case-insensitive; also accepts ResCCLang's spellings ("Allreduce", "Reducescatter").
std::optional<Collective> collective_from_string(std::string_view s);
std::optional<Buffer> buffer_from_string(std::string_view s);

/// One chunk slot: `count` consecutive chunks starting at `index` of `buffer` on `rank`.
struct SlotRef {
  int32_t rank = 0;
  Buffer buffer = Buffer::Output;
  int32_t index = 0;
  bool operator==(const SlotRef&) const = default;
};

/// One transfer: `count` consecutive chunks from (src rank, buffer, index) to
/// (dst rank, buffer, index), copied or reduced into the destination, at `step`.
/// src rank == dst rank is a local copy or reduction.
struct Transfer {
  int32_t src_rank = 0;
  Buffer src_buffer = Buffer::Output;
  int32_t src_index = 0;
  int32_t dst_rank = 0;
  Buffer dst_buffer = Buffer::Output;
  int32_t dst_index = 0;
  int32_t count = 1;
  TransferOp op = TransferOp::Copy;
  int32_t step = 0;

  SlotRef src() const { return {src_rank, src_buffer, src_index}; }
  SlotRef dst() const { return {dst_rank, dst_buffer, dst_index}; }
  bool operator==(const Transfer&) const = default;
};

/// For Custom collectives: the contributions an output slot must hold at the end,
/// each a (rank, input chunk index) pair; the verifier checks them exactly.
struct Expectation {
  SlotRef slot;
  std::vector<std::pair<int32_t, int32_t>> contributions;
};

/// Where a transfer was written, for error messages that point at the input. It holds no
/// path: the file is the Algorithm's (`file` indexes Algorithm::source_file and
/// other_source_files), so that millions of transfers do not each carry a copy of it.
/// Algorithm::location_of() formats one as "file:line:column" ("file:line" for column 0).
struct SourceLocation {
  int32_t line = 0;    ///< 1-based; 0: unknown
  int32_t column = 0;  ///< 1-based, in bytes
  int32_t file = 0;    ///< 0: Algorithm::source_file; k > 0: Algorithm::other_source_files[k - 1]
  bool operator==(const SourceLocation&) const = default;
};

struct Algorithm {
  std::string name;
  Collective collective = Collective::Custom;
  int32_t ranks = 0;
  /// Chunk slots per rank in each buffer. The collective fixes the ratio of input to
  /// output chunks (see expected_output_chunks); scratch is free.
  int32_t input_chunks = 0;
  int32_t output_chunks = 0;
  int32_t scratch_chunks = 0;
  /// In place: input and output alias as MSCCL defines it (see canonical_slot).
  bool in_place = false;
  /// Root rank of Broadcast and Reduce.
  int32_t root = 0;
  std::vector<Transfer> transfers;
  /// Custom collectives only: the postcondition (empty: only races and double counts are checked).
  std::vector<Expectation> custom_postcondition;

  // Hints carried from the front-end header; the compiler may use or override them.
  int32_t channels = 1;        ///< ResCCLang nChannels / MSCCL nchannels
  int32_t warps = 16;          ///< ResCCLang nWarps
  int32_t gpus_per_node = 0;   ///< 0: unknown
  int32_t nics_per_node = 0;   ///< 0: unknown
  std::string protocol;        ///< "Simple", "LL", "LL128" or empty
  /// Where each transfer came from (parallel to `transfers`, may be empty).
  std::vector<SourceLocation> transfer_locations;
  /// The file the algorithm was read from, or written in (the chunk DSL's C++ file).
  std::string source_file;
  /// Further files that transfers were written in, for front-ends whose transfers can come
  /// from several (the chunk DSL, called from helpers in other files); usually empty.
  std::vector<std::string> other_source_files;

  /// Number of steps (one more than the largest step), 0 without transfers.
  int32_t num_steps() const;

  /// The file `loc` points into: source_file, one of other_source_files, or "" when its
  /// index is out of range.
  const std::string& file_of(const SourceLocation& loc) const;

  /// "file:line:column" of transfer `index` (just "line:column" when the file is unknown),
  /// or "" when the transfer has no location (no entry, or line 0).
  std::string location_of(size_t index) const;
};

/// The number of output chunks per rank that `collective` implies for `input_chunks`
/// input chunks per rank and `ranks` ranks: AllGather R*in, ReduceScatter in/R (in must
/// divide), others in. Custom returns -1 (free).
int32_t expected_output_chunks(Collective collective, int32_t ranks, int32_t input_chunks);

/// Resolves in-place aliasing to one canonical slot, so that two references to the same
/// memory compare equal. In place, MSCCL's convention holds: AllGather's input chunk i
/// of rank r is output chunk r*input_chunks+i; ReduceScatter's output chunk i of rank r
/// is input chunk r*output_chunks+i; for the other collectives input and output are one
/// buffer (Custom included: in place, its input chunk i is output chunk i). Canonical slots
/// name the larger buffer (Output for AllGather, Input for ReduceScatter, Output
/// otherwise). Scratch, and every slot out of place, is returned unchanged.
SlotRef canonical_slot(const Algorithm& algo, SlotRef slot);

/// Checks shape only (ranks > 0, chunk counts consistent with the collective, every
/// transfer's ranks, buffers and index ranges in bounds, count >= 1, step >= 0); throws
/// weft::Error(Verify) naming the first transfer at fault. The symbolic verifier
/// (compile/verify.hpp) checks semantics.
void check_shape(const Algorithm& algo);

}  // namespace weft
