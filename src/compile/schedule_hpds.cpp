// HPDS (paper 001 Algorithm 1) and its round-robin baseline, which share the sub-pipeline
// construction and differ only in the order chunks are visited.
#include <algorithm>
#include <queue>

#include "compile/schedule.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// Builds sub-pipelines one at a time. Per chunk it keeps the ready tasks not yet looked at in
/// this sub-pipeline (`fresh_`) and those found blocked on a busy resource (`blocked_`); a
/// blocked task stays blocked until the sub-pipeline ends, because resources only fill up.
class SubPipelineBuilder {
 public:
  explicit SubPipelineBuilder(const TaskGraph& g)
      : g_(g), remaining_(g.size()), fresh_(g.num_chunks), blocked_(g.num_chunks), pending_flag_(g.num_chunks, 0),
        stamp_(g.resources.size(), -1) {
    for (int32_t t = 0; t < g.size(); ++t) {
      remaining_[t] = static_cast<int32_t>(g.preds_of(t).size());
      if (remaining_[t] == 0) make_ready(t);
    }
  }

  bool done() const { return scheduled_ == g_.size(); }

  /// Starts sub-pipeline `sp`: every blocked task becomes a candidate again. Returns the
  /// chunks with candidates, in ascending id order.
  std::vector<int32_t> begin(int32_t sp) {
    sp_ = sp;
    current_.clear();
    std::sort(pending_.begin(), pending_.end());
    std::vector<int32_t> chunks;
    for (int32_t c : pending_) {
      pending_flag_[c] = 0;
      if (!blocked_[c].empty()) {
        fresh_[c].insert(fresh_[c].end(), blocked_[c].begin(), blocked_[c].end());
        blocked_[c].clear();
      }
      if (!fresh_[c].empty()) chunks.push_back(c);
    }
    pending_.clear();
    return chunks;
  }

  /// Offers chunk c's candidates to the current sub-pipeline; returns whether any joined.
  /// Tasks made ready by those that joined become c's candidates for its next turn.
  bool offer(int32_t c) {
    std::vector<int32_t> list;
    list.swap(fresh_[c]);
    bool added = false;
    for (int32_t t : list) {
      const Task& task = g_.tasks[t];
      bool free = true;
      for (int32_t i = 0; i < task.num_conflicts; ++i) free = free && stamp_[task.conflicts[i]] != sp_;
      if (!free) {
        blocked_[c].push_back(t);
        continue;
      }
      for (int32_t i = 0; i < task.num_conflicts; ++i) stamp_[task.conflicts[i]] = sp_;
      current_.push_back(t);
      ++scheduled_;
      added = true;
      for (int32_t s : g_.succs_of(t))
        if (--remaining_[s] == 0) make_ready(s);
    }
    if (!blocked_[c].empty()) mark_pending(c);
    return added;
  }

  bool has_candidates(int32_t c) const { return !fresh_[c].empty(); }

  /// Ends the sub-pipeline and returns its tasks in the order they joined.
  std::vector<int32_t> finish() {
    WEFT_ASSERT(!current_.empty(), "a sub-pipeline stayed empty: the task graph has a cycle");
    return std::move(current_);
  }

 private:
  void make_ready(int32_t t) {
    int32_t c = g_.tasks[t].chunk;
    fresh_[c].push_back(t);
    mark_pending(c);
  }
  void mark_pending(int32_t c) {
    if (!pending_flag_[c]) {
      pending_flag_[c] = 1;
      pending_.push_back(c);
    }
  }

  const TaskGraph& g_;
  std::vector<int32_t> remaining_;
  std::vector<std::vector<int32_t>> fresh_, blocked_;
  std::vector<int32_t> pending_;  // chunks that may have candidates at the next begin()
  std::vector<uint8_t> pending_flag_;
  std::vector<int32_t> stamp_;    // resource -> last sub-pipeline that used it
  std::vector<int32_t> current_;
  int32_t sp_ = -1;
  int32_t scheduled_ = 0;
};

}  // namespace

Pipeline schedule_hpds(const TaskGraph& g) {
  Pipeline p;
  p.scheduler = "hpds";
  SubPipelineBuilder b(g);
  std::vector<int32_t> times(g.num_chunks, 0);  // how often each chunk has been scheduled
  using Entry = std::pair<int32_t, int32_t>;   // (times scheduled, chunk): least first
  while (!b.done()) {
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> q;
    for (int32_t c : b.begin(static_cast<int32_t>(p.subpipelines.size()))) q.push({times[c], c});
    while (!q.empty()) {
      int32_t c = q.top().second;
      q.pop();
      if (b.offer(c)) {
        ++times[c];
        if (b.has_candidates(c)) q.push({times[c], c});
      }  // else: the chunk's flag is false until the next sub-pipeline
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
  while (!b.done()) {
    std::vector<int32_t> round = b.begin(static_cast<int32_t>(p.subpipelines.size()));
    while (!round.empty()) {
      auto start = std::lower_bound(round.begin(), round.end(), cursor);
      std::rotate(round.begin(), start, round.end());
      std::vector<int32_t> next;
      for (int32_t c : round)
        if (b.offer(c)) {
          cursor = c + 1;
          if (b.has_candidates(c)) next.push_back(c);
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
