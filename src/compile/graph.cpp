#include "compile/graph.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

int kind_rank(DepKind k) { return k == DepKind::True ? 0 : k == DepKind::Output ? 1 : 2; }

/// Dense ids for the conflict resources, cached per (src, dst) pair of GPUs.
class ConflictIds {
 public:
  ConflictIds(const Topology& topo, TaskGraph& g) : topo_(topo), g_(g) {}

  void assign(Task& t) {
    const Transfer& x = t.transfer;
    if (x.src_rank == x.dst_rank) return;
    int64_t key = static_cast<int64_t>(x.src_rank) * topo_.num_gpus() + x.dst_rank;
    auto it = pairs_.find(key);
    if (it == pairs_.end()) {
      Entry e;
      std::vector<ResourceId> rs = topo_.conflict_resources(x.src_rank, x.dst_rank);
      WEFT_ASSERT(rs.size() <= 2, "a link has more than two conflict resources");
      for (const ResourceId& r : rs) e.ids[e.n++] = resource_id(r);
      it = pairs_.emplace(key, e).first;
    }
    t.num_conflicts = it->second.n;
    t.conflicts[0] = it->second.ids[0];
    t.conflicts[1] = it->second.ids[1];
  }

 private:
  struct Entry {
    int32_t ids[2] = {-1, -1};
    int32_t n = 0;
  };
  int32_t resource_id(ResourceId r) {
    uint64_t key = (static_cast<uint64_t>(r.kind) << 56) ^ static_cast<uint64_t>(r.index);
    auto [it, fresh] = ids_.emplace(key, static_cast<int32_t>(g_.resources.size()));
    if (fresh) g_.resources.push_back(r);
    return it->second;
  }
  const Topology& topo_;
  TaskGraph& g_;
  std::unordered_map<int64_t, Entry> pairs_;
  std::unordered_map<uint64_t, int32_t> ids_;
};

int32_t find(std::vector<int32_t>& parent, int32_t x) {
  while (parent[x] != x) {
    parent[x] = parent[parent[x]];
    x = parent[x];
  }
  return x;
}

void number_chunks(TaskGraph& g) {
  int32_t n = g.size();
  std::vector<int32_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (const TaskEdge& e : g.edges) {
    int32_t a = find(parent, e.from), b = find(parent, e.to);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  // Component key: the smallest destination chunk index it touches, then its first task.
  std::vector<int32_t> key(n, INT32_MAX);
  std::vector<int32_t> roots;
  for (int32_t t = 0; t < n; ++t) {
    int32_t r = find(parent, t);
    if (r == t) roots.push_back(t);
    key[r] = std::min(key[r], g.tasks[t].transfer.dst_index);
  }
  std::sort(roots.begin(), roots.end(), [&](int32_t a, int32_t b) { return key[a] != key[b] ? key[a] < key[b] : a < b; });
  std::vector<int32_t> id(n, -1);
  for (size_t i = 0; i < roots.size(); ++i) id[roots[i]] = static_cast<int32_t>(i);
  for (int32_t t = 0; t < n; ++t) g.tasks[t].chunk = id[find(parent, t)];
  g.num_chunks = static_cast<int32_t>(roots.size());
}

/// Stages: maximal runs of steps that cross the same set of link classes (a step with only
/// local tasks joins the stage before it). Tasks are sorted by step.
void number_stages(TaskGraph& g) {
  int32_t n = g.size();
  int32_t stage = -1, mask_of_stage = 0;
  for (int32_t i = 0; i < n;) {
    int32_t j = i, mask = 0;
    for (; j < n && g.tasks[j].transfer.step == g.tasks[i].transfer.step; ++j) {
      if (g.tasks[j].link == LinkClass::Intra) mask |= 1;
      if (g.tasks[j].link == LinkClass::Inter) mask |= 2;
    }
    if (stage < 0) {
      stage = 0;
      mask_of_stage = mask;
    } else if (mask != 0 && mask_of_stage != 0 && mask != mask_of_stage) {
      ++stage;
      mask_of_stage = mask;
    } else if (mask_of_stage == 0) {
      mask_of_stage = mask;  // a stage that began with local steps takes the first link set
    }
    for (int32_t k = i; k < j; ++k) g.tasks[k].stage = stage;
    i = j;
  }
  g.num_stages = stage + 1;
}

}  // namespace

void check_topology_fits(const Algorithm& algo, const Topology& topo) {
  topo.validate();
  if (topo.num_gpus() != algo.ranks)
    fail(ErrorCode::InvalidArgument,
         text::format("topology %s has %d GPUs (%d nodes x %d) but algorithm %s needs %d ranks", topo.name.c_str(),
                      topo.num_gpus(), topo.nodes, topo.gpus_per_node, algo.name.c_str(), algo.ranks));
}

TaskGraph build_task_graph(const PlacedAlgorithm& placed, const Topology& topo) {
  const Algorithm& a = placed.algo;
  check_topology_fits(a, topo);
  check_shape(a);
  TaskGraph g;
  g.input_chunks = a.input_chunks;
  g.output_chunks = a.output_chunks;
  g.scratch_chunks = a.scratch_chunks;
  const int32_t n = static_cast<int32_t>(a.transfers.size());
  g.tasks.resize(n);

  // Physical slot ids: rank * per_rank + buffer offset + index.
  const int64_t per_rank = static_cast<int64_t>(a.input_chunks) + a.output_chunks + a.scratch_chunks;
  auto slot_id = [&](int32_t rank, Buffer b, int32_t index) -> int64_t {
    int64_t off = b == Buffer::Input ? 0 : b == Buffer::Output ? a.input_chunks : int64_t(a.input_chunks) + a.output_chunks;
    return rank * per_rank + off + index;
  };
  std::vector<int32_t> last_writer(static_cast<size_t>(per_rank * a.ranks), -1);
  std::vector<int32_t> reader_head(last_writer.size(), -1);
  std::vector<int32_t> node_task, node_next;  // readers since the last write, as linked lists

  ConflictIds conflicts(topo, g);
  std::vector<TaskEdge> local;
  g.edge_offsets.assign(n + 1, 0);
  for (int32_t t = 0; t < n; ++t) {
    Task& task = g.tasks[t];
    task.transfer = a.transfers[t];
    SlotRef acc = t < static_cast<int32_t>(placed.acc.size()) ? canonical_slot(a, placed.acc[t]) : task.transfer.dst();
    SlotRef src = canonical_slot(a, task.transfer.src()), dst = canonical_slot(a, task.transfer.dst());
    task.transfer.src_buffer = src.buffer, task.transfer.src_index = src.index;
    task.transfer.dst_buffer = dst.buffer, task.transfer.dst_index = dst.index;
    task.acc_buffer = acc.buffer;
    task.acc_index = acc.index;
    const Transfer& x = task.transfer;
    task.link = x.src_rank == x.dst_rank ? LinkClass::Local
                : topo.same_node(x.src_rank, x.dst_rank) ? LinkClass::Intra
                                                          : LinkClass::Inter;
    conflicts.assign(task);

    local.clear();
    auto read = [&](int32_t rank, Buffer b, int32_t index) {
      int64_t s = slot_id(rank, b, index);
      if (last_writer[s] >= 0) local.push_back({last_writer[s], t, DepKind::True, rank});
      node_task.push_back(t);
      node_next.push_back(reader_head[s]);
      reader_head[s] = static_cast<int32_t>(node_task.size()) - 1;
    };
    for (int32_t o = 0; o < x.count; ++o) read(x.src_rank, x.src_buffer, x.src_index + o);
    if (x.op == TransferOp::Reduce)
      for (int32_t o = 0; o < x.count; ++o) read(x.dst_rank, task.acc_buffer, task.acc_index + o);
    for (int32_t o = 0; o < x.count; ++o) {
      int64_t s = slot_id(x.dst_rank, x.dst_buffer, x.dst_index + o);
      for (int32_t r = reader_head[s]; r >= 0; r = node_next[r])
        if (node_task[r] != t) local.push_back({node_task[r], t, DepKind::Anti, x.dst_rank});
      int32_t w = last_writer[s];
      if (w >= 0 && w != t) {
        local.push_back({w, t, DepKind::Output, x.dst_rank});
        if (x.op == TransferOp::Copy) ++g.tasks[w].dst_overwritten;
      }
      last_writer[s] = t;
      reader_head[s] = -1;
    }
    // One edge per (predecessor, rank), the strongest kind.
    std::sort(local.begin(), local.end(), [](const TaskEdge& p, const TaskEdge& q) {
      if (p.from != q.from) return p.from < q.from;
      if (p.rank != q.rank) return p.rank < q.rank;
      return kind_rank(p.kind) < kind_rank(q.kind);
    });
    for (size_t i = 0; i < local.size(); ++i)
      if (i == 0 || local[i].from != local[i - 1].from || local[i].rank != local[i - 1].rank) g.edges.push_back(local[i]);
    g.edge_offsets[t + 1] = static_cast<int32_t>(g.edges.size());
  }

  // Distinct predecessors (edges to t are sorted by from) and successors.
  g.pred_offsets.assign(n + 1, 0);
  std::vector<int32_t> succ_count(n + 1, 0);
  for (int32_t t = 0; t < n; ++t) {
    int32_t last = -1;
    for (const TaskEdge& e : g.edges_to(t))
      if (e.from != last) {
        g.preds.push_back(e.from);
        ++succ_count[e.from + 1];
        last = e.from;
      }
    g.pred_offsets[t + 1] = static_cast<int32_t>(g.preds.size());
  }
  g.succ_offsets.assign(n + 1, 0);
  for (int32_t t = 0; t < n; ++t) g.succ_offsets[t + 1] = g.succ_offsets[t] + succ_count[t + 1];
  g.succs.resize(g.preds.size());
  std::vector<int32_t> fill(g.succ_offsets.begin(), g.succ_offsets.end() - 1);
  for (int32_t t = 0; t < n; ++t)
    for (int32_t p : g.preds_of(t)) g.succs[fill[p]++] = t;

  g.origin_offsets = placed.origin_offsets;
  g.origin_ids = placed.origin_ids;
  WEFT_ASSERT(static_cast<int32_t>(g.origin_offsets.size()) == n + 1, "placement lost track of transfer origins");
  number_chunks(g);
  number_stages(g);
  return g;
}

TaskGraph build_task_graph(const Algorithm& algo, const Topology& topo) {
  return build_task_graph(place_as_written(algo), topo);
}

}  // namespace weft
