// The symbolic verifier: executes an Algorithm on contribution sets, step by step.
#include "compile/verify.hpp"

#include <algorithm>

#include "compile/verify_state.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

namespace verify_detail {

SlotLayout::SlotLayout(const Algorithm& a) : algo_(a) {
  const int32_t counts[3] = {a.input_chunks, a.output_chunks, a.scratch_chunks};
  for (int b = 0; b < 3; ++b) {
    // A buffer holds slots of its own unless in-place aliasing folds it into another.
    Buffer buf = static_cast<Buffer>(b);
    bool present = canonical_slot(a, {0, buf, 0}).buffer == buf;
    chunks_[b] = counts[b];
    base_[b] = total_;
    if (present) total_ += static_cast<int64_t>(a.ranks) * counts[b];
  }
}

std::string describe_slot(SlotRef s) {
  return text::format("rank %d's %s chunk %d", s.rank, std::string(to_string(s.buffer)).c_str(), s.index);
}

std::string describe_contribution(Contribution c) { return text::format("rank %d's input chunk %d", c.rank, c.chunk); }

std::string describe_contributions(const std::vector<Contribution>& items, size_t limit) {
  std::string out;
  size_t shown = std::min(items.size(), limit);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == shown && shown == items.size()) ? " and " : ", ";
    out += describe_contribution(items[i]);
  }
  if (items.size() > shown) out += text::format(" and %zu more", items.size() - shown);
  return out;
}

namespace {

/// One run of the verifier over an algorithm that passed check_shape.
class Executor {
 public:
  Executor(const Algorithm& a, const VerifyOptions& opt, ErrorSink& errors)
      : a_(a), layout_(a), errors_(errors), store_(a.ranks, budget(a, opt)) {}

  /// Runs every step; returns whether no error was found on the way.
  bool run();
  const SlotLayout& layout() const { return layout_; }
  const ContributionStore& store() const { return store_; }
  const std::vector<Cell>& cells() const { return cells_; }
  uint64_t state_bytes() const { return fixed_bytes_ + store_.peak_bytes(); }
  /// "last written at step S by transfer T at file:line:column", or empty.
  std::string history(int64_t slot) const {
    if (write_by_[slot] < 0) return {};
    return text::format("last written at step %d by %s", write_step_[slot], other(write_by_[slot]).c_str());
  }

 private:
  static constexpr size_t kBytesPerSlot = sizeof(Cell) + 4 * sizeof(int32_t) + sizeof(uint8_t);

  uint64_t budget(const Algorithm& a, const VerifyOptions& opt) {
    const SlotLayout& layout = layout_;
    fixed_bytes_ = static_cast<uint64_t>(layout.total()) * kBytesPerSlot + a.transfers.size() * 2 * sizeof(int32_t);
    if (fixed_bytes_ > opt.max_memory_bytes)
      fail(ErrorCode::Verify,
           text::format("%s: %lld chunk slots need %llu MiB of symbolic state, more than the budget of %llu MiB; the "
                        "algorithm is too large to verify",
                        a.name.c_str(), static_cast<long long>(layout.total()),
                        static_cast<unsigned long long>(fixed_bytes_ >> 20),
                        static_cast<unsigned long long>(opt.max_memory_bytes >> 20)));
    uint64_t moves = 0;
    for (const Transfer& t : a.transfers) moves += static_cast<uint64_t>(t.count);
    if (moves > opt.max_chunk_moves)
      fail(ErrorCode::Verify,
           text::format("%s: the transfers move %llu chunks, more than the verifier's bound of %llu", a.name.c_str(),
                        static_cast<unsigned long long>(moves), static_cast<unsigned long long>(opt.max_chunk_moves)));
    return opt.max_memory_bytes - fixed_bytes_;
  }

  std::vector<int32_t> step_order() const;
  void apply(int32_t t, int32_t step);
  std::string at(int32_t t, int32_t k) const;
  std::string where(int32_t t) const;
  std::string other(int32_t t) const;

  const Algorithm& a_;
  SlotLayout layout_;
  ErrorSink& errors_;
  uint64_t fixed_bytes_ = 0;
  ContributionStore store_;
  std::vector<Cell> cells_;
  // Per slot, who touched it last: the step and transfer of the last write and of the
  // first read of that step (read_several_ marks a second, different reader).
  std::vector<int32_t> write_step_, write_by_, read_step_, read_by_;
  std::vector<uint8_t> read_several_;
  bool clean_ = true;
};

/// "file:line:column: " of transfer t, or nothing.
std::string Executor::where(int32_t t) const {
  std::string at = t >= 0 ? a_.location_of(static_cast<size_t>(t)) : std::string();
  return at.empty() ? at : at + ": ";
}

/// "transfer 17" or "transfer 17 at file:line:column", for the other side of a race.
std::string Executor::other(int32_t t) const {
  std::string w = where(t);
  if (w.empty()) return text::format("transfer %d", t);
  return text::format("transfer %d at %s", t, w.substr(0, w.size() - 2).c_str());
}

/// "<loc>step S, transfer T (copy rank 2's output chunk 5 to rank 3's output chunk 5)"
/// for chunk k of transfer t.
std::string Executor::at(int32_t t, int32_t k) const {
  const Transfer& x = a_.transfers[t];
  SlotRef src{x.src_rank, x.src_buffer, x.src_index + k}, dst{x.dst_rank, x.dst_buffer, x.dst_index + k};
  return text::format("%sstep %d, transfer %d (%s %s %s %s)", where(t).c_str(), x.step, t,
                      x.op == TransferOp::Copy ? "copy" : "reduce", describe_slot(src).c_str(),
                      x.op == TransferOp::Copy ? "to" : "into", describe_slot(dst).c_str());
}

/// Transfer indices sorted by step, stable (a counting sort when steps are dense).
std::vector<int32_t> Executor::step_order() const {
  const size_t n = a_.transfers.size();
  std::vector<int32_t> order(n);
  int32_t steps = a_.num_steps();
  if (static_cast<size_t>(steps) <= 4 * n + 16) {
    std::vector<int32_t> start(static_cast<size_t>(steps) + 1, 0);
    for (const Transfer& t : a_.transfers) ++start[t.step + 1];
    for (int32_t s = 0; s < steps; ++s) start[s + 1] += start[s];
    for (size_t i = 0; i < n; ++i) order[start[a_.transfers[i].step]++] = static_cast<int32_t>(i);
  } else {
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return a_.transfers[x].step < a_.transfers[y].step; });
  }
  return order;
}

bool Executor::run() {
  const int64_t slots = layout_.total();
  cells_.assign(slots, Cell{});
  for (int32_t r = 0; r < a_.ranks; ++r)
    for (int32_t i = 0; i < a_.input_chunks; ++i)
      cells_[layout_.index_of({r, Buffer::Input, i})] = ContributionStore::single(r, i);
  write_step_.assign(slots, -1);
  write_by_.assign(slots, -1);
  read_step_.assign(slots, -1);
  read_by_.assign(slots, -1);
  read_several_.assign(slots, 0);
  for (int32_t t : step_order()) apply(t, a_.transfers[t].step);
  return clean_;
}

void Executor::apply(int32_t t, int32_t step) {
  const Transfer& x = a_.transfers[t];
  const int64_t s0 = layout_.index_of(x.src()), d0 = layout_.index_of(x.dst());
  // Wording an error costs more than finding it: past the limit, errors are only counted.
  auto error = [&](auto&& word) {
    clean_ = false;
    if (errors_.full())
      errors_.count_only();
    else
      errors_.add(word());
  };
  if (s0 != d0 && s0 < d0 + x.count && d0 < s0 + x.count) {
    error([&] { return at(t, 0) + text::format(": its source and destination ranges of %d chunks overlap", x.count); });
    return;
  }
  for (int32_t k = 0; k < x.count; ++k) {
    const int64_t s = s0 + k, d = d0 + k;
    const SlotRef src{x.src_rank, x.src_buffer, x.src_index + k}, dst{x.dst_rank, x.dst_buffer, x.dst_index + k};

    // Races: a read of s while another transfer of this step writes it; a write of d
    // while another transfer of this step writes or reads it.
    if (write_step_[s] == step && write_by_[s] != t)
      error([&] {
        return at(t, k) + text::format(": reads %s, which %s writes in the same step (a race)",
                                       describe_slot(src).c_str(), other(write_by_[s]).c_str());
      });
    if (read_step_[s] != step) {
      read_step_[s] = step;
      read_by_[s] = t;
      read_several_[s] = 0;
    } else if (read_by_[s] != t) {
      read_several_[s] = 1;
    }
    if (write_step_[d] == step) {
      error([&] {
        return at(t, k) + text::format(": writes %s, which %s also writes in the same step (a race)",
                                       describe_slot(dst).c_str(), other(write_by_[d]).c_str());
      });
    } else if (read_step_[d] == step && (read_several_[d] || read_by_[d] != t)) {
      std::string who = read_by_[d] != t ? other(read_by_[d]) : std::string("another transfer");
      error([&] {
        return at(t, k) + text::format(": writes %s, which %s reads in the same step (a race)",
                                       describe_slot(dst).c_str(), who.c_str());
      });
    }
    write_step_[d] = step;
    write_by_[d] = t;

    // The data: copy overwrites, reduce adds (each contribution at most once).
    const Cell from = cells_[s];
    if (from.kind == CellKind::Empty) {
      error([&] { return at(t, k) + ": reads " + describe_slot(src) + ", which is empty at this step"; });
      continue;
    }
    Cell& into = cells_[d];
    if (x.op == TransferOp::Copy) {
      store_.assign(into, from);
      continue;
    }
    if (into.kind == CellKind::Empty) {
      error([&] { return at(t, k) + ": reduces into " + describe_slot(dst) + ", which is empty at this step"; });
      continue;
    }
    Contribution common{};
    if (store_.intersects(into, from, &common)) {
      error([&] {
        return at(t, k) + ": counts " + describe_contribution(common) + " twice (the source and " + describe_slot(dst) +
               " both hold it)";
      });
      continue;
    }
    store_.unite(into, from);
  }
}

}  // namespace
}  // namespace verify_detail

VerifyResult verify(const Algorithm& algo, const VerifyOptions& options) {
  using namespace verify_detail;
  VerifyResult result;
  ErrorSink errors(options.max_errors);
  try {
    check_shape(algo);
    Executor exec(algo, options, errors);
    if (exec.run())
      check_postcondition(
          algo, exec.layout(), exec.store(), exec.cells(), [&](int64_t slot) { return exec.history(slot); }, errors);
    result.peak_state_bytes = exec.state_bytes();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Verify) throw;
    errors.add(e.what());
  }
  result.error_count = errors.count();
  result.ok = result.error_count == 0;
  result.errors = std::move(errors.messages());
  return result;
}

void verify_or_throw(const Algorithm& algo) {
  VerifyResult r = verify(algo);
  if (r.ok) return;
  std::string msg = algo.name + " fails verification:";
  for (const std::string& e : r.errors) msg += "\n  " + e;
  if (r.error_count > r.errors.size())
    msg += text::format("\n  (and %zu more errors)", r.error_count - r.errors.size());
  fail(ErrorCode::Verify, msg);
}

}  // namespace weft
