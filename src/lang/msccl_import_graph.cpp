#include "lang/msccl_import_graph.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "util/error.hpp"

namespace weft::msccl_detail {

namespace {

std::string step_name(const MscclStep& st) { return "'" + std::string(msccl_step_type_name(st.type)) + "'"; }

}  // namespace

StepGraph::StepGraph(const xml::Document& doc, const MscclProgram& program) : doc_(doc) {
  first_.resize(program.gpus.size());
  for (const MscclGpu& g : program.gpus) {
    for (const MscclThreadBlock& tb : g.tbs) {
      first_[static_cast<size_t>(g.id)].push_back(static_cast<int32_t>(nodes_.size()));
      for (size_t s = 0; s < tb.steps.size(); ++s)
        nodes_.push_back({g.id, tb.id, static_cast<int32_t>(s), &tb.steps[s]});
    }
  }
  preds_.resize(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n)
    if (nodes_[n].pos > 0) preds_[n].push_back(static_cast<int32_t>(n) - 1);
  match_connections(program);
  resolve_dependencies(program);
  order_or_fail();
  seen_.assign(nodes_.size(), 0);
}

std::string StepGraph::describe(int32_t node) const {
  const StepNode& n = nodes_[static_cast<size_t>(node)];
  std::string s = "gpu " + std::to_string(n.rank) + ", thread block " + std::to_string(n.tb) + ", step " + std::to_string(n.pos);
  if (n.step->elem) s += " (line " + std::to_string(n.step->elem->pos.line) + ")";
  return s;
}

void StepGraph::match_connections(const MscclProgram& program) {
  // (sender, receiver, channel) -> (sending thread block on sender, receiving one on receiver)
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::pair<int32_t, int32_t>> conns;
  for (const MscclGpu& g : program.gpus) {
    for (const MscclThreadBlock& tb : g.tbs) {
      if (tb.send >= 0) conns.try_emplace({g.id, tb.send, tb.chan}, -1, -1).first->second.first = tb.id;
      if (tb.recv >= 0) conns.try_emplace({tb.recv, g.id, tb.chan}, -1, -1).first->second.second = tb.id;
    }
  }
  for (const auto& [key, ends] : conns) {
    auto [from, to, chan] = key;
    std::vector<int32_t> sends, recvs;
    if (ends.first >= 0) {
      const MscclThreadBlock& tb = program.gpus[static_cast<size_t>(from)].tbs[static_cast<size_t>(ends.first)];
      for (size_t s = 0; s < tb.steps.size(); ++s)
        if (msccl_step_sends(tb.steps[s].type)) sends.push_back(node_id(from, tb.id, static_cast<int32_t>(s)));
    }
    if (ends.second >= 0) {
      const MscclThreadBlock& tb = program.gpus[static_cast<size_t>(to)].tbs[static_cast<size_t>(ends.second)];
      for (size_t s = 0; s < tb.steps.size(); ++s)
        if (msccl_step_receives(tb.steps[s].type)) recvs.push_back(node_id(to, tb.id, static_cast<int32_t>(s)));
    }
    std::string conn = "gpu " + std::to_string(from) + " to gpu " + std::to_string(to) + " on channel " + std::to_string(chan);
    size_t common = std::min(sends.size(), recvs.size());
    if (sends.size() > common) {
      const StepNode& n = nodes_[static_cast<size_t>(sends[common])];
      std::string why = ends.second < 0 ? "no thread block of gpu " + std::to_string(to) + " receives on that connection"
                                        : "gpu " + std::to_string(to) + " receives only " + std::to_string(common) +
                                              " times on it (thread block " + std::to_string(ends.second) + ")";
      fail_at_attribute(doc_, n.step->elem, "type",
                   "this " + step_name(*n.step) + " step is send number " + std::to_string(common + 1) + " from " + conn +
                       ", but " + why);
    }
    if (recvs.size() > common) {
      const StepNode& n = nodes_[static_cast<size_t>(recvs[common])];
      std::string why = ends.first < 0 ? "no thread block of gpu " + std::to_string(from) + " sends on that connection"
                                       : "gpu " + std::to_string(from) + " sends only " + std::to_string(common) +
                                             " times on it (thread block " + std::to_string(ends.first) + ")";
      fail_at_attribute(doc_, n.step->elem, "type",
                   "this " + step_name(*n.step) + " step is receive number " + std::to_string(common + 1) + " from " + conn +
                       ", but " + why);
    }
    for (size_t k = 0; k < common; ++k) {
      StepNode& s = nodes_[static_cast<size_t>(sends[k])];
      StepNode& r = nodes_[static_cast<size_t>(recvs[k])];
      if (s.step->cnt != r.step->cnt)
        fail_at_attribute(doc_, r.step->elem, "cnt",
                     "this step receives cnt=" + std::to_string(r.step->cnt) + " chunks, but the send it meets (" +
                         describe(sends[k]) + ") sends cnt=" + std::to_string(s.step->cnt));
      s.received_by = recvs[k];
      r.sent_by = sends[k];
      preds_[static_cast<size_t>(recvs[k])].push_back(sends[k]);
    }
  }
}

void StepGraph::resolve_dependencies(const MscclProgram& program) {
  for (size_t n = 0; n < nodes_.size(); ++n) {
    StepNode& node = nodes_[n];
    const MscclStep& st = *node.step;
    if (st.depid < 0) continue;
    const MscclThreadBlock& dep_tb = program.gpus[static_cast<size_t>(node.rank)].tbs[static_cast<size_t>(st.depid)];
    int32_t target = -1;
    for (size_t s = static_cast<size_t>(st.deps); s < dep_tb.steps.size(); ++s) {
      if (dep_tb.steps[s].hasdep && dep_tb.steps[s].type != MscclStepType::Nop) {
        target = node_id(node.rank, st.depid, static_cast<int32_t>(s));
        break;
      }
    }
    if (target < 0)
      fail_at_attribute(doc_, st.elem, "deps",
                   "this step waits for step " + std::to_string(st.deps) + " of thread block " + std::to_string(st.depid) +
                       ", but neither that step nor a later one of that thread block signals (hasdep=1 on a step that is "
                       "not a nop), so the wait would never end");
    node.dep = target;
    preds_[n].push_back(target);
  }
}

void StepGraph::order_or_fail() {
  size_t n = nodes_.size();
  std::vector<std::vector<int32_t>> succs(n);
  std::vector<int32_t> indegree(n, 0);
  for (size_t v = 0; v < n; ++v) {
    for (int32_t p : preds_[v]) succs[static_cast<size_t>(p)].push_back(static_cast<int32_t>(v));
    indegree[v] = static_cast<int32_t>(preds_[v].size());
  }
  order_.assign(n, -1);
  std::deque<int32_t> ready;
  for (size_t v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push_back(static_cast<int32_t>(v));
  int32_t next = 0;
  while (!ready.empty()) {
    int32_t v = ready.front();
    ready.pop_front();
    order_[static_cast<size_t>(v)] = next++;
    for (int32_t s : succs[static_cast<size_t>(v)])
      if (--indegree[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
  if (static_cast<size_t>(next) == n) return;

  // A cycle: walk back from any unordered node along unordered predecessors until a node repeats.
  int32_t v = 0;
  while (order_[static_cast<size_t>(v)] >= 0) ++v;
  std::vector<int32_t> path;
  std::vector<int32_t> at(n, -1);
  while (at[static_cast<size_t>(v)] < 0) {
    at[static_cast<size_t>(v)] = static_cast<int32_t>(path.size());
    path.push_back(v);
    // An unordered node still had an unordered predecessor when the ordering stopped.
    auto it = std::find_if(preds_[static_cast<size_t>(v)].begin(), preds_[static_cast<size_t>(v)].end(),
                           [&](int32_t p) { return order_[static_cast<size_t>(p)] < 0; });
    WEFT_ASSERT(it != preds_[static_cast<size_t>(v)].end(), "an unordered step has no unordered predecessor");
    v = *it;
  }
  std::vector<int32_t> cycle(path.begin() + at[static_cast<size_t>(v)], path.end());
  std::string msg = "these steps wait for each other in a cycle, so MSCCL would hang: ";
  for (size_t k = 0; k < cycle.size() && k < 8; ++k) {
    int32_t a = cycle[k], b = cycle[(k + 1) % cycle.size()];
    const StepNode& na = nodes_[static_cast<size_t>(a)];
    std::string why = na.sent_by == b ? "receives the send of" : na.dep == b ? "waits (depid/deps) for" : "comes after";
    msg += (k ? "; " : "") + describe(a) + " " + why + " " + describe(b);
  }
  if (cycle.size() > 8) msg += "; ... (" + std::to_string(cycle.size()) + " steps in all)";
  fail_at_attribute(doc_, nodes_[static_cast<size_t>(cycle[0])].step->elem, "", msg);
}

bool StepGraph::happens_before(int32_t a, int32_t b) const {
  if (a == b) return true;
  const StepNode& na = nodes_[static_cast<size_t>(a)];
  const StepNode& nb = nodes_[static_cast<size_t>(b)];
  if (na.rank == nb.rank && na.tb == nb.tb) return na.pos < nb.pos;
  int32_t oa = order_[static_cast<size_t>(a)];
  if (oa > order_[static_cast<size_t>(b)]) return false;
  if (budget_ <= 0) return true;
  if (++stamp_ == 0) {  // stamps wrapped: start afresh
    std::fill(seen_.begin(), seen_.end(), 0);
    stamp_ = 1;
  }
  std::vector<int32_t> stack{b};
  seen_[static_cast<size_t>(b)] = stamp_;
  while (!stack.empty()) {
    int32_t v = stack.back();
    stack.pop_back();
    if (--budget_ <= 0) return true;
    for (int32_t p : preds_[static_cast<size_t>(v)]) {
      if (p == a) return true;
      if (seen_[static_cast<size_t>(p)] == stamp_ || order_[static_cast<size_t>(p)] < oa) continue;
      // A step of a's thread block after a reaches a along program order.
      const StepNode& np = nodes_[static_cast<size_t>(p)];
      if (np.rank == na.rank && np.tb == na.tb && np.pos > na.pos) return true;
      seen_[static_cast<size_t>(p)] = stamp_;
      stack.push_back(p);
    }
  }
  return false;
}

}  // namespace weft::msccl_detail
