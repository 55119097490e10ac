#include "compile/layout.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

/// Everything of an Algorithm but its transfers and their source locations (copying those,
/// millions of them at 1,024 ranks, would cost more than placing them).
Algorithm header_of(const Algorithm& a) {
  Algorithm h;
  h.name = a.name;
  h.collective = a.collective;
  h.ranks = a.ranks;
  h.input_chunks = a.input_chunks;
  h.output_chunks = a.output_chunks;
  h.scratch_chunks = a.scratch_chunks;
  h.in_place = a.in_place;
  h.root = a.root;
  h.custom_postcondition = a.custom_postcondition;
  h.channels = a.channels;
  h.warps = a.warps;
  h.gpus_per_node = a.gpus_per_node;
  h.nics_per_node = a.nics_per_node;
  h.protocol = a.protocol;
  h.source_file = a.source_file;
  return h;
}

std::vector<int32_t> step_order(const Algorithm& a) {
  std::vector<int32_t> order(a.transfers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return a.transfers[x].step < a.transfers[y].step; });
  return order;
}

}  // namespace

PlacedAlgorithm place_as_written(const Algorithm& a) {
  PlacedAlgorithm p;
  p.algo = header_of(a);
  p.algo.transfers.reserve(a.transfers.size());
  p.acc.reserve(a.transfers.size());
  p.origin_offsets.reserve(a.transfers.size() + 1);
  p.origin_ids.reserve(a.transfers.size());
  for (int32_t i : step_order(a)) {
    Transfer t = a.transfers[i];
    SlotRef s = canonical_slot(a, t.src()), d = canonical_slot(a, t.dst());
    t.src_buffer = s.buffer;
    t.src_index = s.index;
    t.dst_buffer = d.buffer;
    t.dst_index = d.index;
    p.push(t, t.dst(), i);
  }
  return p;
}

namespace {

/// Value placement (see layout.hpp): the algorithm runs on logical cells (its own slots, made
/// canonical by its own aliasing); every value a write creates is given a physical cell of the
/// target buffers. Two passes over the transfers in step order: the first finds, per value,
/// its last read and whether it is an output's final value; the second places each new value
/// in its cell's home when that is writable and holds nothing still needed, else in a scratch
/// slot of its own cell, and ends with the copies that bring final values home.
class Placement {
 public:
  Placement(const Algorithm& a, bool in_place) : a_(a), in_place_(in_place) {
    target_ = header_of(a);
    target_.in_place = in_place;
    per_rank_ = int64_t(a.input_chunks) + a.output_chunks + a.scratch_chunks;
    cells_ = per_rank_ * a.ranks;
    if (cells_ > INT32_MAX / 2) fail(ErrorCode::InvalidArgument, "algorithm " + a.name + " has too many chunk slots to place");
    // Scratch slots added here: at most one per logical input or output cell of a rank.
    phys_per_rank_ = per_rank_ + int64_t(a.input_chunks) + a.output_chunks;
    scratch_of_.assign(static_cast<size_t>(cells_), -1);
    next_scratch_.assign(a.ranks, a.scratch_chunks);
  }

  PlacedAlgorithm run() {
    order_ = step_order(a_);
    int64_t values = cells_;
    for (const Transfer& t : a_.transfers) values += t.count;
    if (values >= INT32_MAX) fail(ErrorCode::InvalidArgument, "algorithm " + a_.name + " writes too many chunk slots to place");
    last_step_.assign(static_cast<size_t>(values), -1);
    last_reader_.assign(static_cast<size_t>(values), kNone);
    loc_.assign(static_cast<size_t>(values), -1);
    simulate(false);
    simulate(true);
    return std::move(out_);
  }

 private:
  static constexpr int32_t kNone = -1;
  static constexpr int32_t kSeveral = -2;

  // ---- cells ----
  int64_t logical(SlotRef r) const {
    SlotRef c = canonical_slot(a_, r);
    return c.rank * per_rank_ + offset(c.buffer) + c.index;
  }
  int64_t offset(Buffer b) const {
    return b == Buffer::Input ? 0 : b == Buffer::Output ? a_.input_chunks : int64_t(a_.input_chunks) + a_.output_chunks;
  }
  SlotRef slot_of(int64_t cell) const {
    int32_t rank = static_cast<int32_t>(cell / per_rank_);
    int64_t o = cell % per_rank_;
    if (o < a_.input_chunks) return {rank, Buffer::Input, static_cast<int32_t>(o)};
    if (o < offset(Buffer::Scratch)) return {rank, Buffer::Output, static_cast<int32_t>(o - a_.input_chunks)};
    return {rank, Buffer::Scratch, static_cast<int32_t>(o - offset(Buffer::Scratch))};
  }
  int64_t phys(SlotRef r) const {
    SlotRef c = canonical_slot(target_, r);
    return c.rank * phys_per_rank_ + offset(c.buffer) + c.index;
  }
  SlotRef phys_slot(int64_t p) const {
    int32_t rank = static_cast<int32_t>(p / phys_per_rank_);
    int64_t o = p % phys_per_rank_;
    if (o < a_.input_chunks) return {rank, Buffer::Input, static_cast<int32_t>(o)};
    if (o < offset(Buffer::Scratch)) return {rank, Buffer::Output, static_cast<int32_t>(o - a_.input_chunks)};
    return {rank, Buffer::Scratch, static_cast<int32_t>(o - offset(Buffer::Scratch))};
  }
  bool output_defined(int32_t rank) const { return a_.collective != Collective::Reduce || rank == a_.root; }
  /// The input slot whose initial value a logical cell holds, if any.
  std::optional<SlotRef> input_of(int64_t cell) const {
    SlotRef s = slot_of(cell);
    if (s.buffer == Buffer::Scratch) return std::nullopt;
    if (!a_.in_place) return s.buffer == Buffer::Input ? std::optional<SlotRef>(s) : std::nullopt;
    if (!(canonical_slot(a_, s) == s)) return std::nullopt;  // an alias: never used
    // Canonical cell of an in-place algorithm: the input slot it aliases, if any.
    if (a_.collective == Collective::AllGather) {
      int32_t base = s.rank * a_.input_chunks;
      if (s.index < base || s.index >= base + a_.input_chunks) return std::nullopt;
      return SlotRef{s.rank, Buffer::Input, s.index - base};
    }
    if (s.index >= a_.input_chunks) return std::nullopt;
    return SlotRef{s.rank, Buffer::Input, s.index};
  }
  /// The output slot a logical cell must end in, if the collective defines the rank's output.
  std::optional<SlotRef> output_of(int64_t cell) const {
    SlotRef s = slot_of(cell);
    if (s.buffer == Buffer::Scratch || !output_defined(s.rank)) return std::nullopt;
    if (!a_.in_place) return s.buffer == Buffer::Output ? std::optional<SlotRef>(s) : std::nullopt;
    if (!(canonical_slot(a_, s) == s)) return std::nullopt;  // an alias: never used
    if (a_.collective == Collective::ReduceScatter) {
      int32_t base = s.rank * a_.output_chunks;
      if (s.index < base || s.index >= base + a_.output_chunks) return std::nullopt;
      return SlotRef{s.rank, Buffer::Output, s.index - base};
    }
    if (s.index >= a_.output_chunks) return std::nullopt;
    return SlotRef{s.rank, Buffer::Output, s.index};
  }
  /// Whether the plan may write a physical cell: scratch always; the user's buffers only where
  /// the collective gives the rank an output (Reduce: the root), and never the input out of place.
  bool writable(int64_t p) const {
    SlotRef s = phys_slot(p);
    if (s.buffer == Buffer::Scratch) return true;
    if (!output_defined(s.rank)) return false;
    return in_place_ || s.buffer == Buffer::Output;
  }
  /// Where a logical cell's values live when nothing stands in the way.
  int64_t home(int64_t cell) {
    SlotRef s = slot_of(cell);
    if (s.buffer == Buffer::Scratch) return phys(s);
    if (auto o = output_of(cell); o && writable(phys(*o))) return phys(*o);
    if (in_place_)
      if (auto i = input_of(cell); i && writable(phys(*i))) return phys(*i);
    return own_scratch(cell);
  }
  int64_t own_scratch(int64_t cell) {
    int32_t& s = scratch_of_[static_cast<size_t>(cell)];
    int32_t rank = static_cast<int32_t>(cell / per_rank_);
    if (s < 0) s = next_scratch_[rank]++;
    return rank * phys_per_rank_ + offset(Buffer::Scratch) + s;
  }

  // ---- values: ids [0, cells_) are the cells' initial values, then one per write ----
  int32_t value_of(int64_t cell) const { return cur_[static_cast<size_t>(cell)]; }
  bool has_initial(int64_t cell) const { return input_of(cell).has_value(); }
  void reset_values() {
    cur_.assign(static_cast<size_t>(cells_), kNone);
    for (int64_t c = 0; c < cells_; ++c)
      if (has_initial(c)) cur_[static_cast<size_t>(c)] = static_cast<int32_t>(c);
    next_value_ = cells_;
  }
  bool dead_after(int32_t v, int32_t step, int32_t t) const {
    if (v < 0) return true;
    if (final_[static_cast<size_t>(v)]) return false;
    int32_t s = last_step_[static_cast<size_t>(v)];
    return s < step || (s == step && last_reader_[static_cast<size_t>(v)] == t);
  }

  /// Pass 1 (`place` false) records reads and final values; pass 2 places and emits.
  void simulate(bool place) {
    reset_values();
    if (place) {
      out_.algo = target_;
      out_.algo.transfers.reserve(a_.transfers.size());
      occupant_.assign(static_cast<size_t>(phys_per_rank_ * a_.ranks), kNone);
      last_access_.assign(occupant_.size(), -1);
      for (int64_t c = 0; c < cells_; ++c)
        if (has_initial(c)) {
          int64_t p = phys(*input_of(c));
          loc_[static_cast<size_t>(c)] = p;
          occupant_[static_cast<size_t>(p)] = static_cast<int32_t>(c);
        }
    }
    std::vector<std::pair<int64_t, int32_t>> pending;  // (cell, value) written in this step
    for (size_t i = 0; i < order_.size();) {
      const int32_t step = a_.transfers[order_[i]].step;
      size_t j = i;
      for (; j < order_.size() && a_.transfers[order_[j]].step == step; ++j) {
        if (place) place_transfer(order_[j], pending);
        else record_transfer(order_[j], pending);
      }
      for (auto [cell, v] : pending) cur_[static_cast<size_t>(cell)] = v;
      pending.clear();
      i = j;
    }
    if (!place) {
      final_.assign(last_step_.size(), 0);
      for (int64_t c = 0; c < cells_; ++c)
        if (output_of(c) && value_of(c) >= 0) final_[static_cast<size_t>(value_of(c))] = 1;
      return;
    }
    bring_home();
    out_.algo.scratch_chunks = a_.scratch_chunks;
    for (int32_t n : next_scratch_) out_.algo.scratch_chunks = std::max(out_.algo.scratch_chunks, n);
  }

  void read(int32_t v, int32_t step, int32_t t) {
    if (v < 0) return;
    int32_t& s = last_step_[static_cast<size_t>(v)];
    int32_t& r = last_reader_[static_cast<size_t>(v)];
    if (s < step) s = step, r = t;
    else if (r != t) r = kSeveral;
  }
  int32_t new_value() { return static_cast<int32_t>(next_value_++); }

  void check_defined_read(const Transfer& t, int64_t cell) const {
    // Broadcast leaves the input of every rank but the root undefined (NCCL's sendbuff may
    // be anything there): no plan may read it.
    if (a_.collective != Collective::Broadcast || value_of(cell) < 0 || value_of(cell) >= cells_) return;
    SlotRef in = *input_of(value_of(cell));
    if (in.rank != a_.root)
      fail(ErrorCode::Verify, text::format("algorithm %s reads rank %d's input chunk %d at step %d, which Broadcast leaves "
                                           "undefined on ranks other than the root (%d)",
                                           a_.name.c_str(), in.rank, in.index, t.step, a_.root));
  }

  void record_transfer(int32_t index, std::vector<std::pair<int64_t, int32_t>>& pending) {
    const Transfer& t = a_.transfers[index];
    for (int32_t o = 0; o < t.count; ++o) {
      int64_t s = logical({t.src_rank, t.src_buffer, t.src_index + o});
      int64_t d = logical({t.dst_rank, t.dst_buffer, t.dst_index + o});
      check_defined_read(t, s);
      read(value_of(s), t.step, index);
      if (t.op == TransferOp::Reduce) {
        check_defined_read(t, d);
        read(value_of(d), t.step, index);
      }
      pending.push_back({d, new_value()});
    }
  }

  static bool follows(SlotRef prev, SlotRef next) {
    return prev.rank == next.rank && prev.buffer == next.buffer && prev.index + 1 == next.index;
  }

  void place_transfer(int32_t index, std::vector<std::pair<int64_t, int32_t>>& pending) {
    const Transfer& t = a_.transfers[index];
    const bool reduce = t.op == TransferOp::Reduce;
    SlotRef ps{}, pd{}, pa{}, s0{}, d0{}, a0{};
    int32_t run = 0;
    auto flush = [&] {
      if (run > 0) emit(t, s0, d0, reduce ? a0 : d0, run, index);
      run = 0;
    };
    for (int32_t o = 0; o < t.count; ++o) {
      int64_t sc = logical({t.src_rank, t.src_buffer, t.src_index + o});
      int64_t dc = logical({t.dst_rank, t.dst_buffer, t.dst_index + o});
      int32_t sv = value_of(sc), av = reduce ? value_of(dc) : kNone;
      int64_t sp = where(sv, sc), ap = reduce ? where(av, dc) : -1;
      int32_t w = new_value();
      pending.push_back({dc, w});
      int64_t h = home(dc);
      int64_t dp = h;
      if (!reduce && sp == h && dead_after(sv, t.step, index)) {
        // A copy onto the cell that already holds the value (an out-of-place algorithm's
        // local copy, in place): nothing moves.
        loc_[static_cast<size_t>(w)] = h;
        occupant_[static_cast<size_t>(h)] = w;
        last_access_[static_cast<size_t>(h)] = t.step;
        flush();
        continue;
      }
      // The home is taken while it holds a value still to be read (in place, an input that
      // another transfer reads later or in this step): the new value waits in scratch.
      int32_t occ = occupant_[static_cast<size_t>(h)];
      if (occ != kNone && occ != w && !dead_after(occ, t.step, index)) dp = own_scratch(dc);
      loc_[static_cast<size_t>(w)] = dp;
      occupant_[static_cast<size_t>(dp)] = w;
      for (int64_t p : {sp, dp, ap})
        if (p >= 0) last_access_[static_cast<size_t>(p)] = t.step;
      SlotRef s = phys_slot(sp), d = phys_slot(dp), a = reduce ? phys_slot(ap) : SlotRef{};
      if (run > 0 && follows(ps, s) && follows(pd, d) && (!reduce || follows(pa, a))) {
        ++run;
      } else {
        flush();
        s0 = s, d0 = d, a0 = a, run = 1;
      }
      ps = s, pd = d, pa = a;
    }
    flush();
  }

  /// Where value `v` of logical cell `cell` is now (a value nothing wrote reads the cell's home).
  int64_t where(int32_t v, int64_t cell) {
    if (v >= 0 && loc_[static_cast<size_t>(v)] >= 0) return loc_[static_cast<size_t>(v)];
    return home(cell);
  }

  // Placed steps: step s of the algorithm becomes 3s+1; a copy that must precede it (a local
  // Reduce's accumulator) takes 3s, one that must follow (a final value brought home) 3s+2.
  // Aggregation reorders transfers within a step, so order that matters needs its own step;
  // steps are renumbered densely at the end.
  void emit(const Transfer& t, SlotRef src, SlotRef dst, SlotRef acc, int32_t count, int32_t origin) {
    Transfer x = t;
    x.step = 3 * t.step + 1;
    x.src_buffer = src.buffer;
    x.src_index = src.index;
    x.dst_buffer = dst.buffer;
    x.dst_index = dst.index;
    x.count = count;
    if (t.op == TransferOp::Reduce && t.src_rank == t.dst_rank && !(acc == dst)) {
      // A local Reduce has no separate accumulator operand: copy the accumulator first.
      Transfer c = x;
      c.src_buffer = acc.buffer;
      c.src_index = acc.index;
      c.op = TransferOp::Copy;
      c.step = 3 * t.step;
      out_.push(c, dst, -1);
      acc = dst;
    }
    out_.push(x, t.op == TransferOp::Reduce ? acc : dst, origin);
  }

  /// Final values not in their output slot are copied there, in runs, once nothing else
  /// touches the slot; then the transfers are sorted by step again.
  void bring_home() {
    bool added = false;
    for (int32_t r = 0; r < a_.ranks; ++r) {
      SlotRef s0{}, d0{}, ps{}, pd{};
      int32_t run = 0, step = 0, pstep = 0;
      auto flush = [&] {
        if (run == 0) return;
        Transfer c;
        c.src_rank = c.dst_rank = r;
        c.src_buffer = s0.buffer, c.src_index = s0.index;
        c.dst_buffer = d0.buffer, c.dst_index = d0.index;
        c.count = run;
        c.op = TransferOp::Copy;
        c.step = step;
        out_.push(c, c.dst(), -1);
        added = true;
        run = 0;
      };
      for (int64_t c = r * per_rank_; c < (r + 1) * per_rank_; ++c) {
        auto out = output_of(c);
        int32_t v = value_of(c);
        if (!out || v < 0) continue;
        int64_t from = loc_[static_cast<size_t>(v)], to = phys(*out);
        if (from == to) continue;
        // After the last access of either slot; a copy between slots nothing else touches
        // (an output the algorithm never writes, out of place) runs with the first step.
        int32_t last = std::max(last_access_[static_cast<size_t>(to)], last_access_[static_cast<size_t>(from)]);
        int32_t at = last < 0 ? 1 : 3 * last + 2;
        SlotRef f = phys_slot(from), d = phys_slot(to);
        if (run > 0 && follows(ps, f) && follows(pd, d) && at == pstep) {
          ++run;
        } else {
          flush();
          s0 = f, d0 = d, run = 1, step = at;
        }
        ps = f, pd = d, pstep = at;
      }
      flush();
    }
    if (added) {
      std::vector<int32_t> order = step_order(out_.algo);
      PlacedAlgorithm sorted;
      sorted.algo = header_of(out_.algo);
      for (int32_t i : order) {
        auto o = out_.origins_of(i);
        sorted.push(out_.algo.transfers[i], out_.acc[i], o.empty() ? -1 : o[0]);
      }
      out_ = std::move(sorted);
    }
    int32_t dense = -1, prev = INT32_MIN;
    for (Transfer& t : out_.algo.transfers) {
      if (t.step != prev) prev = t.step, ++dense;
      t.step = dense;
    }
  }

  const Algorithm& a_;
  const bool in_place_;
  Algorithm target_;  // header only: the target aliasing, for canonical_slot
  int64_t per_rank_ = 0, cells_ = 0, phys_per_rank_ = 0;
  std::vector<int32_t> order_;
  std::vector<int32_t> scratch_of_, next_scratch_;
  std::vector<int32_t> cur_;                        // logical cell -> its value now
  int64_t next_value_ = 0;
  std::vector<int32_t> last_step_, last_reader_;    // per value (pass 1)
  std::vector<uint8_t> final_;                      // per value: an output's final value
  std::vector<int64_t> loc_;                        // per value: its physical cell (pass 2)
  std::vector<int32_t> occupant_, last_access_;     // per physical cell (pass 2)
  PlacedAlgorithm out_;
};

}  // namespace

void aggregate_transfers(PlacedAlgorithm& p) {
  const std::vector<Transfer>& ts = p.algo.transfers;
  const int32_t n = static_cast<int32_t>(ts.size());
  auto key = [&](int32_t i) {
    const Transfer& t = ts[i];
    return std::make_tuple(t.src_rank, t.dst_rank, static_cast<int>(t.op), static_cast<int>(t.src_buffer),
                           static_cast<int>(t.dst_buffer), static_cast<int>(p.acc[i].buffer), t.src_index, i);
  };
  PlacedAlgorithm out;
  out.algo = header_of(p.algo);
  out.algo.transfers.reserve(ts.size());
  out.acc.reserve(ts.size());
  out.origin_offsets.reserve(ts.size() + 1);
  out.origin_ids.reserve(ts.size());
  std::vector<int32_t> idx;
  for (int32_t i = 0; i < n;) {
    int32_t j = i;
    while (j < n && ts[j].step == ts[i].step) ++j;
    idx.resize(j - i);
    std::iota(idx.begin(), idx.end(), i);
    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
    for (size_t k = 0; k < idx.size();) {
      Transfer run = ts[idx[k]];
      SlotRef acc = p.acc[idx[k]];
      size_t m = k + 1;
      for (; m < idx.size(); ++m) {
        const Transfer& t = ts[idx[m]];
        const SlotRef& a = p.acc[idx[m]];
        if (t.src_rank != run.src_rank || t.dst_rank != run.dst_rank || t.op != run.op ||
            t.src_buffer != run.src_buffer || t.dst_buffer != run.dst_buffer || a.buffer != acc.buffer ||
            t.src_index != run.src_index + run.count || t.dst_index != run.dst_index + run.count ||
            (t.op == TransferOp::Reduce && a.index != acc.index + run.count))
          break;
        run.count += t.count;
      }
      out.algo.transfers.push_back(run);
      out.acc.push_back(acc);
      for (size_t q = k; q < m; ++q)
        for (int32_t o : p.origins_of(idx[q])) out.origin_ids.push_back(o);
      out.origin_offsets.push_back(static_cast<int32_t>(out.origin_ids.size()));
      k = m;
    }
    i = j;
  }
  p = std::move(out);
}

bool places_as_written(const Algorithm& algo, bool in_place) {
  // In place to in place keeps every slot where the algorithm put it (a verified algorithm
  // reads no value it has overwritten), except for Reduce, whose non-root buffers are the
  // caller's and must not change, and Broadcast, whose non-root inputs must not be read.
  return algo.collective == Collective::Custom || (in_place && algo.in_place && algo.collective != Collective::Reduce &&
                                                   algo.collective != Collective::Broadcast);
}

PlacedAlgorithm place_buffers(const Algorithm& algo, bool in_place, bool aggregate) {
  PlacedAlgorithm p = places_as_written(algo, in_place) ? place_as_written(algo) : Placement(algo, in_place).run();
  if (aggregate) aggregate_transfers(p);
  return p;
}

}  // namespace weft
