#include "compile/merge_blocks.hpp"

#include <algorithm>
#include <numeric>

#include "util/error.hpp"

namespace weft {
namespace {

using Interval = std::pair<double, double>;

/// Whether any interval of `a` overlaps one of `b` (both sorted by start), `gap` apart at least.
bool overlaps(const std::vector<Interval>& a, const std::vector<Interval>& b, double gap) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].second + gap <= b[j].first) ++i;
    else if (b[j].second + gap <= a[i].first) ++j;
    else return true;
  }
  return false;
}

}  // namespace

BlockMerge merge_by_activity(const std::vector<std::vector<std::vector<SlotActivity>>>& activity, double gap_us) {
  BlockMerge out(activity.size());
  for (size_t r = 0; r < activity.size(); ++r) {
    const auto& blocks = activity[r];
    std::vector<std::vector<Interval>> own(blocks.size());
    std::vector<double> start(blocks.size(), 0), busy(blocks.size(), 0);
    for (size_t tb = 0; tb < blocks.size(); ++tb) {
      for (const SlotActivity& s : blocks[tb]) own[tb].push_back({s.first_us, s.last_us});
      std::sort(own[tb].begin(), own[tb].end());
      start[tb] = own[tb].empty() ? 0 : own[tb].front().first;
    }
    std::vector<int32_t> order(blocks.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return start[x] < start[y]; });
    std::vector<std::vector<Interval>> merged;  // per new block, its slots' intervals, sorted
    std::vector<std::vector<int32_t>> members;
    std::vector<double> load;
    for (int32_t tb : order) {
      int32_t best = -1;
      for (size_t n = 0; n < merged.size(); ++n)
        if (!overlaps(merged[n], own[tb], gap_us) && (best < 0 || load[n] > load[best])) best = static_cast<int32_t>(n);
      if (best < 0) {
        best = static_cast<int32_t>(merged.size());
        merged.emplace_back();
        members.emplace_back();
        load.push_back(0);
      }
      std::vector<Interval> u;
      std::merge(merged[best].begin(), merged[best].end(), own[tb].begin(), own[tb].end(), std::back_inserter(u));
      merged[best].swap(u);
      members[best].push_back(tb);
      for (const Interval& i : own[tb]) load[best] += i.second - i.first;
    }
    for (const std::vector<int32_t>& m : members) {
      std::vector<std::pair<int32_t, int32_t>> slots;
      for (int32_t tb : m)
        for (int32_t s = 0; s < static_cast<int32_t>(blocks[tb].size()); ++s) slots.push_back({tb, s});
      // In order of start; an old block's slots keep their order (they ran one after the other).
      std::stable_sort(slots.begin(), slots.end(), [&](const auto& x, const auto& y) {
        const double a = blocks[x.first][x.second].first_us, b = blocks[y.first][y.second].first_us;
        if (x.first == y.first) return x.second < y.second;
        return a < b;
      });
      out[r].push_back(std::move(slots));
    }
  }
  return out;
}

bool merge_thread_blocks(Plan& plan, const BlockMerge& merge) {
  WEFT_ASSERT(plan.execution == ExecutionModel::Task, "thread blocks are merged in task-level plans only");
  WEFT_ASSERT(merge.size() == plan.ranks.size(), "a block merge names every rank");
  std::vector<RankPlan> ranks(plan.ranks.size());
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankPlan& old = plan.ranks[r];
    // Where each old slot lands: (new block, position).
    std::vector<std::vector<SlotDep>> where(old.tbs.size());
    for (size_t tb = 0; tb < old.tbs.size(); ++tb) where[tb].assign(old.tbs[tb].slots.size(), SlotDep{-1, -1});
    size_t placed = 0;
    for (size_t n = 0; n < merge[r].size(); ++n)
      for (size_t i = 0; i < merge[r][n].size(); ++i) {
        const auto [tb, s] = merge[r][n][i];
        WEFT_ASSERT(tb >= 0 && tb < static_cast<int32_t>(old.tbs.size()) && s >= 0 &&
                        s < static_cast<int32_t>(old.tbs[tb].slots.size()) && where[tb][s].tb < 0,
                    "a block merge names a slot twice or one that does not exist");
        where[tb][s] = {static_cast<int32_t>(n), static_cast<int32_t>(i)};
        ++placed;
      }
    size_t slots = 0;
    for (const ThreadBlock& tb : old.tbs) slots += tb.slots.size();
    WEFT_ASSERT(placed == slots, "a block merge leaves out a slot");
    RankPlan& rp = ranks[r];
    rp.rank = old.rank;
    rp.tbs.resize(merge[r].size());
    for (size_t n = 0; n < merge[r].size(); ++n)
      for (size_t i = 0; i < merge[r][n].size(); ++i) {
        const auto [tb, s] = merge[r][n][i];
        const Slot& from = old.tbs[tb].slots[s];
        Slot c = from;
        c.deps.clear();
        // Its own block's earlier slot, which program order covered, must still come first.
        if (s > 0 && where[tb][s - 1].tb == static_cast<int32_t>(n) && where[tb][s - 1].slot >= static_cast<int32_t>(i))
          return false;
        if (s > 0 && where[tb][s - 1].tb != static_cast<int32_t>(n)) c.deps.push_back(where[tb][s - 1]);
        for (const SlotDep& d : from.deps) {
          const SlotDep to = where[d.tb][d.slot];
          if (to.tb == static_cast<int32_t>(n)) {
            if (to.slot >= static_cast<int32_t>(i)) return false;  // it would wait on itself or a later slot
            continue;
          }
          if (std::find(c.deps.begin(), c.deps.end(), to) == c.deps.end()) c.deps.push_back(to);
        }
        std::sort(c.deps.begin(), c.deps.end(),
                  [](const SlotDep& x, const SlotDep& y) { return x.tb != y.tb ? x.tb < y.tb : x.slot < y.slot; });
        rp.tbs[n].slots.push_back(std::move(c));
      }
  }
  plan.ranks = std::move(ranks);
  return true;
}

}  // namespace weft
