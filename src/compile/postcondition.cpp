// The postcondition of every collective kind, with exact-set semantics: an output slot
// must hold exactly the expected contributions, no more and no fewer.
#include <algorithm>
#include <map>

#include "compile/verify_state.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::verify_detail {

namespace {

/// Packs (rank, chunk) for sorting and merging.
uint64_t key(Contribution c) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(c.rank)) << 32) | static_cast<uint32_t>(c.chunk);
}

void sort_unique(std::vector<Contribution>& v) {
  std::sort(v.begin(), v.end(), [](Contribution a, Contribution b) { return key(a) < key(b); });
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

/// Adds the error for `slot` whose actual set differs from `expected` (sorted, unique).
void report(const ContributionStore& store, const Cell& cell, SlotRef slot, const std::vector<Contribution>& expected,
            const std::string& history, ErrorSink& errors) {
  if (errors.full()) return errors.count_only();
  std::vector<Contribution> actual = store.list(cell);
  std::vector<Contribution> missing, extra;
  auto less = [](Contribution a, Contribution b) { return key(a) < key(b); };
  std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(), std::back_inserter(missing),
                      less);
  std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(), std::back_inserter(extra), less);
  std::string what = "at the end, " + describe_slot(slot);
  if (actual.empty()) {
    what += " is empty, but should hold " + describe_contributions(expected);
  } else {
    what += text::format(" holds %zu contribution%s, %zu of the %zu expected", actual.size(),
                         actual.size() == 1 ? "" : "s", actual.size() - extra.size(), expected.size());
    if (!missing.empty()) what += "; missing " + describe_contributions(missing);
    if (!extra.empty()) what += "; unexpected " + describe_contributions(extra);
  }
  if (!history.empty()) what += " (" + history + ")";
  errors.add(what);
}

/// Output slot (rank, i) must hold exactly {(src_rank, chunk)}.
void expect_single(const ContributionStore& store, const std::vector<Cell>& cells, const SlotLayout& layout,
                   SlotRef slot, Contribution want, const HistoryFn& history, ErrorSink& errors) {
  const int64_t index = layout.index_of(slot);
  const Cell& c = cells[index];
  if (c.kind == CellKind::Single && c.value == want.rank && c.chunk == want.chunk) return;
  if (errors.full()) return errors.count_only();
  report(store, c, slot, {want}, history(index), errors);
}

/// Output slot must hold input chunk `chunk` of every rank.
void expect_all_ranks(const ContributionStore& store, const std::vector<Cell>& cells, const SlotLayout& layout,
                      int32_t ranks, SlotRef slot, int32_t chunk, const HistoryFn& history, ErrorSink& errors) {
  const int64_t index = layout.index_of(slot);
  const Cell& c = cells[index];
  if (store.is_all_ranks(c, chunk)) return;
  if (errors.full()) return errors.count_only();
  std::vector<Contribution> want;
  want.reserve(ranks);
  for (int32_t q = 0; q < ranks; ++q) want.push_back({q, chunk});
  report(store, c, slot, want, history(index), errors);
}

}  // namespace

void check_postcondition(const Algorithm& a, const SlotLayout& layout, const ContributionStore& store,
                         const std::vector<Cell>& cells, const HistoryFn& history, ErrorSink& errors) {
  const int32_t R = a.ranks, in = a.input_chunks, out = a.output_chunks;
  auto out_slot = [](int32_t r, int32_t i) { return SlotRef{r, Buffer::Output, i}; };
  switch (a.collective) {
    case Collective::AllGather:
      // Output chunk j of every rank is input chunk j % in of rank j / in.
      for (int32_t r = 0; r < R; ++r)
        for (int32_t j = 0; j < out; ++j)
          expect_single(store, cells, layout, out_slot(r, j), {j / in, j % in}, history, errors);
      return;
    case Collective::ReduceScatter:
      // Output chunk i of rank r is the reduction of input chunk r*out+i over all ranks.
      for (int32_t r = 0; r < R; ++r)
        for (int32_t i = 0; i < out; ++i)
          expect_all_ranks(store, cells, layout, R, out_slot(r, i), r * out + i, history, errors);
      return;
    case Collective::AllReduce:
      for (int32_t r = 0; r < R; ++r)
        for (int32_t i = 0; i < out; ++i) expect_all_ranks(store, cells, layout, R, out_slot(r, i), i, history, errors);
      return;
    case Collective::Reduce:
      for (int32_t i = 0; i < out; ++i)
        expect_all_ranks(store, cells, layout, R, out_slot(a.root, i), i, history, errors);
      return;
    case Collective::Broadcast:
      for (int32_t r = 0; r < R; ++r)
        for (int32_t i = 0; i < out; ++i)
          expect_single(store, cells, layout, out_slot(r, i), {a.root, i}, history, errors);
      return;
    case Collective::AllToAll: {
      // Each rank's input is R blocks of k chunks, block d for rank d; output block q of
      // rank r is block r of rank q's input.
      if (in % R != 0)
        fail(ErrorCode::Verify,
             text::format("%s: AllToAll needs input chunks per rank (%d) divisible by the ranks (%d)", a.name.c_str(),
                          in, R));
      const int32_t k = in / R;
      for (int32_t r = 0; r < R; ++r)
        for (int32_t j = 0; j < out; ++j)
          expect_single(store, cells, layout, out_slot(r, j), {j / k, r * k + j % k}, history, errors);
      return;
    }
    case Collective::Custom: {
      // Expectations on one slot accumulate (several expect statements make a reduction).
      std::map<int64_t, std::pair<SlotRef, std::vector<Contribution>>> want;
      for (const Expectation& e : a.custom_postcondition) {
        const SlotRef& s = e.slot;
        int32_t n = s.buffer == Buffer::Input ? in : s.buffer == Buffer::Output ? out : a.scratch_chunks;
        if (s.rank < 0 || s.rank >= R || s.index < 0 || s.index >= n)
          fail(ErrorCode::Verify,
               text::format("%s: the postcondition names %s, which is out of range (%d ranks, %d %s chunks)",
                            a.name.c_str(), describe_slot(s).c_str(), R, n, std::string(to_string(s.buffer)).c_str()));
        auto& entry = want[layout.index_of(s)];
        entry.first = s;
        for (auto [rank, chunk] : e.contributions) {
          if (rank < 0 || rank >= R || chunk < 0 || chunk >= in)
            fail(ErrorCode::Verify,
                 text::format("%s: the postcondition of %s names rank %d's input chunk %d, which is out "
                              "of range (%d ranks, %d input chunks)",
                              a.name.c_str(), describe_slot(s).c_str(), rank, chunk, R, in));
          entry.second.push_back({rank, chunk});
        }
      }
      for (auto& [index, entry] : want) {
        sort_unique(entry.second);
        const Cell& c = cells[index];
        std::vector<Contribution> actual = store.list(c);
        if (actual == entry.second) continue;
        if (errors.full())
          errors.count_only();
        else
          report(store, c, entry.first, entry.second, history(index), errors);
      }
      return;
    }
  }
}

}  // namespace weft::verify_detail
