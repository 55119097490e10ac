#include "compile/layout.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

#include "util/error.hpp"

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

/// The identity placement (names made canonical), for in-place plans and for algorithms that
/// are already out of place.
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

/// Out-of-place rewriting of an in-place algorithm (see layout.hpp).
class OutOfPlace {
 public:
  explicit OutOfPlace(const Algorithm& a) : a_(a) {
    canon_ = a.collective == Collective::ReduceScatter ? Buffer::Input : Buffer::Output;
    n_ = canon_ == Buffer::Input ? a.input_chunks : a.output_chunks;
    size_t cells = static_cast<size_t>(a.ranks) * static_cast<size_t>(n_);
    written_.assign(cells, 0);
    scratch_of_.assign(cells, -1);
    next_scratch_.assign(a.ranks, a.scratch_chunks);
  }

  PlacedAlgorithm run() {
    PlacedAlgorithm p;
    p.algo = header_of(a_);
    p.algo.in_place = false;
    std::vector<int32_t> order = step_order(a_);
    std::vector<int32_t> writes;  // canonical cells written in the current step
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      int32_t step = a_.transfers[order[i]].step;
      // Reads of one step see the writes of earlier steps only (the verifier has rejected
      // a read and a write of one slot in one step).
      for (; j < order.size() && a_.transfers[order[j]].step == step; ++j) place(order[j], p, writes);
      for (int32_t c : writes) written_[c] = 1;
      writes.clear();
      i = j;
    }
    add_initial_copies(p);
    int32_t extra = a_.scratch_chunks;
    for (int32_t n : next_scratch_) extra = std::max(extra, n);
    p.algo.scratch_chunks = extra;
    return p;
  }

 private:
  // Canonical cell of a (non-scratch) slot reference, or -1 for scratch.
  int32_t cell(SlotRef r) const {
    if (r.buffer == Buffer::Scratch) return -1;
    SlotRef c = canonical_slot(a_, r);
    WEFT_ASSERT(c.buffer == canon_, "canonical slot outside the canonical buffer");
    return r.rank * n_ + c.index;
  }
  std::optional<SlotRef> input_of(int32_t rank, int32_t idx) const {
    if (a_.collective == Collective::AllGather) {
      int32_t base = rank * a_.input_chunks;
      if (idx < base || idx >= base + a_.input_chunks) return std::nullopt;
      return SlotRef{rank, Buffer::Input, idx - base};
    }
    if (idx >= a_.input_chunks) return std::nullopt;
    return SlotRef{rank, Buffer::Input, idx};
  }
  std::optional<SlotRef> output_of(int32_t rank, int32_t idx) const {
    if (a_.collective == Collective::ReduceScatter) {
      int32_t base = rank * a_.output_chunks;
      if (idx < base || idx >= base + a_.output_chunks) return std::nullopt;
      return SlotRef{rank, Buffer::Output, idx - base};
    }
    if (idx >= a_.output_chunks) return std::nullopt;
    return SlotRef{rank, Buffer::Output, idx};
  }
  // Where a write of canonical (rank, idx) lands; allocates a scratch slot on first need.
  SlotRef write_loc(int32_t rank, int32_t idx) {
    if (auto o = output_of(rank, idx)) return *o;
    int32_t& s = scratch_of_[static_cast<size_t>(rank) * n_ + idx];
    if (s < 0) s = next_scratch_[rank]++;
    return {rank, Buffer::Scratch, s};
  }
  // Where a read of canonical (rank, idx) finds the value now.
  SlotRef read_loc(int32_t rank, int32_t idx) {
    if (written_[static_cast<size_t>(rank) * n_ + idx]) return write_loc(rank, idx);
    if (auto in = input_of(rank, idx)) return *in;
    return *output_of(rank, idx);  // never written, no input: what in place would read
  }
  SlotRef phys_read(SlotRef r) {
    if (r.buffer == Buffer::Scratch) return r;
    SlotRef c = canonical_slot(a_, r);
    return read_loc(r.rank, c.index);
  }
  SlotRef phys_write(SlotRef r, std::vector<int32_t>& writes) {
    if (r.buffer == Buffer::Scratch) return r;
    SlotRef c = canonical_slot(a_, r);
    writes.push_back(cell(r));
    return write_loc(r.rank, c.index);
  }
  static bool follows(SlotRef prev, SlotRef next) {
    return prev.rank == next.rank && prev.buffer == next.buffer && prev.index + 1 == next.index;
  }

  void emit(PlacedAlgorithm& p, const Transfer& t, SlotRef src, SlotRef dst, SlotRef acc, int32_t count,
            int32_t origin) {
    Transfer x = t;
    x.src_buffer = src.buffer;
    x.src_index = src.index;
    x.dst_buffer = dst.buffer;
    x.dst_index = dst.index;
    x.count = count;
    bool local = t.src_rank == t.dst_rank;
    if (t.op == TransferOp::Reduce && local && !(acc == dst)) {
      // A local Reduce has no separate accumulator operand: copy the accumulator first.
      Transfer c = x;
      c.src_buffer = acc.buffer;
      c.src_index = acc.index;
      c.op = TransferOp::Copy;
      p.push(c, dst, -1);
      acc = dst;
    }
    p.push(x, t.op == TransferOp::Reduce ? acc : dst, origin);
  }

  void place(int32_t index, PlacedAlgorithm& p, std::vector<int32_t>& writes) {
    const Transfer& t = a_.transfers[index];
    bool reduce = t.op == TransferOp::Reduce;
    SlotRef ps{}, pd{}, pa{}, s0{}, d0{}, a0{};
    int32_t run = 0;
    for (int32_t o = 0; o < t.count; ++o) {
      SlotRef s = phys_read({t.src_rank, t.src_buffer, t.src_index + o});
      SlotRef a = reduce ? phys_read({t.dst_rank, t.dst_buffer, t.dst_index + o}) : SlotRef{};
      SlotRef d = phys_write({t.dst_rank, t.dst_buffer, t.dst_index + o}, writes);
      if (run > 0 && follows(ps, s) && follows(pd, d) && (!reduce || follows(pa, a))) {
        ++run;
      } else {
        if (run > 0) emit(p, t, s0, d0, reduce ? a0 : d0, run, index);
        s0 = s, d0 = d, a0 = a, run = 1;
      }
      ps = s, pd = d, pa = a;
    }
    if (run > 0) emit(p, t, s0, d0, reduce ? a0 : d0, run, index);
  }

  // Output slots that no transfer wrote keep the input's value: copy it, in runs.
  void add_initial_copies(PlacedAlgorithm& p) {
    for (int32_t r = 0; r < a_.ranks; ++r) {
      SlotRef s0{}, d0{}, ps{}, pd{};
      int32_t run = 0;
      auto flush = [&] {
        if (run == 0) return;
        Transfer c;
        c.src_rank = c.dst_rank = r;
        c.src_buffer = s0.buffer, c.src_index = s0.index;
        c.dst_buffer = d0.buffer, c.dst_index = d0.index;
        c.count = run;
        c.op = TransferOp::Copy;
        c.step = 0;
        p.push(c, c.dst(), -1);
        run = 0;
      };
      for (int32_t i = 0; i < n_; ++i) {
        auto out = output_of(r, i);
        auto in = input_of(r, i);
        if (written_[static_cast<size_t>(r) * n_ + i] || !out || !in) {
          flush();
          continue;
        }
        if (run > 0 && follows(ps, *in) && follows(pd, *out)) {
          ++run;
        } else {
          flush();
          s0 = *in, d0 = *out, run = 1;
        }
        ps = *in, pd = *out;
      }
      flush();
    }
    // Keep the transfers sorted by step (the copies touch slots nothing else touches).
    std::vector<int32_t> order = step_order(p.algo);
    PlacedAlgorithm sorted;
    sorted.algo = header_of(p.algo);
    for (int32_t i : order) {
      auto o = p.origins_of(i);
      sorted.push(p.algo.transfers[i], p.acc[i], o.empty() ? -1 : o[0]);
    }
    p = std::move(sorted);
  }

  const Algorithm& a_;
  Buffer canon_;
  int32_t n_ = 0;
  std::vector<uint8_t> written_;
  std::vector<int32_t> scratch_of_;
  std::vector<int32_t> next_scratch_;
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

PlacedAlgorithm place_buffers(const Algorithm& algo, bool in_place, bool aggregate) {
  PlacedAlgorithm p = in_place || !algo.in_place || algo.collective == Collective::Custom ? place_as_written(algo)
                                                                                         : OutOfPlace(algo).run();
  if (aggregate) aggregate_transfers(p);
  return p;
}

}  // namespace weft
