#include "lang/chunk_dsl.hpp"

#include <algorithm>
#include <unordered_map>

#include "util/error.hpp"

namespace weft::dsl {

namespace {

constexpr int32_t kMaxChunks = 1 << 24;

// "file:line:column", or "file:line" where the caller knows no column (column 0).
std::string at(const CallSite& w) {
  std::string s = std::string(w.file) + ":" + std::to_string(w.line);
  return w.column > 0 ? s + ":" + std::to_string(w.column) : s;
}

std::string range_name(int32_t rank, Buffer b, int32_t index, int32_t count) {
  std::string s = count == 1 ? "chunk " + std::to_string(index) : "chunks [" + std::to_string(index) + ", " + std::to_string(index + count) + ")";
  return s + " of the " + std::string(to_string(b)) + " buffer of rank " + std::to_string(rank);
}

uint64_t key(SlotRef s) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(s.rank)) << 32) | (static_cast<uint64_t>(s.buffer) << 30) |
         static_cast<uint64_t>(s.index);
}

}  // namespace

struct Program::State {
  struct Slot {
    uint32_t version = 0;
    bool has_data = false;
    int32_t last_write = -1;  ///< step of the last transfer that wrote it
    int32_t last_read = -1;   ///< latest step that read it since
    int32_t writer = -1;      ///< that transfer's index
  };
  Algorithm algo;
  std::unordered_map<uint64_t, Slot> slots;
  int32_t scratch_used = 0;
  std::vector<int32_t> channels;  ///< per transfer, the channel named (-1: none)
  int32_t max_channel = -1;

  // What a chunk holds before the program runs: the inputs (in place, through the aliasing).
  bool initially_holds_data(SlotRef c) const {
    if (c.buffer == Buffer::Scratch) return false;
    if (!algo.in_place) return c.buffer == Buffer::Input;
    switch (algo.collective) {
      case Collective::AllGather:
        return c.buffer == Buffer::Output && algo.input_chunks > 0 && c.index / algo.input_chunks == c.rank;
      case Collective::ReduceScatter:
      case Collective::Custom:
        return c.buffer == Buffer::Input;
      default:
        return true;  // input and output are one buffer
    }
  }

  /// `w` as a transfer location: its file is an index into the Algorithm's files (0 for
  /// source_file, where the Program was made), so that no location holds a path.
  SourceLocation locate(const CallSite& w) {
    std::string_view file = w.file;
    int32_t index = 0;
    if (file != algo.source_file) {
      auto& others = algo.other_source_files;
      auto it = std::find(others.begin(), others.end(), file);
      if (it == others.end()) it = others.insert(others.end(), std::string(file));
      index = static_cast<int32_t>(it - others.begin()) + 1;
    }
    return {static_cast<int32_t>(w.line), static_cast<int32_t>(w.column), index};
  }

  Slot& slot(SlotRef s) {
    SlotRef c = canonical_slot(algo, s);
    auto [it, fresh] = slots.try_emplace(key(c));
    if (fresh) it->second.has_data = initially_holds_data(c);
    return it->second;
  }
};

Program::Program(ProgramSpec spec, CallSite where) : spec_(std::move(spec)), state_(std::make_unique<State>()) {
  auto bad = [&](const std::string& what) { fail(ErrorCode::InvalidArgument, at(where) + ": " + what); };
  if (spec_.ranks < 1) bad("a program needs at least one rank, not " + std::to_string(spec_.ranks));
  if (spec_.input_chunks < 0 || spec_.input_chunks > kMaxChunks)
    bad("input_chunks must be in [0, " + std::to_string(kMaxChunks) + "], not " + std::to_string(spec_.input_chunks));
  int32_t out = spec_.collective == Collective::Custom
                    ? spec_.output_chunks
                    : expected_output_chunks(spec_.collective, spec_.ranks, spec_.input_chunks);
  if (out < 0 || out > kMaxChunks)
    bad(spec_.collective == Collective::Custom
            ? "a Custom program names its output_chunks (in [0, " + std::to_string(kMaxChunks) + "])"
            : std::string(to_string(spec_.collective)) + " with " + std::to_string(spec_.ranks) + " ranks cannot have " +
                  std::to_string(spec_.input_chunks) + " input chunks per rank");
  if (spec_.root < 0 || spec_.root >= spec_.ranks) bad("root " + std::to_string(spec_.root) + " is not a rank");
  if (spec_.scratch_chunks > kMaxChunks) bad("scratch_chunks is larger than " + std::to_string(kMaxChunks));
  Algorithm& a = state_->algo;
  a.name = spec_.name;
  a.collective = spec_.collective;
  a.ranks = spec_.ranks;
  a.input_chunks = spec_.input_chunks;
  a.output_chunks = out;
  a.in_place = spec_.in_place;
  a.root = spec_.root;
  a.channels = spec_.channels;
  a.warps = spec_.warps;
  a.gpus_per_node = spec_.gpus_per_node;
  a.nics_per_node = spec_.nics_per_node;
  a.protocol = spec_.protocol;
  a.source_file = where.file;
}

Program::~Program() = default;

void Program::check_range(int32_t rank, Buffer buffer, int32_t index, int32_t count, CallSite where,
                          const char* what) const {
  auto bad = [&](const std::string& s) { fail(ErrorCode::InvalidArgument, at(where) + ": " + what + ": " + s); };
  if (rank < 0 || rank >= spec_.ranks)
    bad("rank " + std::to_string(rank) + " is out of range [0, " + std::to_string(spec_.ranks) + ")");
  if (count < 1) bad("count must be at least 1, not " + std::to_string(count));
  int32_t size = buffer == Buffer::Input ? state_->algo.input_chunks
                 : buffer == Buffer::Output ? state_->algo.output_chunks
                 : spec_.scratch_chunks >= 0 ? spec_.scratch_chunks : kMaxChunks;
  if (index < 0 || int64_t{index} + count > size)
    bad(range_name(rank, buffer, index, count) + (count == 1 ? " is" : " are") + " out of range (the buffer holds " +
        std::to_string(size) + " chunks)");
}

ChunkRef Program::make_ref(int32_t rank, Buffer buffer, int32_t index, int32_t count, CallSite taken) const {
  ChunkRef r;
  r.program_ = const_cast<Program*>(this);
  r.rank_ = rank;
  r.buffer_ = buffer;
  r.index_ = index;
  r.count_ = count;
  r.taken_ = taken;
  r.versions_.resize(static_cast<size_t>(count));
  for (int32_t k = 0; k < count; ++k) r.versions_[static_cast<size_t>(k)] = state_->slot({rank, buffer, index + k}).version;
  return r;
}

ChunkRef Program::chunk(int32_t rank, Buffer buffer, int32_t index, int32_t count, CallSite where) {
  check_range(rank, buffer, index, count, where, "chunk()");
  for (int32_t k = 0; k < count; ++k)
    if (!state_->slot({rank, buffer, index + k}).has_data)
      fail(ErrorCode::InvalidArgument, at(where) + ": chunk(): " + range_name(rank, buffer, index + k, 1) +
                                           " holds no data yet (nothing was copied there)");
  return make_ref(rank, buffer, index, count, where);
}

void Program::check_current(const ChunkRef& ref, CallSite where, const char* use) const {
  if (ref.program_ != this) fail(ErrorCode::InvalidUsage, at(where) + ": " + use + " a reference of another program");
  for (int32_t k = 0; k < ref.count_; ++k) {
    const State::Slot& s = state_->slot({ref.rank_, ref.buffer_, ref.index_ + k});
    if (s.version == ref.versions_[static_cast<size_t>(k)]) continue;
    const Transfer& t = state_->algo.transfers[static_cast<size_t>(s.writer)];
    fail(ErrorCode::InvalidUsage,
         at(where) + ": " + use + " a stale reference: " + range_name(ref.rank_, ref.buffer_, ref.index_, ref.count_) +
             ", taken at " + at(ref.taken_) + ", " + (ref.count_ == 1 ? "was" : "chunk " + std::to_string(ref.index_ + k) + " was") +
             " overwritten since by the " + std::string(to_string(t.op)) + " at " +
             state_->algo.location_of(static_cast<size_t>(s.writer)) + " (" + range_name(t.src_rank, t.src_buffer, t.src_index, t.count) + " to " +
             range_name(t.dst_rank, t.dst_buffer, t.dst_index, t.count) + ", step " + std::to_string(t.step) +
             "); use the reference that call returned, or take a new one with chunk()");
  }
}

ChunkRef Program::record(const ChunkRef& src, int32_t dst_rank, Buffer dst_buffer, int32_t dst_index, TransferOp op,
                         int32_t channel, CallSite where) {
  const char* what = op == TransferOp::Copy ? "copy()" : "reduce()";
  if (channel < -1 || channel >= kMaxChannels)
    fail(ErrorCode::InvalidArgument, at(where) + ": " + what + ": channel " + std::to_string(channel) +
                                         " is out of range (channels are 0 to " + std::to_string(kMaxChannels - 1) + ")");
  check_range(dst_rank, dst_buffer, dst_index, src.count_, where, what);
  State& st = *state_;
  const int32_t n = src.count_;
  std::vector<State::Slot*> reads, writes;
  for (int32_t k = 0; k < n; ++k) {
    reads.push_back(&st.slot({src.rank_, src.buffer_, src.index_ + k}));
    writes.push_back(&st.slot({dst_rank, dst_buffer, dst_index + k}));
  }
  SlotRef s0 = canonical_slot(st.algo, {src.rank_, src.buffer_, src.index_});
  SlotRef d0 = canonical_slot(st.algo, {dst_rank, dst_buffer, dst_index});
  if (s0 == d0) {
    if (op == TransferOp::Copy) return make_ref(dst_rank, dst_buffer, dst_index, n, where);  // moves nothing
    fail(ErrorCode::InvalidArgument, at(where) + ": reduce(): a chunk cannot be reduced into itself (" +
                                         range_name(dst_rank, dst_buffer, dst_index, n) + ")");
  }
  for (State::Slot* w : writes)
    if (std::find(reads.begin(), reads.end(), w) != reads.end())
      fail(ErrorCode::InvalidArgument, at(where) + ": " + what + ": " + range_name(src.rank_, src.buffer_, src.index_, n) +
                                           " and " + range_name(dst_rank, dst_buffer, dst_index, n) + " overlap");
  int32_t step = 0;
  for (State::Slot* r : reads) step = std::max(step, r->last_write + 1);
  for (State::Slot* w : writes) step = std::max({step, w->last_write + 1, w->last_read + 1});
  for (State::Slot* r : reads) r->last_read = std::max(r->last_read, step);
  int32_t id = static_cast<int32_t>(st.algo.transfers.size());
  for (State::Slot* w : writes) {
    ++w->version;
    w->has_data = true;
    w->last_write = step;
    w->last_read = -1;
    w->writer = id;
  }
  if (dst_buffer == Buffer::Scratch) st.scratch_used = std::max(st.scratch_used, dst_index + n);
  Transfer t;
  t.src_rank = src.rank_;
  t.src_buffer = src.buffer_;
  t.src_index = src.index_;
  t.dst_rank = dst_rank;
  t.dst_buffer = dst_buffer;
  t.dst_index = dst_index;
  t.count = n;
  t.op = op;
  t.step = step;
  st.algo.transfers.push_back(t);
  st.algo.transfer_locations.push_back(st.locate(where));
  st.channels.push_back(channel);
  st.max_channel = std::max(st.max_channel, channel);
  return make_ref(dst_rank, dst_buffer, dst_index, n, where);
}

void Program::expect(int32_t rank, int32_t index, std::vector<std::pair<int32_t, int32_t>> contributions) {
  if (spec_.collective != Collective::Custom)
    fail(ErrorCode::InvalidUsage, "expect(): only Custom programs state their postcondition; " +
                                      std::string(to_string(spec_.collective)) + "'s is fixed");
  state_->algo.custom_postcondition.push_back({{rank, Buffer::Output, index}, std::move(contributions)});
}

Algorithm Program::algorithm() const {
  Algorithm a = state_->algo;
  a.scratch_chunks = spec_.scratch_chunks >= 0 ? spec_.scratch_chunks : state_->scratch_used;
  a.channels = std::max(a.channels, state_->max_channel + 1);
  return a;
}

const std::vector<int32_t>& Program::transfer_channels() const { return state_->channels; }

ChunkRef ChunkRef::copy(int32_t dst_rank, Buffer buffer, int32_t index, CallSite where) const {
  return copy(dst_rank, buffer, index, -1, where);
}

ChunkRef ChunkRef::copy(int32_t dst_rank, Buffer buffer, int32_t index, int32_t channel, CallSite where) const {
  if (!program_) fail(ErrorCode::InvalidUsage, at(where) + ": copy() on a reference no program made");
  program_->check_current(*this, where, "copy() uses");
  return program_->record(*this, dst_rank, buffer, index, TransferOp::Copy, channel, where);
}

ChunkRef ChunkRef::copy(int32_t dst_rank, CallSite where) const {
  return copy(dst_rank, buffer_, index_, where);
}

ChunkRef ChunkRef::reduce(const ChunkRef& other, CallSite where) const { return reduce(other, -1, where); }

ChunkRef ChunkRef::reduce(const ChunkRef& other, int32_t channel, CallSite where) const {
  if (!program_) fail(ErrorCode::InvalidUsage, at(where) + ": reduce() on a reference no program made");
  program_->check_current(*this, where, "reduce() into");
  program_->check_current(other, where, "reduce() uses");
  if (other.count_ != count_)
    fail(ErrorCode::InvalidArgument, at(where) + ": reduce(): " + std::to_string(other.count_) + " chunks cannot be reduced into " +
                                         std::to_string(count_));
  return program_->record(other, rank_, buffer_, index_, TransferOp::Reduce, channel, where);
}

std::vector<ChunkRef> ChunkRef::split(int32_t parts) const {
  if (parts < 1 || count_ % parts != 0)
    fail(ErrorCode::InvalidArgument, "split(): " + std::to_string(count_) + " chunks cannot be cut into " +
                                         std::to_string(parts) + " equal parts");
  std::vector<ChunkRef> out;
  int32_t size = count_ / parts;
  for (int32_t p = 0; p < parts; ++p) {
    ChunkRef r = *this;
    r.index_ = index_ + p * size;
    r.count_ = size;
    r.versions_.assign(versions_.begin() + p * size, versions_.begin() + (p + 1) * size);
    out.push_back(std::move(r));
  }
  return out;
}

ChunkRef ChunkRef::group(const ChunkRef& other, CallSite where) const {
  if (!program_ || other.program_ != program_)
    fail(ErrorCode::InvalidUsage, at(where) + ": group() joins references of one program only");
  program_->check_current(*this, where, "group() uses");
  program_->check_current(other, where, "group() uses");
  if (other.rank_ != rank_ || other.buffer_ != buffer_)
    fail(ErrorCode::InvalidArgument, at(where) + ": group(): " + range_name(rank_, buffer_, index_, count_) + " and " +
                                         range_name(other.rank_, other.buffer_, other.index_, other.count_) +
                                         " are not on one rank and buffer");
  const ChunkRef& first = index_ <= other.index_ ? *this : other;
  const ChunkRef& second = index_ <= other.index_ ? other : *this;
  if (first.index_ + first.count_ != second.index_)
    fail(ErrorCode::InvalidArgument, at(where) + ": group(): " + range_name(first.rank_, first.buffer_, first.index_, first.count_) +
                                         " and chunks from " + std::to_string(second.index_) + " are not adjacent");
  ChunkRef r = first;
  r.count_ = first.count_ + second.count_;
  r.versions_.insert(r.versions_.end(), second.versions_.begin(), second.versions_.end());
  r.taken_ = where;
  return r;
}

}  // namespace weft::dsl
