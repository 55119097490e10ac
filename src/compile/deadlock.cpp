#include "compile/deadlock.hpp"

#include <algorithm>
#include <numeric>

#include "compile/union_find.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

/// Runs the plan abstractly: a merged node fires when each of its slots is at the head of its
/// thread block and every slot it depends on has fired. Returns whether every slot fired.
/// A node blocked on a dependency waits on that slot's watch list.
/// A dependency on a member of the node's own merged node is not waited on here: it orders
/// the members within each micro-batch, which check_within_nodes() checks.
///
/// Firing a node whole is stricter than the runtime, where a dependency asks only for the
/// same micro-batch: two nodes whose members are all at their heads and that depend on each
/// other (a cycle of whole-slot waits) still run, micro-batch by micro-batch, when the edges
/// of one micro-batch across both are acyclic. So when the work runs out, fire_groups() looks
/// at the nodes whose members are all at their heads, takes the strongly connected groups of
/// their waits on each other, and fires every group that waits only on fired slots or on
/// groups it fires, and whose one-micro-batch edges (each message's send before its receive,
/// dependencies among the group's slots) are acyclic. Plans that never stall pay nothing.
class Simulation {
 public:
  Simulation(const PlanIndex& ix, const std::vector<int32_t>& next, const std::vector<int32_t>& root,
             const std::vector<int32_t>& send_of)
      : ix_(ix), next_(next), root_(root), send_of_(send_of), n_(ix.size()), tbs_(static_cast<int32_t>(ix.num_tbs())),
        pc_(ix.tb_base.begin(), ix.tb_base.end() - 1), done_(n_, 0), watch_head_(n_, -1) {
    for (int32_t t = 0; t < tbs_; ++t)
      if (ix.tb_base[t] < ix.tb_base[t + 1]) work_.push_back(static_cast<int32_t>(ix.tb_base[t]));
  }

  bool run() {
    for (;;) {
      while (!work_.empty()) {
        const int32_t u = work_.back();
        work_.pop_back();
        if (!done_[u] && ready_or_watch(u)) fire(u);
      }
      if (fired_ == n_) return true;
      if (!fire_groups()) return false;
    }
  }

 private:
  /// Ready? Every member at its thread block's head, every dependency fired. If not, u
  /// waits: on the first unfired dependency's watch list, or until that thread block
  /// reaches the member.
  bool ready_or_watch(int32_t u) {
    int32_t m = u;
    do {
      if (pc_[ix_.tb_of[m]] != m) return false;  // re-checked when that thread block reaches m
      const int32_t r = ix_.rank(m);
      for (const SlotDep& d : ix_.slot(m).deps) {
        const int32_t dep = ix_.id(r, d.tb, d.slot);
        if (root_[dep] == root_[m]) continue;
        if (!done_[dep]) {
          pool_node_.push_back(u);
          pool_next_.push_back(watch_head_[dep]);
          watch_head_[dep] = static_cast<int32_t>(pool_node_.size()) - 1;
          return false;
        }
      }
      m = next_[m];
    } while (m != u);
    return true;
  }

  void fire(int32_t u) {
    int32_t m = u;
    do {
      done_[m] = 1;
      ++fired_;
      const int32_t t = ix_.tb_of[m];
      ++pc_[t];
      if (pc_[t] < ix_.tb_base[t + 1]) work_.push_back(static_cast<int32_t>(pc_[t]));
      for (int32_t w = watch_head_[m]; w >= 0; w = pool_next_[w]) work_.push_back(pool_node_[w]);
      watch_head_[m] = -1;
      m = next_[m];
    } while (m != u);
  }

  /// Nodes whose members are all at their heads (each listed once, by root; act_of_ set).
  std::vector<int32_t> active_nodes() {
    std::vector<int32_t> act;
    for (int32_t t = 0; t < tbs_; ++t) {
      if (pc_[t] >= ix_.tb_base[t + 1]) continue;
      const int32_t h = static_cast<int32_t>(pc_[t]);
      if (act_of_[root_[h]] >= 0) continue;
      bool heads = true;
      int32_t m = h;
      do {
        if (pc_[ix_.tb_of[m]] != m) heads = false;
        m = next_[m];
      } while (heads && m != h);
      if (!heads) continue;
      act_of_[root_[h]] = static_cast<int32_t>(act.size());
      act.push_back(h);
    }
    return act;
  }

  /// Waits between the active nodes; a wait on a slot neither fired nor in an active node
  /// blocks.
  void active_waits(const std::vector<int32_t>& act, std::vector<std::vector<int32_t>>* waits,
                    std::vector<uint8_t>* blocked) const {
    const int32_t A = static_cast<int32_t>(act.size());
    waits->assign(A, {});
    blocked->assign(A, 0);
    for (int32_t a = 0; a < A; ++a) {
      int32_t m = act[a];
      do {
        const int32_t r = ix_.rank(m);
        for (const SlotDep& d : ix_.slot(m).deps) {
          const int32_t dep = ix_.id(r, d.tb, d.slot);
          if (root_[dep] == root_[m] || done_[dep]) continue;
          if (act_of_[root_[dep]] >= 0) (*waits)[a].push_back(act_of_[root_[dep]]);  // members of active nodes are at heads
          else (*blocked)[a] = 1;
        }
        m = next_[m];
      } while (m != act[a]);
    }
  }

  /// One micro-batch across the group of active nodes `members`: sends before receives,
  /// dependencies among its slots (the group's nodes are each acyclic already). True when
  /// those edges are acyclic.
  bool group_acyclic(const std::vector<int32_t>& act, const std::vector<int32_t>& members) {
    std::vector<int32_t> slots;
    for (int32_t a : members) {
      int32_t m = act[a];
      do {
        loc_[m] = static_cast<int32_t>(slots.size());
        slots.push_back(m);
        m = next_[m];
      } while (m != act[a]);
    }
    const int32_t S = static_cast<int32_t>(slots.size());
    std::vector<std::vector<int32_t>> succ(S);
    std::vector<int32_t> indeg(S, 0);
    for (int32_t i = 0; i < S; ++i) {
      const int32_t id = slots[i];
      if (send_of_[id] >= 0 && loc_[send_of_[id]] >= 0) succ[loc_[send_of_[id]]].push_back(i), ++indeg[i];
      const int32_t r = ix_.rank(id);
      for (const SlotDep& d : ix_.slot(id).deps) {
        const int32_t dep = ix_.id(r, d.tb, d.slot);
        if (loc_[dep] >= 0) succ[loc_[dep]].push_back(i), ++indeg[i];
      }
    }
    std::vector<int32_t> ready;
    for (int32_t i = 0; i < S; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    int32_t seen = 0;
    while (!ready.empty()) {
      const int32_t i = ready.back();
      ready.pop_back();
      ++seen;
      for (int32_t j : succ[i])
        if (--indeg[j] == 0) ready.push_back(j);
    }
    for (int32_t id : slots) loc_[id] = -1;
    return seen == S;
  }

  /// See simulate(): fires the groups of active nodes that may run micro-batch by
  /// micro-batch; true if any fired.
  bool fire_groups() {
    if (act_of_.empty()) act_of_.assign(n_, -1), loc_.assign(n_, -1);
    const std::vector<int32_t> act = active_nodes();
    const int32_t A = static_cast<int32_t>(act.size());
    std::vector<std::vector<int32_t>> waits;
    std::vector<uint8_t> blocked;
    active_waits(act, &waits, &blocked);
    // Tarjan's strongly connected components, iteratively; a component is complete only
    // after every component it waits on, so each is decided after those.
    std::vector<int32_t> index(A, -1), low(A, 0), comp(A, -1), stack;
    std::vector<uint8_t> on_stack(A, 0), comp_ok;
    std::vector<std::pair<int32_t, size_t>> call;
    int32_t counter = 0;
    std::vector<int32_t> to_fire;
    for (int32_t s0 = 0; s0 < A; ++s0) {
      if (index[s0] >= 0) continue;
      call.push_back({s0, 0});
      index[s0] = low[s0] = counter++;
      stack.push_back(s0);
      on_stack[s0] = 1;
      while (!call.empty()) {
        auto& [v, i] = call.back();
        if (i < waits[v].size()) {
          const int32_t w = waits[v][i++];
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stack.push_back(w);
            on_stack[w] = 1;
            call.push_back({w, 0});
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        const int32_t vv = v;
        call.pop_back();
        if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[vv]);
        if (low[vv] != index[vv]) continue;
        // Pop the component of vv and decide it.
        const int32_t c = static_cast<int32_t>(comp_ok.size());
        std::vector<int32_t> members;
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = c;
          members.push_back(w);
        } while (w != vv);
        bool ok = true;
        for (int32_t a : members) {
          if (blocked[a]) ok = false;
          for (int32_t b : waits[a])
            if (comp[b] != c && !comp_ok[static_cast<size_t>(comp[b])]) ok = false;
        }
        if (ok && members.size() > 1) ok = group_acyclic(act, members);
        comp_ok.push_back(ok ? 1 : 0);
        if (ok)
          for (int32_t a : members) to_fire.push_back(act[a]);
      }
    }
    for (int32_t h : act) act_of_[root_[h]] = -1;
    for (int32_t h : to_fire) fire(h);
    return !to_fire.empty();
  }

  const PlanIndex& ix_;
  const std::vector<int32_t>& next_;
  const std::vector<int32_t>& root_;
  const std::vector<int32_t>& send_of_;
  const int32_t n_;
  const int32_t tbs_;
  std::vector<int64_t> pc_;  ///< next slot id of each thread block
  std::vector<uint8_t> done_;
  std::vector<int32_t> watch_head_;
  std::vector<int32_t> pool_node_, pool_next_;
  std::vector<int32_t> work_;
  int64_t fired_ = 0;
  /// Scratch for fire_groups, sized on its first call (plans that never stall skip it):
  /// index of an active node by its root, of a slot in the group under test.
  std::vector<int32_t> act_of_, loc_;
};

bool simulate(const PlanIndex& ix, const std::vector<int32_t>& next, const std::vector<int32_t>& root,
              const std::vector<int32_t>& send_of) {
  return Simulation(ix, next, root, send_of).run();
}

/// After a failed simulation: the graph of merged nodes (program order, dependencies) has a
/// cycle; find one and describe it.
void find_cycle(const PlanIndex& ix, const std::vector<int32_t>& root, DeadlockReport& report) {
  const int32_t n = ix.size();
  std::vector<int32_t> dep_offsets(n + 1, 0), dependents;
  for (int32_t id = 0; id < n; ++id)
    for (const SlotDep& d : ix.slot(id).deps) ++dep_offsets[ix.id(ix.rank(id), d.tb, d.slot) + 1];
  for (int32_t i = 0; i < n; ++i) dep_offsets[i + 1] += dep_offsets[i];
  dependents.resize(dep_offsets[n]);
  {
    std::vector<int32_t> fill(dep_offsets.begin(), dep_offsets.end() - 1);
    for (int32_t id = 0; id < n; ++id)
      for (const SlotDep& d : ix.slot(id).deps) dependents[fill[ix.id(ix.rank(id), d.tb, d.slot)]++] = id;
  }
  std::vector<int32_t> member_offsets(n + 1, 0), members(n);
  for (int32_t i = 0; i < n; ++i) ++member_offsets[root[i] + 1];
  for (int32_t i = 0; i < n; ++i) member_offsets[i + 1] += member_offsets[i];
  {
    std::vector<int32_t> fill(member_offsets.begin(), member_offsets.end() - 1);
    for (int32_t i = 0; i < n; ++i) members[fill[root[i]]++] = i;
  }
  auto for_each_edge = [&](int32_t from, auto&& fn) {
    if (!ix.last_in_tb(from)) fn(from + 1);
    for (int32_t k = dep_offsets[from]; k < dep_offsets[from + 1]; ++k)
      if (root[dependents[k]] != root[from]) fn(dependents[k]);  // within a node: check_within_nodes
  };
  // Kahn's algorithm removes every node not on or behind a cycle.
  std::vector<int32_t> indeg(n, 0);
  for (int32_t i = 0; i < n; ++i) for_each_edge(i, [&](int32_t to) { ++indeg[root[to]]; });
  std::vector<int32_t> ready;
  for (int32_t i = 0; i < n; ++i)
    if (root[i] == i && indeg[i] == 0) ready.push_back(i);
  std::vector<uint8_t> done(n, 0);
  while (!ready.empty()) {
    int32_t u = ready.back();
    ready.pop_back();
    done[u] = 1;
    for (int32_t k = member_offsets[u]; k < member_offsets[u + 1]; ++k)
      for_each_edge(members[k], [&](int32_t to) {
        if (--indeg[root[to]] == 0) ready.push_back(root[to]);
      });
  }
  int32_t left = -1;
  for (int32_t i = 0; i < n && left < 0; ++i)
    if (root[i] == i && !done[i]) left = i;
  WEFT_ASSERT(left >= 0, "the simulation stalled but the slot graph has no cycle");
  // Every node left has a predecessor left: walk back along one until a node repeats.
  std::vector<std::pair<int32_t, int32_t>> back(n, {-1, -1});  // node -> (from slot, to slot)
  for (int32_t i = 0; i < n; ++i)
    if (!done[root[i]])
      for_each_edge(i, [&](int32_t to) {
        if (!done[root[to]] && back[root[to]].first < 0) back[root[to]] = {i, to};
      });
  std::vector<int32_t> seen_at(n, -1);
  std::vector<std::pair<int32_t, int32_t>> walk;
  int32_t u = left;
  while (seen_at[u] < 0) {
    seen_at[u] = static_cast<int32_t>(walk.size());
    walk.push_back(back[u]);
    u = root[back[u].first];
  }
  // walk[seen_at[u]..] is the cycle, walked backwards; report it forwards.
  std::vector<std::pair<int32_t, int32_t>> cyc(walk.begin() + seen_at[u], walk.end());
  std::reverse(cyc.begin(), cyc.end());
  for (const auto& [from, to] : cyc) {
    report.cycle.push_back(slot_ref(ix, from));
    report.cycle.push_back(slot_ref(ix, to));
  }
  report.cycle.erase(std::unique(report.cycle.begin(), report.cycle.end(),
                                 [](const CycleEntry& a, const CycleEntry& b) {
                                   return a.rank == b.rank && a.tb == b.tb && a.slot == b.slot;
                                 }),
                     report.cycle.end());
  report.ok = false;
  report.message = "the plan can deadlock: ";
  for (size_t i = 0; i < report.cycle.size(); ++i) report.message += (i ? " -> " : "") + describe(report.cycle[i]);
  report.message += " -> back to the start";
}

/// Kahn's algorithm over the slots, with the edges `for_each_pred(id, fn)` names (fn(from)
/// for each predecessor of `id`) and, when `program_order`, each slot after the one before it
/// in its thread block. Returns a cycle in forward order, or nothing when the graph is
/// acyclic: every slot left after Kahn's algorithm has a predecessor left, so a walk back
/// along those repeats a slot.
template <class ForEachPred>
std::vector<int32_t> slot_cycle(const PlanIndex& ix, bool program_order, ForEachPred&& for_each_pred) {
  const int32_t n = ix.size();
    std::vector<int32_t> indeg(n, 0), offsets(static_cast<size_t>(n) + 1, 0), succ;
  for (int32_t id = 0; id < n; ++id) {
    indeg[id] = program_order && !ix.first_in_tb(id) ? 1 : 0;
    for_each_pred(id, [&](int32_t from) {
      ++indeg[id];
      ++offsets[static_cast<size_t>(from) + 1];
    });
  }
  for (int32_t i = 0; i < n; ++i) offsets[i + 1] += offsets[i];
  succ.resize(offsets[n]);
  {
    std::vector<int32_t> fill(offsets.begin(), offsets.end() - 1);
    for (int32_t id = 0; id < n; ++id) for_each_pred(id, [&](int32_t from) { succ[fill[from]++] = id; });
  }
  std::vector<int32_t> ready;
  for (int32_t id = 0; id < n; ++id)
    if (indeg[id] == 0) ready.push_back(id);
  std::vector<uint8_t> done(n, 0);
  int32_t fired = 0;
  while (!ready.empty()) {
    int32_t u = ready.back();
    ready.pop_back();
    done[u] = 1;
    ++fired;
    if (program_order && !ix.last_in_tb(u) && --indeg[u + 1] == 0) ready.push_back(u + 1);
    for (int32_t k = offsets[u]; k < offsets[u + 1]; ++k)
      if (--indeg[succ[k]] == 0) ready.push_back(succ[k]);
  }
  if (fired == n) return {};
  int32_t u = 0;
  while (done[u]) ++u;
  std::vector<int32_t> seen_at(n, -1), walk;
  while (seen_at[u] < 0) {
    seen_at[u] = static_cast<int32_t>(walk.size());
    walk.push_back(u);
    int32_t back = -1;
    if (program_order && !ix.first_in_tb(u) && !done[u - 1]) back = u - 1;
    for_each_pred(u, [&](int32_t from) {
      if (back < 0 && !done[from]) back = from;
    });
    WEFT_ASSERT(back >= 0, "an unfinished slot with every predecessor finished");
    u = back;
  }
  std::vector<int32_t> cycle(walk.begin() + seen_at[u], walk.end());
  std::reverse(cycle.begin(), cycle.end());
  return cycle;
}

/// Fills `report` with a cycle found by slot_cycle, after `what` ("the plan can deadlock ...: ").
void report_cycle(const PlanIndex& ix, const std::vector<int32_t>& cycle, const std::string& what,
                  DeadlockReport& report) {
  report.ok = false;
  report.message = what;
  for (int32_t id : cycle) {
    report.cycle.push_back(slot_ref(ix, id));
    report.message += describe(report.cycle.back()) + " -> ";
  }
  report.message += "back to the start";
}

/// Within one merged node, the members meet micro-batch by micro-batch: invocation k of a
/// receiving member needs invocation k of its sender, a fused member (rcs, rrcs, rrs)
/// forwards only what it received, and a dependency on another member of the node needs
/// that member's invocation k. These edges all stay inside micro-batch k, so the node can
/// run iff they are acyclic; a cycle (a forwarding chain that closes on itself, or a
/// dependency against the direction the data flows) stops every member at micro-batch 0.
void check_within_nodes(const PlanIndex& ix, const std::vector<int32_t>& root,
                        const std::vector<int32_t>& send_of, DeadlockReport& report) {
  std::vector<int32_t> cycle = slot_cycle(ix, false, [&](int32_t id, auto&& fn) {
    if (send_of[id] >= 0) fn(send_of[id]);
    const int32_t r = ix.rank(id);
    for (const SlotDep& d : ix.slot(id).deps) {
      int32_t dep = ix.id(r, d.tb, d.slot);
      if (root[dep] == root[id]) fn(dep);
    }
  });
  if (!cycle.empty()) report_cycle(ix, cycle, "the plan can deadlock within one micro-batch: ", report);
}

/// Algorithm-level execution over FIFOs of depth >= 1: the slots of one micro-batch with
/// program order, `deps`, receive-after-send and send-after-the-receive-depth-earlier edges
/// (see deadlock.hpp).
void check_fifo(const PlanIndex& ix, const std::vector<int32_t>& send_of,
                const std::vector<int32_t>& fifo_pred, int32_t depth, DeadlockReport& report) {
  std::vector<int32_t> cycle = slot_cycle(ix, true, [&](int32_t id, auto&& fn) {
    const int32_t r = ix.rank(id);
    for (const SlotDep& d : ix.slot(id).deps) fn(ix.id(r, d.tb, d.slot));
    if (send_of[id] >= 0) fn(send_of[id]);
    if (fifo_pred[id] >= 0) fn(fifo_pred[id]);
  });
  if (!cycle.empty())
    report_cycle(ix, cycle,
                 text::format("the plan can deadlock with FIFOs of %d message%s: ", depth, depth == 1 ? "" : "s"),
                 report);
}

}  // namespace

DeadlockReport check_deadlock(const Plan& p, int32_t fifo_depth) {
  if (fifo_depth < 0 || fifo_depth > (1 << 20))
    fail(ErrorCode::InvalidArgument, text::format("FIFO depth %d is out of range [0, 1048576]", fifo_depth));
  validate_plan(p);
  DeadlockReport report;
  PlanIndex ix(p);
  const int32_t n = ix.size();
  PlanPairing pairing = pair_connections(p, ix);
  if (!pairing.fault.empty()) {
    report.ok = false;
    report.unpaired = true;
    report.message = pairing.fault;
    return report;
  }
  std::vector<int32_t> send_of = std::move(pairing.send_of);
  // Algorithm-level plans over FIFOs keep the two ends of each message apart: the j-th send
  // waits for the (j-d)-th receive. The others merge them (rendezvous).
  if (fifo_depth > 0 && p.execution == ExecutionModel::Algorithm) {
    std::vector<int32_t> fifo_pred(n, -1);
    for (const PlanConnection& e : pairing.conns)
      for (size_t i = static_cast<size_t>(fifo_depth); i < e.sends.size(); ++i)
        fifo_pred[e.sends[i]] = e.recvs[i - static_cast<size_t>(fifo_depth)];
    check_fifo(ix, send_of, fifo_pred, fifo_depth, report);
    return report;
  }
  // Members of a merged node are visited through `next` (circular lists, spliced per message).
  std::vector<int32_t> next(n), root(n);
  std::iota(next.begin(), next.end(), 0);
  {
    UnionFind ends(n);
    for (const PlanConnection& e : pairing.conns)
      for (size_t i = 0; i < e.sends.size(); ++i)
        if (ends.unite(e.sends[i], e.recvs[i])) std::swap(next[e.sends[i]], next[e.recvs[i]]);
    pairing.conns = {};
    for (int32_t i = 0; i < n; ++i) root[i] = ends.find(i);
  }
  // First within each merged node (one micro-batch), then between nodes.
  check_within_nodes(ix, root, send_of, report);
  if (!report.ok) return report;
  // The simulation starts from each thread block's first slot, whichever member of its node that is.
  if (simulate(ix, next, root, send_of)) return report;
  send_of = {};
  next = {};
  find_cycle(ix, root, report);
  return report;
}

void check_deadlock_or_throw(const Plan& plan, int32_t fifo_depth) {
  DeadlockReport r = check_deadlock(plan, fifo_depth);
  if (r.unpaired) fail(ErrorCode::Verify, r.message);
  if (!r.ok) throw DeadlockError(std::move(r));
}

}  // namespace weft
