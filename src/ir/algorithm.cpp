#include "ir/algorithm.hpp"

#include <algorithm>
#include <cstdint>
#include <cctype>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::AllGather: return "AllGather";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::AllReduce: return "AllReduce";
    case Collective::AllToAll: return "AllToAll";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    case Collective::Custom: return "Custom";
  }
  return "?";
}

std::string_view to_string(Buffer b) {
  switch (b) {
    case Buffer::Input: return "input";
    case Buffer::Output: return "output";
    case Buffer::Scratch: return "scratch";
  }
  return "?";
}

std::string_view to_string(TransferOp op) { return op == TransferOp::Copy ? "copy" : "reduce"; }

static std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<Collective> collective_from_string(std::string_view s) {
  std::string l = lower(s);
  l.erase(std::remove(l.begin(), l.end(), '_'), l.end());
  if (l == "allgather") return Collective::AllGather;
  if (l == "reducescatter") return Collective::ReduceScatter;
  if (l == "allreduce") return Collective::AllReduce;
  if (l == "alltoall") return Collective::AllToAll;
  if (l == "broadcast") return Collective::Broadcast;
  if (l == "reduce") return Collective::Reduce;
  if (l == "custom") return Collective::Custom;
  return std::nullopt;
}

std::optional<Buffer> buffer_from_string(std::string_view s) {
  std::string l = lower(s);
  if (l == "input" || l == "i") return Buffer::Input;
  if (l == "output" || l == "o") return Buffer::Output;
  if (l == "scratch" || l == "s") return Buffer::Scratch;
  return std::nullopt;
}

int32_t Algorithm::num_steps() const {
  int32_t m = -1;
  for (const Transfer& t : transfers) m = std::max(m, t.step);
  return m + 1;
}

const std::string& Algorithm::file_of(const SourceLocation& loc) const {
  static const std::string kNone;
  if (loc.file == 0) return source_file;
  if (loc.file > 0 && static_cast<size_t>(loc.file) <= other_source_files.size())
    return other_source_files[static_cast<size_t>(loc.file) - 1];
  return kNone;
}

std::string Algorithm::location_of(size_t index) const {
  if (index >= transfer_locations.size() || transfer_locations[index].line <= 0) return {};
  const SourceLocation& loc = transfer_locations[index];
  const std::string& file = file_of(loc);
  std::string at = std::to_string(loc.line);  // column 0: unknown (the Python front-end's lines)
  if (loc.column > 0) at += ":" + std::to_string(loc.column);
  return file.empty() ? at : file + ":" + at;
}

int32_t expected_output_chunks(Collective collective, int32_t ranks, int32_t input_chunks) {
  switch (collective) {
    case Collective::AllGather: return ranks * input_chunks;
    case Collective::ReduceScatter: return (ranks > 0 && input_chunks % ranks == 0) ? input_chunks / ranks : -1;
    case Collective::Custom: return -1;
    default: return input_chunks;
  }
}

SlotRef canonical_slot(const Algorithm& algo, SlotRef slot) {
  if (!algo.in_place || slot.buffer == Buffer::Scratch) return slot;
  switch (algo.collective) {
    case Collective::AllGather:
      if (slot.buffer == Buffer::Input) return {slot.rank, Buffer::Output, slot.rank * algo.input_chunks + slot.index};
      return slot;
    case Collective::ReduceScatter:
      if (slot.buffer == Buffer::Output) return {slot.rank, Buffer::Input, slot.rank * algo.output_chunks + slot.index};
      return slot;
    default:
      return {slot.rank, Buffer::Output, slot.index};
  }
}

static int32_t buffer_chunks(const Algorithm& a, Buffer b) {
  switch (b) {
    case Buffer::Input: return a.input_chunks;
    case Buffer::Output: return a.output_chunks;
    case Buffer::Scratch: return a.scratch_chunks;
  }
  return 0;
}

void check_shape(const Algorithm& a) {
  auto where = [&](size_t i) {
    std::string s = "step " + std::to_string(a.transfers[i].step) + ", transfer " + std::to_string(i);
    std::string at = a.location_of(i);
    if (!at.empty()) s = at + ": " + s;
    return s;
  };
  if (a.ranks <= 0) fail(ErrorCode::Verify, a.name + ": the number of ranks must be positive, not " + std::to_string(a.ranks));
  if (a.input_chunks < 0 || a.output_chunks < 0 || a.scratch_chunks < 0)
    fail(ErrorCode::Verify, a.name + ": chunk counts must not be negative");
  int32_t want = expected_output_chunks(a.collective, a.ranks, a.input_chunks);
  // Chunks that split evenly over the ranks (the in-place aliasing of canonical_slot relies on it).
  if ((a.collective == Collective::ReduceScatter || a.collective == Collective::AllToAll) &&
      a.input_chunks % a.ranks != 0)
    fail(ErrorCode::Verify, text::format("%s: %s needs input chunks per rank (%d) divisible by the ranks (%d)",
                                         a.name.c_str(), std::string(to_string(a.collective)).c_str(),
                                         a.input_chunks, a.ranks));
  if (want >= 0 && want != a.output_chunks)
    fail(ErrorCode::Verify, text::format("%s: %s with %d ranks and %d input chunks per rank needs %d output chunks, not %d",
                                         a.name.c_str(), std::string(to_string(a.collective)).c_str(), a.ranks,
                                         a.input_chunks, want, a.output_chunks));
  if (a.collective == Collective::Custom && a.in_place && a.input_chunks != a.output_chunks)
    fail(ErrorCode::Verify, text::format("%s: an in-place Custom collective needs as many input chunks as output chunks "
                                         "(one buffer), not %d and %d",
                                         a.name.c_str(), a.input_chunks, a.output_chunks));
  if ((a.collective == Collective::Broadcast || a.collective == Collective::Reduce) && (a.root < 0 || a.root >= a.ranks))
    fail(ErrorCode::Verify, a.name + ": root " + std::to_string(a.root) + " is out of range");
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    const Transfer& t = a.transfers[i];
    if (t.src_rank < 0 || t.src_rank >= a.ranks)
      fail(ErrorCode::Verify, where(i) + ": source rank " + std::to_string(t.src_rank) + " is out of range [0, " + std::to_string(a.ranks) + ")");
    if (t.dst_rank < 0 || t.dst_rank >= a.ranks)
      fail(ErrorCode::Verify, where(i) + ": destination rank " + std::to_string(t.dst_rank) + " is out of range [0, " + std::to_string(a.ranks) + ")");
    if (t.count < 1) fail(ErrorCode::Verify, where(i) + ": count must be at least 1, not " + std::to_string(t.count));
    if (t.step < 0) fail(ErrorCode::Verify, where(i) + ": step must not be negative, not " + std::to_string(t.step));
    // num_steps() is the largest step + 1, which must fit in 32 bits.
    if (t.step == INT32_MAX) fail(ErrorCode::Verify, where(i) + ": step must be below 2147483647");
    int32_t sn = buffer_chunks(a, t.src_buffer), dn = buffer_chunks(a, t.dst_buffer);
    // 64-bit ends: index + count must not wrap around.
    int64_t src_end = int64_t{t.src_index} + t.count, dst_end = int64_t{t.dst_index} + t.count;
    if (t.src_index < 0 || src_end > sn)
      fail(ErrorCode::Verify, text::format("%s: source chunks [%d, %lld) of the %s buffer on rank %d are out of range [0, %d)",
                                           where(i).c_str(), t.src_index, static_cast<long long>(src_end),
                                           std::string(to_string(t.src_buffer)).c_str(), t.src_rank, sn));
    if (t.dst_index < 0 || dst_end > dn)
      fail(ErrorCode::Verify, text::format("%s: destination chunks [%d, %lld) of the %s buffer on rank %d are out of range [0, %d)",
                                           where(i).c_str(), t.dst_index, static_cast<long long>(dst_end),
                                           std::string(to_string(t.dst_buffer)).c_str(), t.dst_rank, dn));
  }
}

}  // namespace weft
