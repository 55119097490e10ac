// Merging instance siblings (program.hpp, merge_instance_siblings).
//
// Why it is exact: the k instances of a group run the same slots on k thread blocks, each
// moving 1/k of every micro-batch over the same route. If their dependencies are the same
// merged slots and their peers are sibling groups too, nothing distinguishes one instance
// from another: they become ready at the same instants, their flows have the same per-TB
// rate on the same resources (so the same share factor), and their receivers copy the same
// amounts. One block carrying all k parts at k times the rate, with k times the local copy
// rate, reaches every event at the same instant, and a resource sees the same demand (k
// flows of rate r, or one of k r). Instances of different counts (7 on NVLink feeding 4 on
// a NIC) depend on the instances they overlap; merged, the consumer waits for the whole
// producer group, which ends at the same instant as any of its members.
#include <algorithm>
#include <unordered_map>

#include "sim/program.hpp"

namespace weft::sim {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// The fields two sibling slots share (everything but instance, channel and dependencies,
// which are compared group-wise later).
bool same_shape(const Slot& a, const Slot& b) {
  return a.primitive == b.primitive && a.send_peer == b.send_peer && a.recv_peer == b.recv_peer && a.src == b.src &&
         a.dst == b.dst && a.count == b.count && a.instances == b.instances && a.channel / a.instances == b.channel / b.instances;
}

/// The three steps of merge_instance_siblings over one program: its blocks' group (rep:
/// the group's first block, member: the block's instance in it, size: the group's size).
class SiblingMerge {
 public:
  SiblingMerge(const Plan& plan, Program& p)
      : plan_(plan), p_(p), n_tbs_(p.tbs.size()), rep_(n_tbs_), member_(n_tbs_, 0), size_(n_tbs_, 1) {
    for (size_t t = 0; t < n_tbs_; ++t) rep_[t] = static_cast<int32_t>(t);
  }

  /// False when no group survives (the program stays as it is).
  bool group() {
    find_groups();
    for (const auto& g : groups_) set_group(g, true);
    return prune();
  }
  Program merged();

 private:
  const std::vector<Slot>& slots_of(size_t t) const {
    return plan_.ranks[static_cast<size_t>(p_.tbs[t].rank)].tbs[static_cast<size_t>(p_.tbs[t].local)].slots;
  }
  void find_groups();
  void group_bucket(const std::vector<int32_t>& tbs);
  void set_group(const std::vector<int32_t>& g, bool on) {
    for (size_t i = 0; i < g.size(); ++i) {
      const size_t t = static_cast<size_t>(g[i]);
      rep_[t] = on ? g[0] : g[i];
      member_[t] = on ? static_cast<int32_t>(i) : 0;
      size_[t] = on ? static_cast<int32_t>(g.size()) : 1;
    }
  }
  bool consistent(const std::vector<int32_t>& g) const;
  bool prune();
  /// The dependencies of `s` as (group representative, slot) pairs, sorted, unique.
  void canon_deps(const ProgSlot& s, std::vector<std::pair<int32_t, int32_t>>& out) const {
    out.clear();
    for (uint32_t d = s.dep_begin; d < s.dep_end; ++d) {
      const ProgSlot& ds = p_.slots[static_cast<size_t>(p_.deps[d])];
      out.emplace_back(rep_[static_cast<size_t>(ds.tb)], ds.local);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  const Plan& plan_;
  Program& p_;
  const size_t n_tbs_;
  std::vector<int32_t> rep_, member_, size_;
  std::vector<std::vector<int32_t>> groups_;  ///< members by instance index
};

/// A bucket of blocks of one rank and shape is a group when it holds exactly k blocks
/// covering instances 0..k-1 with the same slots.
void SiblingMerge::group_bucket(const std::vector<int32_t>& tbs) {
  const std::vector<Slot>& first = slots_of(static_cast<size_t>(tbs[0]));
  const int32_t k = first[0].instances;
  if (static_cast<int32_t>(tbs.size()) != k) return;
  std::vector<int32_t> by_instance(static_cast<size_t>(k), -1);
  for (int32_t t : tbs) {
    const std::vector<Slot>& sl = slots_of(static_cast<size_t>(t));
    const int32_t i = sl[0].instance;
    if (by_instance[static_cast<size_t>(i)] >= 0 || sl.size() != first.size()) return;
    by_instance[static_cast<size_t>(i)] = t;
    for (size_t j = 0; j < sl.size(); ++j)
      if (!same_shape(sl[j], first[j])) return;
  }
  groups_.push_back(std::move(by_instance));
}

// 1. Candidates: per rank, blocks whose slots all are instance i of k (k > 1), bucketed
//    by shape; a bucket of exactly k blocks covering instances 0..k-1 is a group.
void SiblingMerge::find_groups() {
  std::unordered_map<uint64_t, std::vector<int32_t>> buckets;
  int32_t rank = -1;
  auto flush = [&] {
    for (auto& [key, tbs] : buckets) group_bucket(tbs);
    buckets.clear();
  };
  for (size_t t = 0; t < n_tbs_; ++t) {
    if (p_.tbs[t].rank != rank) {
      flush();
      rank = p_.tbs[t].rank;
    }
    const std::vector<Slot>& sl = slots_of(t);
    if (sl.empty() || sl[0].instances < 2) continue;
    const int32_t k = sl[0].instances, i = sl[0].instance;
    bool uniform = true;
    uint64_t h = mix(0, static_cast<uint64_t>(k));
    for (const Slot& s : sl) {
      if (s.instances != k || s.instance != i) {
        uniform = false;
        break;
      }
      h = mix(h, static_cast<uint64_t>(s.primitive));
      h = mix(h, static_cast<uint64_t>(static_cast<uint32_t>(s.send_peer)));
      h = mix(h, static_cast<uint64_t>(static_cast<uint32_t>(s.recv_peer)));
      h = mix(h, static_cast<uint64_t>(s.channel / k));
      h = mix(h, static_cast<uint64_t>(s.count));
      h = mix(h, (static_cast<uint64_t>(s.src.buffer) << 32) ^ static_cast<uint32_t>(s.src.index));
      h = mix(h, (static_cast<uint64_t>(s.dst.buffer) << 32) ^ static_cast<uint32_t>(s.dst.index));
    }
    if (uniform) buckets[h].push_back(static_cast<int32_t>(t));
  }
  flush();
}

/// Whether the group's members' dependencies and peers agree, group-wise.
bool SiblingMerge::consistent(const std::vector<int32_t>& g) const {
  const size_t k = g.size();
  const ProgTb& t0 = p_.tbs[static_cast<size_t>(g[0])];
  const int32_t n = t0.slot_end - t0.slot_begin;
  std::vector<std::pair<int32_t, int32_t>> d0, di;
  // The peers' end of a connection of instance i: instance i of one sibling group.
  auto peer_ok = [&](int32_t tb, size_t i, int32_t& group) {
    if (member_[static_cast<size_t>(tb)] != static_cast<int32_t>(i) || size_[static_cast<size_t>(tb)] != static_cast<int32_t>(k))
      return false;
    if (i == 0) group = rep_[static_cast<size_t>(tb)];
    return rep_[static_cast<size_t>(tb)] == group;
  };
  for (int32_t j = 0; j < n; ++j) {
    canon_deps(p_.slots[static_cast<size_t>(t0.slot_begin + j)], d0);
    int32_t peer_group_send = -1, peer_group_recv = -1;
    for (size_t i = 0; i < k; ++i) {
      const ProgTb& ti = p_.tbs[static_cast<size_t>(g[i])];
      const ProgSlot& si = p_.slots[static_cast<size_t>(ti.slot_begin + j)];
      canon_deps(si, di);
      if (di != d0) return false;
      if (si.send_conn >= 0 && !peer_ok(p_.conns[static_cast<size_t>(si.send_conn)].receiver_tb, i, peer_group_send))
        return false;
      if (si.recv_conn >= 0 && !peer_ok(p_.conns[static_cast<size_t>(si.recv_conn)].sender_tb, i, peer_group_recv))
        return false;
    }
  }
  return true;
}

// 2. Keep a group only while its members' dependencies and peers agree, group-wise;
//    dissolving one group can break another, so repeat until nothing changes.
bool SiblingMerge::prune() {
  std::vector<char> alive(groups_.size(), 1);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      if (!alive[gi] || consistent(groups_[gi])) continue;
      alive[gi] = 0;
      set_group(groups_[gi], false);
      changed = true;
    }
  }
  return std::find(alive.begin(), alive.end(), 1) != alive.end();
}

// 3. The merged program: representatives only, each slot carrying its group's parts.
Program SiblingMerge::merged() {
  Program m;
  m.execution = p_.execution;
  m.collective = p_.collective;
  m.num_ranks = p_.num_ranks;
  m.chunks = p_.chunks;
  m.rank_tbs = p_.rank_tbs;
  m.plan_tbs = p_.plan_tbs;
  m.plan_slots = p_.plan_slots;
  m.resources = std::move(p_.resources);
  std::vector<int32_t> new_tb(n_tbs_, -1), new_slot(p_.slots.size(), -1), new_conn(p_.conns.size(), -1);
  for (size_t t = 0; t < n_tbs_; ++t) {
    if (rep_[t] != static_cast<int32_t>(t)) continue;
    new_tb[t] = static_cast<int32_t>(m.tbs.size());
    ProgTb tb = p_.tbs[t];
    tb.weight = size_[t];
    const int32_t first = static_cast<int32_t>(m.slots.size());
    for (int32_t s = tb.slot_begin; s < tb.slot_end; ++s) new_slot[static_cast<size_t>(s)] = first + (s - tb.slot_begin);
    tb.slot_end = first + (tb.slot_end - tb.slot_begin);
    tb.slot_begin = first;
    m.tbs.push_back(tb);
    m.slots.resize(static_cast<size_t>(tb.slot_end));
  }
  for (size_t c = 0; c < p_.conns.size(); ++c) {
    const ProgConn& pc = p_.conns[c];
    if (rep_[static_cast<size_t>(pc.sender_tb)] != pc.sender_tb) continue;  // a sibling's connection
    new_conn[c] = static_cast<int32_t>(m.conns.size());
    ProgConn nc = pc;
    nc.cap_GBps *= size_[static_cast<size_t>(pc.sender_tb)];
    nc.sender_tb = new_tb[static_cast<size_t>(pc.sender_tb)];
    nc.receiver_tb = new_tb[static_cast<size_t>(pc.receiver_tb)];
    nc.res_begin = static_cast<uint32_t>(m.conn_res.size());
    for (uint32_t i = pc.res_begin; i < pc.res_end; ++i) m.conn_res.push_back(p_.conn_res[i]);
    nc.res_end = static_cast<uint32_t>(m.conn_res.size());
    m.conns.push_back(nc);
  }
  for (size_t t = 0; t < n_tbs_; ++t) {
    if (new_tb[t] < 0) continue;
    for (int32_t s = p_.tbs[t].slot_begin; s < p_.tbs[t].slot_end; ++s) {
      ProgSlot ns = p_.slots[static_cast<size_t>(s)];
      ns.tb = new_tb[t];
      ns.scale *= size_[t];
      if (ns.send_conn >= 0) ns.send_conn = new_conn[static_cast<size_t>(ns.send_conn)];
      if (ns.recv_conn >= 0) ns.recv_conn = new_conn[static_cast<size_t>(ns.recv_conn)];
      ns.dep_begin = static_cast<uint32_t>(m.deps.size());
      for (uint32_t d = p_.slots[static_cast<size_t>(s)].dep_begin; d < p_.slots[static_cast<size_t>(s)].dep_end; ++d) {
        const ProgSlot& ds = p_.slots[static_cast<size_t>(p_.deps[d])];
        const int32_t target = m.tbs[static_cast<size_t>(new_tb[static_cast<size_t>(rep_[static_cast<size_t>(ds.tb)])])].slot_begin + ds.local;
        if (std::find(m.deps.begin() + ns.dep_begin, m.deps.end(), target) == m.deps.end()) m.deps.push_back(target);
      }
      ns.dep_end = static_cast<uint32_t>(m.deps.size());
      m.slots[static_cast<size_t>(new_slot[static_cast<size_t>(s)])] = ns;
    }
  }
  return m;
}

}  // namespace

Program merge_instance_siblings(const Plan& plan, Program p) {
  SiblingMerge merge(plan, p);
  if (!merge.group()) return p;
  return merge.merged();
}

}  // namespace weft::sim
