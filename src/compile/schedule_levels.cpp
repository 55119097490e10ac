// The baselines that order tasks by a level (step, stage, dependency depth), the scheduler
// registry, and the pipeline checks.
#include <algorithm>
#include <numeric>

#include "compile/schedule.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

/// Groups tasks by a level that never decreases along an edge; within a level, by `order`.
Pipeline group_by(const TaskGraph& g, const char* name, const std::vector<int32_t>& level,
                  const std::vector<int32_t>& order) {
  Pipeline p;
  p.scheduler = name;
  int32_t prev = INT32_MIN;
  for (int32_t t : order) {
    if (p.subpipelines.empty() || level[t] != prev) p.subpipelines.emplace_back();
    p.subpipelines.back().push_back(t);
    prev = level[t];
  }
  (void)g;
  return p;
}

std::vector<int32_t> identity(int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

}  // namespace

Pipeline schedule_algo(const TaskGraph& g) {
  // Tasks are numbered in step order, so the identity order is grouped by step already.
  std::vector<int32_t> step(g.size());
  for (int32_t t = 0; t < g.size(); ++t) step[t] = g.tasks[t].transfer.step;
  return group_by(g, "algo", step, identity(g.size()));
}

Pipeline schedule_stage(const TaskGraph& g) {
  std::vector<int32_t> stage(g.size());
  for (int32_t t = 0; t < g.size(); ++t) stage[t] = g.tasks[t].stage;
  return group_by(g, "stage", stage, identity(g.size()));
}

Pipeline schedule_gc3(const TaskGraph& g) {
  const int32_t n = g.size();
  // Task ids are a topological order (edges always point to a larger id).
  std::vector<int32_t> depth(n, 0), rdepth(n, 0);
  for (int32_t t = 0; t < n; ++t)
    for (int32_t p : g.preds_of(t)) depth[t] = std::max(depth[t], depth[p] + 1);
  for (int32_t t = n - 1; t >= 0; --t)
    for (int32_t s : g.succs_of(t)) rdepth[t] = std::max(rdepth[t], rdepth[s] + 1);
  std::vector<int32_t> order = identity(n);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    if (depth[a] != depth[b]) return depth[a] < depth[b];
    if (rdepth[a] != rdepth[b]) return rdepth[a] > rdepth[b];
    return a < b;
  });
  return group_by(g, "gc3", depth, order);
}

const std::vector<std::string_view>& scheduler_names() {
  static const std::vector<std::string_view> names = {"hpds", "algo", "stage", "rr", "gc3"};
  return names;
}

Pipeline schedule(const TaskGraph& g, std::string_view name) {
  if (name == "hpds") return schedule_hpds(g);
  if (name == "algo") return schedule_algo(g);
  if (name == "stage") return schedule_stage(g);
  if (name == "rr") return schedule_rr(g);
  if (name == "gc3") return schedule_gc3(g);
  fail(ErrorCode::InvalidArgument,
       "unknown scheduler '" + std::string(name) + "' (known: hpds, algo, stage, rr, gc3)");
}

std::vector<int32_t> pipeline_order(const TaskGraph& g, const Pipeline& p) {
  std::vector<int32_t> order(g.size(), -1);
  int32_t pos = 0;
  for (const auto& sp : p.subpipelines)
    for (int32_t t : sp) {
      WEFT_ASSERT(t >= 0 && t < g.size(), "pipeline names a task that does not exist");
      order[t] = pos++;
    }
  return order;
}

std::vector<int32_t> pipeline_subpipeline_of(const TaskGraph& g, const Pipeline& p) {
  std::vector<int32_t> of(g.size(), -1);
  for (size_t i = 0; i < p.subpipelines.size(); ++i)
    for (int32_t t : p.subpipelines[i]) of[t] = static_cast<int32_t>(i);
  return of;
}

void check_pipeline(const TaskGraph& g, const Pipeline& p) {
  std::vector<int32_t> seen(g.size(), 0);
  size_t total = 0;
  for (const auto& sp : p.subpipelines)
    for (int32_t t : sp) {
      if (t < 0 || t >= g.size() || seen[t]++)
        fail(ErrorCode::Internal, text::format("scheduler %s placed task %d twice or out of range", p.scheduler.c_str(), t));
      ++total;
    }
  if (total != static_cast<size_t>(g.size()))
    fail(ErrorCode::Internal, text::format("scheduler %s placed %zu of %d tasks", p.scheduler.c_str(), total, g.size()));
  std::vector<int32_t> order = pipeline_order(g, p);
  for (const TaskEdge& e : g.edges)
    if (order[e.from] >= order[e.to])
      fail(ErrorCode::Internal, text::format("scheduler %s placed task %d before its predecessor %d", p.scheduler.c_str(),
                                             e.to, e.from));
}

}  // namespace weft
