#include "compile/chain_order.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

/// One chunk slot, named canonically (in-place aliasing taken into account).
int64_t cell(const Algorithm& a, int32_t rank, Buffer buffer, int32_t index) {
  const SlotRef s = canonical_slot(a, {rank, buffer, index});
  return ((static_cast<int64_t>(s.rank) * 4 + static_cast<int64_t>(s.buffer)) << 32) | static_cast<uint32_t>(s.index);
}

struct Access {
  int32_t step = 0;
  int32_t transfer = 0;
  bool write = false;
};

/// Per cell, every transfer's reads and writes of it, in step order.
class Accesses {
 public:
  explicit Accesses(const Algorithm& a) : a_(a) {
    for (int32_t i = 0; i < static_cast<int32_t>(a.transfers.size()); ++i) {
      const Transfer& t = a.transfers[static_cast<size_t>(i)];
      for (int32_t c = 0; c < t.count; ++c) {
        by_cell_[cell(a, t.src_rank, t.src_buffer, t.src_index + c)].push_back({t.step, i, false});
        by_cell_[cell(a, t.dst_rank, t.dst_buffer, t.dst_index + c)].push_back({t.step, i, true});
      }
    }
    for (auto& [c, v] : by_cell_)
      std::stable_sort(v.begin(), v.end(), [](const Access& x, const Access& y) { return x.step < y.step; });
  }

  /// Whether a transfer other than those `mine` accepts touches (writes, or reads when
  /// `reads`) a cell of [index, index + count) on (rank, buffer) at a step in [from, to].
  template <typename Mine>
  bool touched(int32_t rank, Buffer buffer, int32_t index, int32_t count, int32_t from, int32_t to, bool reads,
               Mine mine) const {
    for (int32_t c = 0; c < count; ++c) {
      auto it = by_cell_.find(cell(a_, rank, buffer, index + c));
      if (it == by_cell_.end()) continue;
      const std::vector<Access>& v = it->second;
      auto at = std::lower_bound(v.begin(), v.end(), from, [](const Access& x, int32_t s) { return x.step < s; });
      for (; at != v.end() && at->step <= to; ++at)
        if ((reads || at->write) && !mine(at->transfer)) return true;
    }
    return false;
  }

 private:
  const Algorithm& a_;
  std::unordered_map<int64_t, std::vector<Access>> by_cell_;
};

/// Whether transfer x's source overlaps its destination (canonically).
bool reads_own_destination(const Algorithm& a, const Transfer& x) {
  for (int32_t i = 0; i < x.count; ++i)
    for (int32_t j = 0; j < x.count; ++j)
      if (cell(a, x.src_rank, x.src_buffer, x.src_index + i) == cell(a, x.dst_rank, x.dst_buffer, x.dst_index + j))
        return true;
  return false;
}

}  // namespace

std::vector<std::vector<int32_t>> reduce_chains(const Algorithm& a) {
  // Reduce transfers grouped by their destination, each group in step order.
  std::map<std::tuple<int64_t, int32_t>, std::vector<int32_t>> groups;
  for (int32_t i = 0; i < static_cast<int32_t>(a.transfers.size()); ++i) {
    const Transfer& t = a.transfers[static_cast<size_t>(i)];
    if (t.op == TransferOp::Reduce && t.src_rank != t.dst_rank)
      groups[{cell(a, t.dst_rank, t.dst_buffer, t.dst_index), t.count}].push_back(i);
  }
  if (groups.empty()) return {};
  const Accesses acc(a);
  auto step_of = [&](int32_t i) { return a.transfers[static_cast<size_t>(i)].step; };
  std::vector<std::vector<int32_t>> chains;
  auto close = [&](std::vector<int32_t>& run) {
    if (run.size() >= 2) chains.push_back(run);
    run.clear();
  };
  // Whether transfer x's source is written at a step in [from, to].
  auto written = [&](int32_t x, int32_t from, int32_t to) {
    const Transfer& t = a.transfers[static_cast<size_t>(x)];
    return from <= to && acc.touched(t.src_rank, t.src_buffer, t.src_index, t.count, from, to, false, [](int32_t) { return false; });
  };
  for (auto& [key, members] : groups) {
    std::stable_sort(members.begin(), members.end(), [&](int32_t x, int32_t y) { return step_of(x) < step_of(y); });
    std::vector<int32_t> run;
    for (int32_t m : members) {
      const Transfer& x = a.transfers[static_cast<size_t>(m)];
      if (reads_own_destination(a, x)) {
        close(run);
        continue;
      }
      if (!run.empty()) {
        const int32_t prev = run.back(), first = step_of(run.front());
        // In a step of its own, nothing else reads or writes the destination between the
        // two, and every source, its own included, keeps its value from the run's first step.
        bool joins = step_of(prev) < x.step &&
                     !acc.touched(x.dst_rank, x.dst_buffer, x.dst_index, x.count, step_of(prev), x.step, true,
                                  [&](int32_t t) { return t == prev || t == m; }) &&
                     !written(m, first, x.step);
        for (size_t i = 0; joins && i < run.size(); ++i) joins = !written(run[i], step_of(prev) + 1, x.step);
        if (!joins) close(run);
      }
      // Alone, it starts a run where its source keeps its value from its own step on.
      if (!run.empty() || !written(m, x.step, x.step)) run.push_back(m);
    }
    close(run);
  }
  std::sort(chains.begin(), chains.end(), [&](const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
    return std::make_pair(step_of(x.front()), x.front()) < std::make_pair(step_of(y.front()), y.front());
  });
  return chains;
}

Algorithm order_chains(const Algorithm& a, const std::vector<double>& keys) {
  if (keys.empty()) return a;
  if (keys.size() != a.transfers.size())
    fail(ErrorCode::InvalidArgument, text::format("chain_keys has %zu entries for %zu transfers; it must have one per "
                                                  "transfer or none",
                                                  keys.size(), a.transfers.size()));
  Algorithm out = a;
  for (const std::vector<int32_t>& chain : reduce_chains(a)) {
    std::vector<size_t> by_key(chain.size());
    std::iota(by_key.begin(), by_key.end(), 0);
    std::stable_sort(by_key.begin(), by_key.end(), [&](size_t x, size_t y) {
      return keys[static_cast<size_t>(chain[x])] < keys[static_cast<size_t>(chain[y])];
    });
    for (size_t j = 0; j < chain.size(); ++j)
      out.transfers[static_cast<size_t>(chain[by_key[j]])].step = a.transfers[static_cast<size_t>(chain[j])].step;
  }
  return out;
}

}  // namespace weft
