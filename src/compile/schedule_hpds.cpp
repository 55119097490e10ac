// HPDS (paper 001 Algorithm 1) and its round-robin baseline, which share the sub-pipeline
// construction and differ only in the order chunks are visited.
#include <algorithm>
#include <queue>
#include <tuple>

#include "compile/schedule.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// Builds sub-pipelines one at a time.
///
/// Per chunk, cand_[c] holds its candidates (ready, unscheduled tasks); its first
/// blocked_[c] entries were found blocked on a busy resource in the current sub-pipeline (a
/// blocked task stays blocked until the sub-pipeline ends, because resources only fill up),
/// the rest are fresh. blocked_ is reset lazily when a chunk is first touched in a new
/// sub-pipeline. active_ lists the chunks that have candidates, sorted by id, so that no
/// sub-pipeline costs more than a pass over them and the candidates it offers.
class SubPipelineBuilder {
 public:
  explicit SubPipelineBuilder(const TaskGraph& g)
      : g_(g), remaining_(g.size()), cand_(g.num_chunks), blocked_(g.num_chunks, 0), blocked_sp_(g.num_chunks, -1),
        in_active_(g.num_chunks, 0), stamp_(g.resources.size(), -1), wanting_(g.resources.size(), 0), conf_(g.size()) {
    for (int32_t t = 0; t < g.size(); ++t)
      conf_[t] = {{g.tasks[t].conflicts[0], g.tasks[t].conflicts[1]}, g.tasks[t].num_conflicts};
    for (int32_t t = 0; t < g.size(); ++t) {
      remaining_[t] = static_cast<int32_t>(g.preds_of(t).size());
      if (remaining_[t] == 0) make_ready(t);
    }
  }

  bool done() const { return scheduled_ == g_.size(); }

  /// Starts sub-pipeline `sp`; returns the chunks with candidates, in ascending id order.
  const std::vector<int32_t>& begin(int32_t sp) {
    sp_ = sp;
    current_.clear();
    free_wanted_ = wanted_;  // every resource is free again
    // Drop chunks that ran out of candidates, merge in those that gained their first.
    size_t keep = 0;
    for (int32_t c : active_) {
      if (!cand_[c].empty()) active_[keep++] = c;
      else in_active_[c] = 0;
    }
    active_.resize(keep);
    if (!joining_.empty()) {
      std::sort(joining_.begin(), joining_.end());
      std::vector<int32_t> merged(active_.size() + joining_.size());
      std::merge(active_.begin(), active_.end(), joining_.begin(), joining_.end(), merged.begin());
      active_.swap(merged);
      joining_.clear();
    }
    return active_;
  }

  /// Offers chunk c's fresh candidates to the current sub-pipeline; returns whether any
  /// joined. Tasks made ready by those that joined become c's fresh candidates for its next
  /// turn (they are not looked at in this call, as Algorithm 1 collects a chunk's ready tasks
  /// before inserting them).
  bool offer(int32_t c) {
    std::vector<int32_t>& list = cand_[c];
    if (blocked_sp_[c] != sp_) {
      blocked_sp_[c] = sp_;
      blocked_[c] = 0;
    }
    const size_t end = list.size();
    size_t keep = blocked_[c];
    bool added = false;
    for (size_t i = blocked_[c]; i < end; ++i) {
      const int32_t t = list[i];
      const Conflicts& task = conf_[t];
      bool free = true;
      for (int32_t k = 0; k < task.num_conflicts; ++k) free = free && stamp_[task.conflicts[k]] != sp_;
      if (!free) {
        list[keep++] = t;
        continue;
      }
      for (int32_t k = 0; k < task.num_conflicts; ++k) {
        int32_t r = task.conflicts[k];
        stamp_[r] = sp_;      // r was free and wanted (by t at least): now it is neither free
        --free_wanted_;
        if (--wanting_[r] == 0) --wanted_;
      }
      if (task.num_conflicts == 0) --local_candidates_;
      current_.push_back(t);
      ++scheduled_;
      added = true;
      for (int32_t s : g_.succs_of(t))
        if (--remaining_[s] == 0) make_ready(s);  // appends to `list` past `end`
    }
    blocked_[c] = static_cast<int32_t>(keep);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(keep), list.begin() + static_cast<std::ptrdiff_t>(end));
    return added;
  }

  /// False when no candidate can join the current sub-pipeline any more: every resource that
  /// some candidate needs is taken, and no candidate is local (needs none).
  bool may_join() const { return free_wanted_ > 0 || local_candidates_ > 0; }

  /// Whether chunk c has candidates it has not offered in this sub-pipeline.
  bool has_fresh(int32_t c) const {
    return static_cast<int32_t>(cand_[c].size()) > (blocked_sp_[c] == sp_ ? blocked_[c] : 0);
  }

  /// Ends the sub-pipeline and returns its tasks in the order they joined.
  std::vector<int32_t> finish() {
    WEFT_ASSERT(!current_.empty(), "a sub-pipeline stayed empty: the task graph has a cycle");
    return std::move(current_);
  }

 private:
  void make_ready(int32_t t) {
    const Task& task = g_.tasks[t];
    for (int32_t k = 0; k < task.num_conflicts; ++k) {
      int32_t r = task.conflicts[k];
      if (wanting_[r]++ == 0) {
        ++wanted_;
        if (stamp_[r] != sp_) ++free_wanted_;
      }
    }
    if (task.num_conflicts == 0) ++local_candidates_;
    int32_t c = task.chunk;
    cand_[c].push_back(t);
    if (!in_active_[c]) {
      in_active_[c] = 1;
      joining_.push_back(c);
    }
  }

  /// A task's conflict resources, packed (the scan touches nothing else of the task).
  struct Conflicts {
    int32_t conflicts[2];
    int32_t num_conflicts;
  };

  const TaskGraph& g_;
  std::vector<int32_t> remaining_;
  std::vector<std::vector<int32_t>> cand_;
  std::vector<int32_t> blocked_, blocked_sp_;
  std::vector<int32_t> active_, joining_;
  std::vector<uint8_t> in_active_;
  std::vector<int32_t> stamp_;    // resource -> last sub-pipeline that used it
  std::vector<int32_t> wanting_;  // resource -> candidates that need it
  int64_t wanted_ = 0;            // resources some candidate needs
  int64_t free_wanted_ = 0;       // of those, the ones still free in this sub-pipeline
  int64_t local_candidates_ = 0;  // candidates that need no resource
  std::vector<Conflicts> conf_;
  std::vector<int32_t> current_;
  int32_t sp_ = -1;
  int32_t scheduled_ = 0;
};

}  // namespace

/// HPDS with the pipelined execution's priority (graphs up to kEarliestStartLimit tasks).
/// Task-level execution runs every slot over all micro-batches and a task may start as soon
/// as its predecessors have delivered their first micro-batch, so a task's earliest start
/// grows with its dependency depth; a block or a link runs its tasks in pipeline order, so
/// a task placed ahead of one that could start earlier makes the latter (and its whole
/// chain) wait behind it (the simulator shows it: on HM AllReduce over 2 servers, the NIC
/// receive of an inter-node reduce queued behind local reductions). So candidates are taken
/// by (depth, longest remaining chain first, times the chunk was scheduled, chunk, id): the
/// least-scheduled rule of Algorithm 1 breaks ties among tasks that can start together.
/// Sub-pipelines are built as Algorithm 1 builds them: a task joins when its predecessors
/// are placed and its conflict resources are free; tasks it makes ready are offered in the
/// same sub-pipeline.
Pipeline schedule_hpds_earliest_start(const TaskGraph& g) {
  const int32_t n = g.size();
  std::vector<int32_t> depth(n, 0), rdepth(n, 0), remaining(n), stamp(g.resources.size(), -1);
  for (int32_t t = 0; t < n; ++t)
    for (int32_t q : g.preds_of(t)) depth[t] = std::max(depth[t], depth[q] + 1);
  for (int32_t t = n - 1; t >= 0; --t)
    for (int32_t q : g.succs_of(t)) rdepth[t] = std::max(rdepth[t], rdepth[q] + 1);
  std::vector<int32_t> times(g.num_chunks, 0), cand, next;
  for (int32_t t = 0; t < n; ++t) {
    remaining[t] = static_cast<int32_t>(g.preds_of(t).size());
    if (remaining[t] == 0) cand.push_back(t);
  }
  auto key = [&](int32_t t) {
    const int32_t c = g.tasks[t].chunk;
    return std::tuple(depth[t], -rdepth[t], times[c], c, t);
  };
  Pipeline p;
  p.scheduler = "hpds";
  int32_t placed = 0;
  while (placed < n) {
    const int32_t sp = static_cast<int32_t>(p.subpipelines.size());
    std::vector<int32_t> current;
    for (bool grew = true; grew;) {
      grew = false;
      std::sort(cand.begin(), cand.end(), [&](int32_t a, int32_t b) { return key(a) < key(b); });
      next.clear();
      for (int32_t t : cand) {
        const Task& task = g.tasks[t];
        bool free = true;
        for (int32_t i = 0; i < task.num_conflicts; ++i) free = free && stamp[task.conflicts[i]] != sp;
        if (!free) {
          next.push_back(t);
          continue;
        }
        for (int32_t i = 0; i < task.num_conflicts; ++i) stamp[task.conflicts[i]] = sp;
        current.push_back(t);
        ++placed;
        ++times[task.chunk];
        for (int32_t s : g.succs_of(t))
          if (--remaining[s] == 0) {
            next.push_back(s);
            grew = true;
          }
      }
      cand.swap(next);
    }
    WEFT_ASSERT(!current.empty(), "a sub-pipeline stayed empty: the task graph has a cycle");
    p.subpipelines.push_back(std::move(current));
  }
  return p;
}

Pipeline schedule_hpds(const TaskGraph& g) {
  if (g.size() <= kEarliestStartLimit) return schedule_hpds_earliest_start(g);
  return schedule_hpds_least_scheduled(g);
}

Pipeline schedule_hpds_least_scheduled(const TaskGraph& g) {
  Pipeline p;
  p.scheduler = "hpds";
  SubPipelineBuilder b(g);
  std::vector<int32_t> times(g.num_chunks, 0);  // how often each chunk has been scheduled
  std::vector<int32_t> order, count_of;
  using Entry = std::pair<int32_t, int32_t>;  // (times scheduled, chunk): least first
  while (!b.done()) {
    const std::vector<int32_t>& active = b.begin(static_cast<int32_t>(p.subpipelines.size()));
    // The chunks by (times scheduled, id): a stable counting sort of the id-sorted list.
    int32_t most = 0;
    for (int32_t c : active) most = std::max(most, times[c]);
    count_of.assign(static_cast<size_t>(most) + 2, 0);
    for (int32_t c : active) ++count_of[times[c] + 1];
    for (int32_t k = 0; k <= most; ++k) count_of[k + 1] += count_of[k];
    order.resize(active.size());
    for (int32_t c : active) order[count_of[times[c]]++] = c;
    // Walk that order; a chunk served again in this sub-pipeline waits in `again` for its
    // turn under its new count.
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> again;
    size_t i = 0;
    while ((i < order.size() || !again.empty()) && b.may_join()) {
      int32_t c;
      if (!again.empty() && (i == order.size() || again.top() < Entry{times[order[i]], order[i]})) {
        c = again.top().second;
        again.pop();
      } else {
        c = order[i++];
      }
      if (!b.has_fresh(c)) continue;  // its flag is false until the next sub-pipeline
      if (b.offer(c)) {
        ++times[c];
        if (b.has_fresh(c)) again.push({times[c], c});
      }
    }
    p.subpipelines.push_back(b.finish());
  }
  return p;
}

Pipeline schedule_rr(const TaskGraph& g) {
  Pipeline p;
  p.scheduler = "rr";
  SubPipelineBuilder b(g);
  int32_t cursor = 0;  // the circular queue's head: the chunk after the last one served
  std::vector<int32_t> round, next;
  while (!b.done()) {
    const std::vector<int32_t>& active = b.begin(static_cast<int32_t>(p.subpipelines.size()));
    round.assign(active.begin(), active.end());
    while (!round.empty() && b.may_join()) {
      auto start = std::lower_bound(round.begin(), round.end(), cursor);
      std::rotate(round.begin(), start, round.end());
      next.clear();
      for (int32_t c : round)
        if (b.has_fresh(c) && b.offer(c)) {
          cursor = c + 1;
          if (b.has_fresh(c)) next.push_back(c);
        }
      std::sort(next.begin(), next.end());
      round.swap(next);
    }
    if (cursor >= g.num_chunks) cursor = 0;
    p.subpipelines.push_back(b.finish());
  }
  return p;
}

}  // namespace weft
