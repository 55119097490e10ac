#include "compile/allocate.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>
#include <vector>
#include <tuple>

#include "compile/union_find.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

/// Slots of each rank, and the group of each slot (see allocate.hpp). Groups are ids of a
/// union-find over connection ends (2 per connection) followed by ids for local slots.
struct Grouping {
  std::vector<int32_t> rank_offsets, rank_slots;  // slots by rank (compressed rows)
  std::vector<int64_t> group;                     // per slot
};

/// A rank's groups of connection ends to one peer, once paired by channel, paired again: the
/// i-th that begins by sending with the i-th that begins by receiving (in program order,
/// where their instances agree). With a channel per chunk DAG, the chunk a rank sends to a
/// peer and the chunk it receives from that peer in the same step then share a block, as an
/// MSCCL file's block per peer and channel has them.
void pair_opposites(const LoweredProgram& p, UnionFind& ends) {
  struct First {
    int64_t key = INT64_MAX;
    bool sends = false;
    int32_t rank = 0, peer = 0, instances = 0;
  };
  std::map<int32_t, First> first;  // group root -> its first slot
  for (const LoweredSlot& s : p.slots) {
    if (s.send_conn < 0 && s.recv_conn < 0) continue;
    const int32_t root = s.send_conn >= 0 ? ends.find(2 * s.send_conn) : ends.find(2 * s.recv_conn + 1);
    First& f = first[root];
    if (s.key >= f.key) continue;
    f.key = s.key;
    f.sends = s.recv_conn < 0;
    f.rank = s.rank;
    f.peer = s.send_conn >= 0 ? s.send_peer : s.recv_peer;
    f.instances = s.instances;
  }
  // (rank, peer, instances) -> (key, root) of the groups that begin sending / receiving
  std::map<std::tuple<int32_t, int32_t, int32_t>, std::pair<std::vector<std::pair<int64_t, int32_t>>,
                                                            std::vector<std::pair<int64_t, int32_t>>>>
      lists;
  for (const auto& [root, f] : first) {
    auto& l = lists[{f.rank, f.peer, f.instances}];
    (f.sends ? l.first : l.second).emplace_back(f.key, root);
  }
  for (auto& [where, l] : lists) {
    std::sort(l.first.begin(), l.first.end());
    std::sort(l.second.begin(), l.second.end());
    for (size_t i = 0; i < std::min(l.first.size(), l.second.size()); ++i) ends.unite(l.first[i].second, l.second[i].second);
  }
}

Grouping group_slots(const LoweredProgram& p, bool locals_share, bool pair_peers = false) {
  const int32_t nconn = static_cast<int32_t>(p.connections.size());
  UnionFind ends(2 * static_cast<size_t>(nconn));
  int32_t channels = 1;
  for (const LoweredSlot& s : p.slots) {
    channels = std::max(channels, s.channel + 1);
    if (s.send_conn >= 0 && s.recv_conn >= 0) ends.unite(2 * s.send_conn, 2 * s.recv_conn + 1);
  }
  if (pair_peers) {
    // MSCCL's thread block per peer: a rank's end of a connection to a peer and its end of
    // the connection back, on one channel, share a block (when their instances agree).
    std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> id;
    for (int32_t c = 0; c < nconn; ++c) id[{p.connections[c].src, p.connections[c].dst, p.connections[c].channel}] = c;
    for (int32_t c = 0; c < nconn; ++c) {
      const Connection& x = p.connections[c];
      auto back = id.find({x.dst, x.src, x.channel});
      if (back != id.end() && p.connections[back->second].instances == x.instances) ends.unite(2 * c, 2 * back->second + 1);
    }
    pair_opposites(p, ends);
  }
  Grouping g;
  g.group.resize(p.slots.size());
  const int64_t base = 2 * static_cast<int64_t>(nconn);
  for (size_t i = 0; i < p.slots.size(); ++i) {
    const LoweredSlot& s = p.slots[i];
    if (s.send_conn >= 0) g.group[i] = ends.find(2 * s.send_conn);
    else if (s.recv_conn >= 0) g.group[i] = ends.find(2 * s.recv_conn + 1);
    else if (locals_share) g.group[i] = base + static_cast<int64_t>(s.rank) * channels + s.channel;
    else g.group[i] = base + static_cast<int64_t>(p.num_ranks) * channels + static_cast<int64_t>(i);
  }
  g.rank_offsets.assign(p.num_ranks + 1, 0);
  for (const LoweredSlot& s : p.slots) ++g.rank_offsets[s.rank + 1];
  for (int32_t r = 0; r < p.num_ranks; ++r) g.rank_offsets[r + 1] += g.rank_offsets[r];
  g.rank_slots.resize(p.slots.size());
  std::vector<int32_t> fill(g.rank_offsets.begin(), g.rank_offsets.end() - 1);
  for (size_t i = 0; i < p.slots.size(); ++i) g.rank_slots[fill[p.slots[i].rank]++] = static_cast<int32_t>(i);
  return g;
}

Allocation start(const LoweredProgram& p) {
  Allocation a;
  a.inst_base.assign(p.slots.size() + 1, 0);
  for (size_t i = 0; i < p.slots.size(); ++i) a.inst_base[i + 1] = a.inst_base[i] + p.slots[i].instances;
  a.tb.assign(a.inst_base.back(), -1);
  a.tbs_per_rank.assign(p.num_ranks, 0);
  return a;
}

/// The groups of one rank: dense ids, in order of their first slot's key.
struct RankGroups {
  std::vector<int32_t> slots;     // the rank's slots
  std::vector<int32_t> group_of;  // per entry of `slots`: dense group id
  std::vector<int32_t> instances; // per dense group
  int32_t count = 0;
};

RankGroups rank_groups(const LoweredProgram& p, const Grouping& g, int32_t r) {
  RankGroups rg;
  rg.slots.assign(g.rank_slots.begin() + g.rank_offsets[r], g.rank_slots.begin() + g.rank_offsets[r + 1]);
  std::sort(rg.slots.begin(), rg.slots.end(), [&](int32_t a, int32_t b) { return p.slots[a].key < p.slots[b].key; });
  std::vector<int64_t> ids;
  for (int32_t s : rg.slots) ids.push_back(g.group[s]);
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<int32_t> dense(sorted.size(), -1);
  rg.group_of.resize(rg.slots.size());
  for (size_t i = 0; i < rg.slots.size(); ++i) {
    size_t k = std::lower_bound(sorted.begin(), sorted.end(), ids[i]) - sorted.begin();
    if (dense[k] < 0) {
      dense[k] = rg.count++;
      rg.instances.push_back(0);
    }
    // A group takes as many blocks as its slots reach (a NIC-fed op may take fewer than its
    // connection's others, CompileOptions::pace; an op may start at a later block,
    // CompileOptions::op_blocks): instance k of a slot runs on the group's block
    // first_block + k.
    const LoweredSlot& ls = p.slots[rg.slots[i]];
    rg.instances[dense[k]] = std::max(rg.instances[dense[k]], ls.first_block + ls.instances);
    rg.group_of[i] = dense[k];
  }
  return rg;
}

/// One thread block per group and instance.
int32_t assign_per_group(const LoweredProgram& p, const RankGroups& rg, Allocation& a) {
  std::vector<int32_t> first_tb(rg.count);
  int32_t next = 0;
  for (int32_t gi = 0; gi < rg.count; ++gi) {
    first_tb[gi] = next;
    next += rg.instances[gi];
  }
  for (size_t i = 0; i < rg.slots.size(); ++i) {
    int32_t s = rg.slots[i];
    for (int32_t k = 0; k < p.slots[s].instances; ++k)
      a.tb[a.inst_base[s] + k] = first_tb[rg.group_of[i]] + p.slots[s].first_block + k;
  }
  return next;
}

/// Greedy colouring of (group, instance) nodes by sub-pipeline activity; returns the number of
/// thread blocks, or -1 if it exceeds `limit`.
int32_t assign_by_state(const LoweredProgram& p, const RankGroups& rg, Allocation& a, int32_t limit) {
  // Compress the sub-pipelines this rank's slots start or end in.
  std::vector<int32_t> points;
  for (int32_t s : rg.slots) {
    points.push_back(p.slots[s].sp_first);
    points.push_back(p.slots[s].sp_last);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  const size_t words = (points.size() + 63) / 64;
  auto index = [&](int32_t sp) { return static_cast<size_t>(std::lower_bound(points.begin(), points.end(), sp) - points.begin()); };
  // A group is active from its first sub-pipeline to its last (paper 001 §4.4's interval):
  // sub-pipelines are no barriers at run time, so a connection with tasks in sub-pipelines 0
  // and 2 keeps its thread block busy in between, and one that shared it with a connection
  // active in sub-pipeline 1 would serialize the two (a NIC's send and receive, taking turns).
  // Each instance of a group is a node of its own, active over the slots that have that
  // instance (a NIC-fed op may have fewer than the group's others, CompileOptions::pace).
  std::vector<int32_t> node_base(rg.count + 1, 0);
  for (int32_t gi = 0; gi < rg.count; ++gi) node_base[gi + 1] = node_base[gi] + rg.instances[gi];
  const int32_t num_nodes = node_base[rg.count];
  std::vector<uint64_t> active(static_cast<size_t>(num_nodes) * words, 0);
  std::vector<size_t> first(num_nodes, SIZE_MAX), last(num_nodes, 0);
  std::vector<int32_t> slots_of(rg.count, 0), covered(num_nodes, 0);
  for (size_t i = 0; i < rg.slots.size(); ++i) {
    const LoweredSlot& s = p.slots[rg.slots[i]];
    ++slots_of[rg.group_of[i]];
    for (int32_t k = 0; k < s.instances; ++k) {
      const int32_t n = node_base[rg.group_of[i]] + s.first_block + k;
      ++covered[n];
      first[n] = std::min(first[n], index(s.sp_first));
      last[n] = std::max(last[n], index(s.sp_last));
    }
  }
  // An instance that only some of its group's slots have (the blocks a NIC-fed op leaves
  // out, or an op placed on some of the blocks) may end early, or start late, and shares
  // with nothing: sub-pipelines are no barriers, and a group that followed it on its block
  // would wait for it (a NIC's first send behind an NVLink part).
  for (int32_t gi = 0; gi < rg.count; ++gi)
    for (int32_t n = node_base[gi]; n < node_base[gi + 1]; ++n)
      if (covered[n] < slots_of[gi]) first[n] = 0, last[n] = points.size() - 1;
  for (int32_t n = 0; n < num_nodes; ++n) {
    uint64_t* bits = &active[static_cast<size_t>(n) * words];
    for (size_t b = first[n]; b <= last[n] && first[n] != SIZE_MAX; ++b) bits[b / 64] |= uint64_t(1) << (b % 64);
  }
  // Groups in order of first activity, each group's instances together.
  std::vector<int32_t> groups(rg.count);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](int32_t x, int32_t y) { return first[node_base[x]] < first[node_base[y]]; });
  std::vector<uint64_t> used;  // per thread block, its activity
  std::vector<std::vector<int32_t>> node_tb(rg.count);
  int32_t tbs = 0;
  for (int32_t gi : groups) {
    for (int32_t k = 0; k < rg.instances[gi]; ++k) {
      const uint64_t* bits = &active[static_cast<size_t>(node_base[gi] + k) * words];
      int32_t chosen = -1;
      for (int32_t t = 0; t < tbs && chosen < 0; ++t) {
        const uint64_t* u = &used[static_cast<size_t>(t) * words];
        bool clash = false;
        for (size_t w = 0; w < words && !clash; ++w) clash = (u[w] & bits[w]) != 0;
        if (!clash) chosen = t;
      }
      if (chosen < 0) {
        chosen = tbs++;
        if (tbs > limit) return -1;
        used.resize(static_cast<size_t>(tbs) * words, 0);
      }
      uint64_t* u = &used[static_cast<size_t>(chosen) * words];
      for (size_t w = 0; w < words; ++w) u[w] |= bits[w];
      node_tb[gi].push_back(chosen);
    }
  }
  for (size_t i = 0; i < rg.slots.size(); ++i) {
    int32_t s = rg.slots[i];
    for (int32_t k = 0; k < p.slots[s].instances; ++k)
      a.tb[a.inst_base[s] + k] = node_tb[rg.group_of[i]][p.slots[s].first_block + k];
  }
  return tbs;
}

}  // namespace

Allocation allocate_conn(const LoweredProgram& p) {
  Allocation a = start(p);
  Grouping g = group_slots(p, true);
  for (int32_t r = 0; r < p.num_ranks; ++r) a.tbs_per_rank[r] = assign_per_group(p, rank_groups(p, g, r), a);
  return a;
}

Allocation allocate_state(const LoweredProgram& p) {
  Allocation a = start(p);
  Grouping each = group_slots(p, false);
  Grouping shared = group_slots(p, true);
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    RankGroups fallback = rank_groups(p, shared, r);
    int32_t limit = 0;
    for (int32_t k : fallback.instances) limit += k;
    int32_t n = assign_by_state(p, rank_groups(p, each, r), a, limit);
    a.tbs_per_rank[r] = n >= 0 ? n : assign_per_group(p, fallback, a);
  }
  return a;
}

/// Deals a rank's local slots (`local`, in key order) over the blocks first .. first+over-1,
/// among which the slots `comm` (sends and receives) are already assigned; returns how many of
/// them took work. A chain of reductions into one destination (a reduce per peer, in turn)
/// keeps its instances on the same blocks, so that each link of the chain follows the one
/// before in program order instead of waiting across blocks. A chain starts on the blocks
/// with the fewest chains, taken round robin from where the last chain ended, among those
/// that have begun their communication before the chain's first link (or have none): on a
/// block whose first send or receive comes later in program order the chain would run
/// first and hold that communication up (with a channel per chunk, the reductions of the
/// chunks of an MSCCL file's channel 0 before the sends of its channel 1).
int32_t deal_locals(const LoweredProgram& p, const std::vector<int32_t>& local, const std::vector<int32_t>& comm,
                    int32_t first, int32_t over, Allocation& a) {
  std::vector<int64_t> begins(over, INT64_MIN);  // per position: the key of its first send or receive
  for (int32_t s : comm) {
    const LoweredSlot& ls = p.slots[s];
    for (int32_t k = 0; k < ls.instances; ++k) {
      const int32_t q = a.tb[a.inst_base[s] + k] - first;
      if (q >= 0 && q < over) begins[q] = begins[q] == INT64_MIN ? ls.key : std::min(begins[q], ls.key);
    }
  }
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> chains;  // destination -> positions
  std::vector<int32_t> load(over, 0), order(over);
  int32_t cursor = 0, top = 0;
  for (int32_t s : local) {
    const LoweredSlot& ls = p.slots[s];
    auto [it, fresh] = chains.try_emplace(std::make_pair(static_cast<int32_t>(ls.dst.buffer), ls.dst.index));
    if (fresh) {
      std::iota(order.begin(), order.end(), 0);
      auto rank_of = [&](int32_t q) { return std::make_tuple(begins[q] > ls.key, load[q], (q - cursor + over) % over); };
      std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return rank_of(x) < rank_of(y); });
      for (int32_t k = 0; k < std::min(ls.instances, over); ++k) {
        it->second.push_back(order[k]);
        ++load[order[k]];
      }
      cursor = (it->second.back() + 1) % over;
    }
    const std::vector<int32_t>& at = it->second;
    for (int32_t k = 0; k < ls.instances; ++k) {
      const int32_t q = k < static_cast<int32_t>(at.size()) ? at[k] : (at.front() + k) % over;
      a.tb[a.inst_base[s] + k] = first + q;
      top = std::max(top, q + 1);
    }
  }
  return top;
}

/// Both directions of a connection to a peer on one block per instance. Local copies and
/// reductions: with `mixed`, dealt round robin (each instance of a slot on a different block)
/// over the communication blocks and `spare` more; otherwise on blocks of their own, or dealt
/// over `spare` blocks that take local work only.
Allocation allocate_peer(const LoweredProgram& p, int32_t spare, bool mixed) {
  Allocation a = start(p);
  Grouping g = group_slots(p, true, true);
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    RankGroups rg = rank_groups(p, g, r);
    std::vector<int32_t> local;
    for (int32_t s : rg.slots)
      if (p.slots[s].send_conn < 0 && p.slots[s].recv_conn < 0) local.push_back(s);
    int32_t most = 1, total = 0;
    for (int32_t s : local) {
      most = std::max(most, p.slots[s].instances);
      total += p.slots[s].instances;
    }
    const int32_t extra = std::clamp(spare, 0, total);  // no block left without work
    RankGroups comm;
    std::vector<int32_t> dense(rg.count, -1);
    for (size_t i = 0; i < rg.slots.size(); ++i) {
      const LoweredSlot& s = p.slots[rg.slots[i]];
      if (s.send_conn < 0 && s.recv_conn < 0) continue;
      int32_t& d = dense[rg.group_of[i]];
      if (d < 0) {
        d = comm.count++;
        comm.instances.push_back(rg.instances[rg.group_of[i]]);
      }
      comm.slots.push_back(rg.slots[i]);
      comm.group_of.push_back(d);
    }
    const int32_t comm_tbs = local.empty() ? 0 : assign_per_group(p, comm, a);
    const int32_t first = mixed ? 0 : comm_tbs, over = mixed ? comm_tbs + extra : extra;
    if (local.empty() || over < most) {  // too few blocks to deal over: locals keep their own
      a.tbs_per_rank[r] = assign_per_group(p, rg, a);
      continue;
    }
    a.tbs_per_rank[r] = std::max(comm_tbs, first + deal_locals(p, local, mixed ? comm.slots : std::vector<int32_t>{}, first, over, a));
  }
  return a;
}

/// All of a rank's slots with the same instance count on one block per instance, as an MSCCL
/// file with one thread block per channel has them: at algorithm level each block visits every
/// peer of the rank per micro-batch (allpairs_broadcast's root sends to its 7 peers from each
/// of 19 blocks, where one group per connection gets 2 or 3 blocks per peer).
Allocation allocate_rank(const LoweredProgram& p) {
  Allocation a = start(p);
  Grouping g = group_slots(p, true);
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    RankGroups rg = rank_groups(p, g, r), one;
    std::map<int32_t, int32_t> by_instances;  // instance count -> dense group
    one.slots = rg.slots;
    for (int32_t s : rg.slots) {
      auto [it, fresh] = by_instances.emplace(p.slots[s].instances, one.count);
      if (fresh) {
        ++one.count;
        one.instances.push_back(p.slots[s].instances);
      }
      one.group_of.push_back(it->second);
    }
    a.tbs_per_rank[r] = assign_per_group(p, one, a);
  }
  return a;
}

void check_allocator_name(std::string_view allocator) {
  if (allocator != "state" && allocator != "conn" && allocator != "peer" && allocator != "peer-mixed" && allocator != "rank")
    fail(ErrorCode::InvalidArgument,
         "unknown allocator '" + std::string(allocator) + "' (known: state, conn, peer, peer-mixed, rank)");
}

Allocation allocate(const LoweredProgram& p, std::string_view allocator, int32_t spare_blocks) {
  check_allocator_name(allocator);
  if (allocator == "rank") return allocate_rank(p);
  if (allocator == "peer" || allocator == "peer-mixed") return allocate_peer(p, spare_blocks, allocator == "peer-mixed");
  return allocator == "state" ? allocate_state(p) : allocate_conn(p);
}

void assemble_plan(const LoweredProgram& p, const Allocation& a, Plan& plan) {
  // Rank by rank (dependencies stay within a rank, so each rank's working set is small), the
  // rank's lowered slots are visited in key order and each instance is appended to its thread
  // block: a thread block's slots come out in key order (its keys are distinct) with no sort
  // per thread block, and the slots a dependency names (earlier keys) are already placed. At
  // 1,024 GPUs this writes 12.8 million slots.
  const size_t n = p.slots.size();
  std::vector<int32_t> rank_offsets(p.num_ranks + 1, 0), rank_slots(n);
  for (const LoweredSlot& s : p.slots) ++rank_offsets[s.rank + 1];
  for (int32_t r = 0; r < p.num_ranks; ++r) rank_offsets[r + 1] += rank_offsets[r];
  {
    std::vector<int32_t> fill(rank_offsets.begin(), rank_offsets.end() - 1);
    for (size_t i = 0; i < n; ++i) rank_slots[fill[p.slots[i].rank]++] = static_cast<int32_t>(i);
  }
  std::vector<int32_t> local_of(n, -1);  // a lowered slot's position in its rank's key order
  std::vector<std::pair<int64_t, int32_t>> by_key;
  std::vector<int32_t> local_base, local_instances, sizes;
  std::vector<SlotDep> where;  // per instance of the rank's slots: (thread block, position)
  std::vector<int64_t> last_key;
  std::vector<SlotDep> deps;
  plan.ranks.assign(p.num_ranks, {});
  for (int32_t r = 0; r < p.num_ranks; ++r) {
    RankPlan& rp = plan.ranks[r];
    rp.rank = r;
    rp.tbs.resize(a.tbs_per_rank[r]);
    const int32_t first = rank_offsets[r], count = rank_offsets[r + 1] - first;
    by_key.resize(count);
    for (int32_t i = 0; i < count; ++i) {
      const int32_t id = rank_slots[first + i];
      by_key[i] = {p.slots[id].key, id};
    }
    std::sort(by_key.begin(), by_key.end());  // lowering emits slots almost in key order
    local_base.assign(count + 1, 0);
    local_instances.resize(count);
    sizes.assign(a.tbs_per_rank[r], 0);
    for (int32_t i = 0; i < count; ++i) {
      const int32_t id = by_key[i].second;
      local_of[id] = i;
      local_instances[i] = p.slots[id].instances;
      local_base[i + 1] = local_base[i] + local_instances[i];
      for (int32_t k = 0; k < local_instances[i]; ++k) {
        const int32_t tb = a.tb[a.inst_base[id] + k];
        WEFT_ASSERT(tb >= 0 && tb < a.tbs_per_rank[r], "a slot has no thread block");
        ++sizes[tb];
      }
    }
    for (int32_t tb = 0; tb < a.tbs_per_rank[r]; ++tb) rp.tbs[tb].slots.reserve(sizes[tb]);
    where.assign(local_base[count], {-1, -1});
    last_key.assign(a.tbs_per_rank[r], 0);
    for (int32_t i = 0; i < count; ++i) {
      const auto [key, id] = by_key[i];
      const LoweredSlot& ls = p.slots[id];
      for (int32_t instance = 0; instance < ls.instances; ++instance) {
        const int32_t tb = a.tb[a.inst_base[id] + instance];
        auto& out = rp.tbs[tb].slots;
        const int32_t my_pos = static_cast<int32_t>(out.size());
        WEFT_ASSERT(my_pos == 0 || last_key[tb] < key, "two slots of one unit on one thread block");
        last_key[tb] = key;
        where[local_base[i] + instance] = {tb, my_pos};
        Slot& s = out.emplace_back();
        s.primitive = ls.primitive;
        s.send_peer = ls.send_peer;
        s.recv_peer = ls.recv_peer;
        // A connection's instance i is its physical channel c * m + i, m its count; a NIC-fed
        // op with fewer instances (CompileOptions::pace) rides on the first of them, an op
        // placed on some of them (CompileOptions::op_blocks) on first_block onwards.
        const int32_t conn = ls.send_conn >= 0 ? ls.send_conn : ls.recv_conn;
        const int32_t m = conn >= 0 ? p.connections[conn].instances : ls.instances;
        s.channel = ls.channel * m + ls.first_block + instance;
        s.src = ls.src;
        s.dst = ls.dst;
        s.count = ls.count;
        s.instance = instance;
        s.instances = ls.instances;
        s.subpipeline = ls.sp_first;
        s.tasks.assign(p.slot_tasks.begin() + ls.tasks_begin, p.slot_tasks.begin() + ls.tasks_end);
        deps.clear();
        for (int32_t d = ls.deps_begin; d < ls.deps_end; ++d) {
          const int32_t j = local_of[p.slot_deps[d]];
          WEFT_ASSERT(j >= 0 && j < i, "a dependency on a slot of another rank or later in program order");
          const int32_t kd = local_instances[j], ks = ls.instances;
          // Instances of the slot waited on whose share of a micro-batch overlaps this one's.
          int32_t lo = static_cast<int32_t>(static_cast<int64_t>(instance) * kd / ks);
          int32_t hi = static_cast<int32_t>((static_cast<int64_t>(instance + 1) * kd + ks - 1) / ks);
          for (int32_t i2 = lo; i2 < hi; ++i2) {
            const SlotDep on = where[local_base[j] + i2];
            if (on.tb == tb) {
              WEFT_ASSERT(on.slot < my_pos, "a dependency on a later slot of the same thread block");
              continue;  // program order covers it
            }
            deps.push_back(on);
          }
        }
        std::sort(deps.begin(), deps.end(),
                  [](const SlotDep& x, const SlotDep& y) { return x.tb != y.tb ? x.tb < y.tb : x.slot < y.slot; });
        deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
        s.deps.assign(deps.begin(), deps.end());
      }
    }
  }
}

}  // namespace weft
