// The chunk DSL: GC3/MSCCLang's chunk-oriented language (paper 004 §3) as a C++ API that
// produces a weft::Algorithm, the same structure ResCCLang and MSCCL XML give.
//
//   dsl::Program p({.name = "ring", .collective = Collective::AllReduce, .ranks = 4, .input_chunks = 4});
//   for (int step = 0; step < 3; ++step)
//     for (int r = 0; r < 4; ++r) {
//       int c = (r - step - 1 + 4) % 4;
//       p.chunk((r + 1) % 4, Buffer::Output, c).reduce(p.chunk(r, Buffer::Output, c));
//     }
//   ...
//   Algorithm a = p.algorithm();   // then weft::verify(a) checks the postcondition
//
// A ChunkRef names `count` consecutive chunks of one buffer of one rank. copy() moves them
// (to another rank: a send; to the same rank: a local copy) and returns a reference to the
// copy; reduce() adds another reference's chunks into them and returns the new reference.
//
// Single-writer semantics (paper 004 §3.3): a reference stays usable only while nothing has
// written its chunks since it was taken. Using a stale one is an error that names the call
// that overwrote the chunk (file:line of the copy or reduce). In place, input and output
// alias as canonical_slot() says, so writing one invalidates references to the other.
//
// Steps follow the dependency order, as GC3's tracing assigns them: a transfer runs one
// step after the last transfer that wrote what it reads or writes, and after the last that
// read what it writes. Transfers keep program order in Algorithm::transfers.
#pragma once

#include <cstdint>
#include <memory>
#if __has_include(<source_location>)
#include <source_location>
#endif
#include <string>
#include <utility>
#include <vector>

#include "ir/algorithm.hpp"

namespace weft::dsl {

/// Where a DSL call was made: a defaulted `CallSite where = CallSite::current()` parameter
/// captures the caller's file, line and column, through std::source_location where the
/// standard library has it and the compiler's builtins where it does not (clang 14 with
/// libstdc++ 12).
struct CallSite {
  const char* file = "";
  unsigned line = 0;
  unsigned column = 0;
#if defined(__cpp_lib_source_location)
  static constexpr CallSite current(std::source_location l = std::source_location::current()) {
    return {l.file_name(), l.line(), l.column()};
  }
#else
  static constexpr CallSite current(const char* file = __builtin_FILE(), unsigned line = __builtin_LINE(),
                                    unsigned column = __builtin_COLUMN()) {
    return {file, line, column};
  }
#endif
};

/// What a program computes and on what buffers.
struct ProgramSpec {
  std::string name{};
  Collective collective = Collective::AllReduce;
  int32_t ranks = 0;
  /// Input chunks per rank; output chunks follow the collective (expected_output_chunks),
  /// or `output_chunks` for Custom.
  int32_t input_chunks = 0;
  int32_t output_chunks = -1;   ///< Custom only
  bool in_place = true;
  int32_t root = 0;             ///< Broadcast and Reduce
  int32_t scratch_chunks = -1;  ///< -1: as many as the program touches
  // Hints carried into the Algorithm (see ir/algorithm.hpp).
  int32_t channels = 1;
  int32_t warps = 16;
  int32_t gpus_per_node = 0;
  int32_t nics_per_node = 0;
  std::string protocol{};
};

class Program;

/// Channels a transfer may name (MSCCL's limit): 0 .. kMaxChannels-1.
inline constexpr int32_t kMaxChannels = 32;

/// `count` consecutive chunks of one buffer of one rank, as they were when the reference
/// was taken. Cheap to copy; valid only while its Program lives.
class ChunkRef {
 public:
  int32_t rank() const { return rank_; }
  Buffer buffer() const { return buffer_; }
  int32_t index() const { return index_; }
  int32_t count() const { return count_; }

  /// Copies these chunks to chunks [index, index+count) of `buffer` on `dst_rank` and
  /// returns a reference to the copy. A copy onto the very same chunks moves nothing.
  /// Throws InvalidUsage if this reference is stale, InvalidArgument for a bad destination.
  ChunkRef copy(int32_t dst_rank, Buffer buffer, int32_t index,
                CallSite where = CallSite::current()) const;
  /// Copies to the same buffer and index on `dst_rank` (msccl-tools' default).
  ChunkRef copy(int32_t dst_rank, CallSite where = CallSite::current()) const;
  /// copy() on channel `channel` (GC3's `ch=`; -1: none), which the Program records per
  /// transfer (Program::transfer_channels) and counts in the Algorithm's channels hint.
  /// Throws InvalidArgument for a channel outside [-1, kMaxChannels).
  ChunkRef copy(int32_t dst_rank, Buffer buffer, int32_t index, int32_t channel,
                CallSite where = CallSite::current()) const;

  /// Reduces `other` into these chunks (these := these (+) other; other may live on another
  /// rank, then it is sent here) and returns the new reference to these chunks; this
  /// reference becomes stale. Throws InvalidUsage if either reference is stale, or
  /// InvalidArgument if the counts differ or both name the same chunks.
  ChunkRef reduce(const ChunkRef& other, CallSite where = CallSite::current()) const;
  /// reduce() on channel `channel` (as copy's).
  ChunkRef reduce(const ChunkRef& other, int32_t channel, CallSite where = CallSite::current()) const;

  /// The chunks cut into `parts` references of count/parts chunks each (count must divide).
  std::vector<ChunkRef> split(int32_t parts) const;
  /// These chunks and `other`'s, which must be adjacent on the same rank and buffer, as one
  /// reference. Both must be current.
  ChunkRef group(const ChunkRef& other, CallSite where = CallSite::current()) const;

 private:
  friend class Program;
  Program* program_ = nullptr;
  int32_t rank_ = 0;
  Buffer buffer_ = Buffer::Output;
  int32_t index_ = 0;
  int32_t count_ = 1;
  std::vector<uint32_t> versions_;  ///< per chunk, the version it had when taken
  CallSite taken_;
};

/// A chunk-DSL program: take references with chunk(), move data with ChunkRef::copy and
/// ChunkRef::reduce, then read the result with algorithm().
class Program {
 public:
  /// Throws InvalidArgument for a spec that names no ranks or chunks, or whose chunk counts
  /// do not fit the collective.
  explicit Program(ProgramSpec spec, CallSite where = CallSite::current());
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  /// A reference to chunks [index, index+count) of `buffer` on `rank`. Every chunk must
  /// hold data (an input chunk, or one written before). Throws InvalidArgument otherwise.
  ChunkRef chunk(int32_t rank, Buffer buffer, int32_t index, int32_t count = 1,
                 CallSite where = CallSite::current());

  /// Custom collectives: output chunk `index` of `rank` must end up holding exactly these
  /// (rank, input chunk) contributions.
  void expect(int32_t rank, int32_t index, std::vector<std::pair<int32_t, int32_t>> contributions);

  /// The algorithm traced so far (transfers in program order, steps by dependency). Its
  /// `channels` hint is the spec's, or one more than the highest channel a transfer named.
  Algorithm algorithm() const;

  /// Per transfer of algorithm(), the channel its copy() or reduce() named (-1: none).
  const std::vector<int32_t>& transfer_channels() const;

  const ProgramSpec& spec() const { return spec_; }

 private:
  friend class ChunkRef;
  struct State;
  ProgramSpec spec_;
  std::unique_ptr<State> state_;

  ChunkRef make_ref(int32_t rank, Buffer buffer, int32_t index, int32_t count, CallSite taken) const;
  void check_current(const ChunkRef& ref, CallSite where, const char* use) const;
  void check_range(int32_t rank, Buffer buffer, int32_t index, int32_t count, CallSite where,
                   const char* what) const;
  ChunkRef record(const ChunkRef& src, int32_t dst_rank, Buffer dst_buffer, int32_t dst_index, TransferOp op,
                  int32_t channel, CallSite where);
};

}  // namespace weft::dsl
