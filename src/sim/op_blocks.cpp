#include "sim/op_blocks.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "compile/chain_order.hpp"
#include "compile/lower.hpp"
#include "compile/schedule.hpp"
#include "compile/union_find.hpp"
#include "sim/program.hpp"

namespace weft::sim {
namespace {

/// What the run saw of one op at one rank: its slots' first start, last end and busy time
/// (all instances together).
struct Seen {
  double first = 0, last = 0, busy = 0;
};

/// One task as the run saw it (both ends together).
struct TaskTimes {
  bool seen = false;
  double first = 0, last = 0;  ///< first start, last end
  double work = 0;             ///< busy time of all its blocks at its busiest end
  std::array<int32_t, 2> rank{-1, -1};  ///< its two ends' ranks (source, destination)
  std::array<double, 2> first_at{-1, -1}, last_at{-1, -1};  ///< per end (-1: not seen there)
};

using ConnKey = std::tuple<int32_t, int32_t, int32_t>;  ///< (src, dst, channel)

/// One unit (ops fused into one primitive, placed together) and where it was placed.
struct Unit {
  std::vector<int32_t> tasks;
  std::vector<ConnKey> conns;  ///< its logical connections
  int32_t m = 0;               ///< their blocks (-1: unknown or they disagree: it takes all)
  bool narrowable = true;      ///< none of its ops crosses the link that bounds the call
  double work = 0;             ///< one block's time for all of it (the busiest end)
  double began = 1e300;        ///< when it began in the run
  double latest = 1e300;       ///< when it may start at the latest without holding up what follows it
  bool placed = false;
  OpBlocks at;
  double first = 0, end = 0;   ///< when its first micro-batch and its last end, as placed
};

}  // namespace

class OpPlacer::Impl {
 public:
  Impl(const CompileResult& ref, const Topology& topo, const Simulator& sim, const SimReport& times)
      : ref_(ref), g_(ref.graph), ranks_(ref.plan.num_ranks), k_(std::max(1, times.microbatches)),
        bound_(bounding_link(ref.graph, topo)), uf_(static_cast<size_t>(ref.graph.size())) {
    read_connections();
    tt_ = read_times(ref_.plan, sim.program(), times);
    join_fused();
    make_units();
    find_latest(tt_, 0);
  }

  /// Latest starts again, from a run of the plan placed as place() chose (OpPlacer::refine).
  void refine(const Plan& placed, const Simulator& sim, const SimReport& times) {
    find_latest(read_times(placed, sim.program(), times), times.time_us);
  }

  std::vector<OpBlocks> place(size_t transfers, bool by_latest) {
    by_latest_ = by_latest;
    std::vector<double> free(static_cast<size_t>(blocks_), 0.0);  // per block of the run: busy until
    for (Unit& u : units_) u.placed = false;
    std::vector<OpBlocks> out(transfers);
    bool fewer = false;
    for (Unit& u : units_) {
      if (u.m <= 0) continue;
      fit(u, free);
      fewer = fewer || u.at.count < u.m;
      for (int32_t t : u.tasks)
        for (int32_t x : g_.origins_of(t))
          if (static_cast<size_t>(x) < transfers) out[static_cast<size_t>(x)] = u.at;
    }
    if (!fewer) out.clear();
    return out;
  }

  OpPlacer::Chains order_chains(const Algorithm& algo, const std::vector<OpBlocks>& placed) const {
    OpPlacer::Chains out;
    if (placed.empty()) return out;
    const std::vector<std::vector<int32_t>> chains = reduce_chains(algo);
    if (chains.empty()) return out;
    std::unordered_map<int32_t, std::pair<int32_t, int32_t>> in_chain;  // transfer -> (chain, position)
    for (size_t c = 0; c < chains.size(); ++c)
      for (size_t i = 0; i < chains[c].size(); ++i) in_chain[chains[c][i]] = {static_cast<int32_t>(c), static_cast<int32_t>(i)};
    // A unit's one transfer when it is one op of one transfer in a chain, else -1.
    auto member = [&](const Unit& u) {
      if (u.tasks.size() != 1 || u.conns.size() != 1) return -1;
      const auto origins = g_.origins_of(u.tasks[0]);
      return origins.size() == 1 && in_chain.count(origins[0]) ? origins[0] : -1;
    };
    auto lane_of = [&](const Unit& u) -> OpBlocks {
      const auto origins = g_.origins_of(u.tasks[0]);
      return origins.empty() || static_cast<size_t>(origins[0]) >= placed.size() ? OpBlocks{} : placed[static_cast<size_t>(origins[0])];
    };
    // Per connection, per block, its units in program order.
    std::map<ConnKey, std::map<int32_t, std::vector<int32_t>>> lanes;
    for (size_t i = 0; i < units_.size(); ++i) {
      const Unit& u = units_[i];
      if (u.m <= 1 || u.conns.size() != 1) continue;
      const OpBlocks b = lane_of(u);
      if (b.count != 1) continue;
      lanes[u.conns[0]][b.first].push_back(static_cast<int32_t>(i));
    }
    // Pairs: a lone op (its block ends after it) and the first op of a block that goes on,
    // of two different chains.
    struct Pair {
      int32_t lone = -1, partner = -1;  // units
    };
    std::vector<Pair> pairs;
    std::vector<int32_t> lone_per_chain(chains.size(), 0);
    for (const auto& [conn, by_block] : lanes) {
      int32_t lone = -1, partner = -1;
      for (const auto& [block, us] : by_block) {
        if (us.size() == 1 && member(units_[static_cast<size_t>(us[0])]) >= 0 && lone < 0) lone = us[0];
        if (us.size() >= 2 && member(units_[static_cast<size_t>(us[0])]) >= 0 && partner < 0) partner = us[0];
      }
      if (lone < 0) continue;
      ++lone_per_chain[static_cast<size_t>(in_chain[member(units_[static_cast<size_t>(lone)])].first)];
      if (partner >= 0 && in_chain[member(units_[static_cast<size_t>(lone)])].first !=
                              in_chain[member(units_[static_cast<size_t>(partner)])].first)
        pairs.push_back({lone, partner});
    }
    // The lone op moves to the partner's chain where that has fewer lone ops by two or more.
    std::vector<OpBlocks> blocks = placed;
    std::unordered_map<int32_t, bool> lone;  // transfer -> the only op on its block
    for (const auto& [conn, by_block] : lanes)
      for (const auto& [block, us] : by_block)
        if (us.size() == 1 && member(units_[static_cast<size_t>(us[0])]) >= 0) lone[member(units_[static_cast<size_t>(us[0])])] = true;
    bool swapped = false;
    for (const Pair& p : pairs) {
      const int32_t a = member(units_[static_cast<size_t>(p.lone)]), b = member(units_[static_cast<size_t>(p.partner)]);
      const size_t ca = static_cast<size_t>(in_chain[a].first), cb = static_cast<size_t>(in_chain[b].first);
      if (lone_per_chain[cb] + 1 >= lone_per_chain[ca]) continue;
      --lone_per_chain[ca], ++lone_per_chain[cb];
      std::swap(blocks[static_cast<size_t>(a)], blocks[static_cast<size_t>(b)]);
      lone.erase(a);
      lone[b] = true;
      swapped = true;
    }
    // Each chain: its lone ops first, then the others, each in the chain's order.
    out.chain_keys.assign(algo.transfers.size(), 0.0);
    std::vector<std::vector<int32_t>> now(chains.size());
    bool changed = false;
    for (size_t c = 0; c < chains.size(); ++c) {
      for (int32_t x : chains[c])
        if (lone.count(x)) now[c].push_back(x);
      for (int32_t x : chains[c])
        if (!lone.count(x)) now[c].push_back(x);
      for (size_t j = 0; j < now[c].size(); ++j) out.chain_keys[static_cast<size_t>(now[c][j])] = static_cast<double>(j);
      changed = changed || now[c] != chains[c];
    }
    if (!changed && !swapped) return {};
    // The program by latest start: a chain's op at position j takes the key of the op that
    // held position j in the reference run.
    std::unordered_map<int32_t, int32_t> task_of;  // transfer -> task
    for (int32_t t = 0; t < g_.size(); ++t)
      for (int32_t x : g_.origins_of(t)) task_of[x] = t;
    auto key_of = [&](int32_t x) {
      auto it = task_of.find(x);
      return it == task_of.end() ? 0.0 : task_latest_[static_cast<size_t>(it->second)];
    };
    out.op_order.assign(algo.transfers.size(), 0.0);
    for (size_t x = 0; x < algo.transfers.size(); ++x) out.op_order[x] = key_of(static_cast<int32_t>(x));
    for (size_t c = 0; c < chains.size(); ++c)
      for (size_t j = 0; j < now[c].size(); ++j) out.op_order[static_cast<size_t>(now[c][j])] = key_of(chains[c][j]);
    out.op_blocks = std::move(blocks);
    return out;
  }

 private:
  /// Per transfer its connection's logical channel and block count, per physical connection
  /// its two blocks (global ids), from the reference plan.
  void read_connections() {
    int32_t block = 0;
    for (size_t r = 0; r < ref_.plan.ranks.size(); ++r)
      for (const ThreadBlock& tb : ref_.plan.ranks[r].tbs) {
        const int32_t rank = static_cast<int32_t>(r);
        for (const Slot& s : tb.slots) {
          if (s.send_peer >= 0) ends_[{rank, s.send_peer, s.channel}][0] = block;
          if (s.recv_peer >= 0) ends_[{s.recv_peer, rank, s.channel}][1] = block;
          if (s.send_peer >= 0 || s.recv_peer >= 0)
            for (int32_t x : s.tasks) conn_of_transfer_[x] = {s.channel / std::max(1, s.instances), s.instances};
        }
        ++block;
      }
    blocks_ = std::max(1, block);
  }

  /// Per task what a run of `plan` saw, from its transfers' slots at its two ranks.
  std::vector<TaskTimes> read_times(const Plan& plan, const Program& prog, const SimReport& times) const {
    std::unordered_map<int64_t, Seen> seen;  // (transfer, rank)
    auto key = [&](int32_t x, int32_t rank) { return static_cast<int64_t>(x) * ranks_ + rank; };
    for (const ProgTb& t : prog.tbs)
      for (int32_t gs = t.slot_begin; gs < t.slot_end; ++gs) {
        const Slot& s = plan.ranks[static_cast<size_t>(t.rank)].tbs[static_cast<size_t>(t.local)].slots[static_cast<size_t>(gs - t.slot_begin)];
        const double first = times.slot_first_us[static_cast<size_t>(gs)];
        if (first < 0) continue;  // never worked (a nop)
        for (int32_t x : s.tasks) {
          auto [it, fresh] = seen.try_emplace(key(x, t.rank), Seen{first, 0, 0});
          it->second.first = std::min(it->second.first, first);
          it->second.last = std::max(it->second.last, times.slot_last_us[static_cast<size_t>(gs)]);
          it->second.busy += times.slot_busy_us[static_cast<size_t>(gs)];
        }
      }
    std::vector<TaskTimes> out(static_cast<size_t>(g_.size()));
    for (int32_t t = 0; t < g_.size(); ++t) {
      const auto origins = g_.origins_of(t);
      if (origins.empty()) continue;
      const Transfer& x = g_.tasks[t].transfer;
      TaskTimes& tt = out[static_cast<size_t>(t)];
      tt.rank = {x.src_rank, x.dst_rank};
      for (size_t end = 0; end < 2; ++end) {
        auto it = seen.find(key(origins[0], tt.rank[end]));
        if (it == seen.end()) continue;
        tt.first_at[end] = it->second.first;
        tt.last_at[end] = it->second.last;
        tt.first = tt.seen ? std::min(tt.first, it->second.first) : it->second.first;
        tt.last = std::max(tt.last, it->second.last);
        tt.work = std::max(tt.work, it->second.busy);
        tt.seen = true;
      }
    }
    return out;
  }

  /// Tasks fused into one primitive (one plan slot names both) form a unit, except where one
  /// crosses the bounding link and the other does not: the other then takes one block and the
  /// two are no longer fused (a fused primitive would tie the bounding link's sends to the
  /// other link's receives on one block).
  void join_fused() {
    std::unordered_map<int32_t, int32_t> task_of;  // transfer -> task
    for (int32_t t = 0; t < g_.size(); ++t)
      for (int32_t x : g_.origins_of(t)) task_of[x] = t;
    for (const RankPlan& rp : ref_.plan.ranks)
      for (const ThreadBlock& tb : rp.tbs)
        for (const Slot& s : tb.slots)
          for (size_t i = 1; i < s.tasks.size(); ++i) {
            auto a = task_of.find(s.tasks[0]), b = task_of.find(s.tasks[i]);
            if (a == task_of.end() || b == task_of.end()) continue;
            if ((g_.tasks[a->second].link == bound_) != (g_.tasks[b->second].link == bound_)) continue;
            uf_.unite(a->second, b->second);
          }
  }

  /// Units of the connection tasks, in program order (their first task's pipeline position),
  /// with their connections and what the run saw of them.
  void make_units() {
    const std::vector<int32_t> order = pipeline_order(g_, ref_.pipeline);
    std::vector<int32_t> by_order(static_cast<size_t>(g_.size()));
    for (int32_t t = 0; t < g_.size(); ++t) by_order[static_cast<size_t>(order[t])] = t;
    std::map<int32_t, int32_t> index;  // root -> unit
    unit_of_.assign(static_cast<size_t>(g_.size()), -1);
    for (int32_t t : by_order) {
      if (g_.tasks[t].link == LinkClass::Local) continue;
      auto [it, fresh] = index.try_emplace(uf_.find(t), static_cast<int32_t>(units_.size()));
      if (fresh) units_.emplace_back();
      Unit& u = units_[static_cast<size_t>(it->second)];
      unit_of_[static_cast<size_t>(t)] = it->second;
      u.tasks.push_back(t);
      u.narrowable = u.narrowable && g_.tasks[t].link != bound_;
      const TaskTimes& tt = tt_[static_cast<size_t>(t)];
      const auto origins = g_.origins_of(t);
      auto ci = origins.empty() ? conn_of_transfer_.end() : conn_of_transfer_.find(origins[0]);
      if (ci == conn_of_transfer_.end() || !tt.seen) {
        u.m = -1;
        continue;
      }
      u.work = std::max(u.work, tt.work);
      u.began = std::min(u.began, tt.first);
      const auto [channel, m] = ci->second;
      const ConnKey c{g_.tasks[t].transfer.src_rank, g_.tasks[t].transfer.dst_rank, channel};
      if (std::find(u.conns.begin(), u.conns.end(), c) == u.conns.end()) u.conns.push_back(c);
      u.m = u.m == 0 || u.m == m ? m : -1;
    }
  }

  /// Per unit, when it may start at the latest on one block (Unit::latest), going back from
  /// the end of the pipeline: a task that is not placed (it crosses the bounding link, is
  /// local, or its blocks are unknown) starts as it did in `fixed` (a run; the reference's
  /// where it is not there), at each end, at that run's pace; a placed one must make each
  /// micro-batch before every task that follows it through a data edge needs it (at that
  /// task's latest start and pace, at the edge's rank). A unit that no such task follows ends
  /// by `horizon` (when > 0), else keeps its start in the reference run.
  void find_latest(const std::vector<TaskTimes>& fixed, double horizon) {
    const std::vector<int32_t> order = pipeline_order(g_, ref_.pipeline);
    std::vector<int32_t> by_order(static_cast<size_t>(g_.size()));
    for (int32_t t = 0; t < g_.size(); ++t) by_order[static_cast<size_t>(order[t])] = t;
    std::vector<std::vector<TaskEdge>> out(static_cast<size_t>(g_.size()));
    for (int32_t t = 0; t < g_.size(); ++t)
      for (const TaskEdge& e : g_.edges_to(t)) out[static_cast<size_t>(e.from)].push_back(e);
    constexpr double kNone = 1e300;
    struct Window {
      std::array<double, 2> start{kNone, kNone};  ///< per end
      std::array<double, 2> pace{0, 0};          ///< per micro-batch, per end
    };
    std::vector<Window> w(static_cast<size_t>(g_.size()));
    for (auto it = by_order.rbegin(); it != by_order.rend(); ++it) {
      const int32_t t = *it;
      const TaskTimes& tt = tt_[static_cast<size_t>(t)];
      if (!tt.seen) continue;
      const int32_t ui = unit_of_[static_cast<size_t>(t)];
      Window& wt = w[static_cast<size_t>(t)];
      if (ui < 0 || !units_[static_cast<size_t>(ui)].narrowable || units_[static_cast<size_t>(ui)].m <= 1) {
        const TaskTimes& ft = fixed[static_cast<size_t>(t)].seen ? fixed[static_cast<size_t>(t)] : tt;
        for (size_t end = 0; end < 2; ++end) {
          const bool at = ft.first_at[end] >= 0;
          wt.start[end] = at ? ft.first_at[end] : ft.first;
          wt.pace[end] = ((at ? ft.last_at[end] : ft.last) - wt.start[end]) / k_;
        }
        continue;
      }
      const double step = units_[static_cast<size_t>(ui)].work / k_;
      double latest = kNone;
      for (const TaskEdge& e : out[static_cast<size_t>(t)]) {
        const Window& ws = w[static_cast<size_t>(e.to)];
        const size_t end = tt_[static_cast<size_t>(e.to)].rank[0] == e.rank ? 0 : 1;
        if (ws.start[end] >= kNone) continue;
        latest = std::min(latest, ws.start[end] - step + std::min(0.0, (k_ - 1) * (ws.pace[end] - step)));
      }
      if (latest >= kNone) latest = horizon > 0 ? horizon - units_[static_cast<size_t>(ui)].work : tt.first;
      wt.start = {latest, latest};
      wt.pace = {step, step};
    }
    for (Unit& u : units_) u.latest = kNone;
    task_latest_.assign(w.size(), kNone);
    for (size_t t = 0; t < w.size(); ++t) {
      const double at = std::min(w[t].start[0], w[t].start[1]);
      task_latest_[t] = at < kNone ? at : (tt_[t].seen ? tt_[t].first : kNone);
    }
    for (size_t t = 0; t < w.size(); ++t)
      if (unit_of_[t] >= 0 && w[t].start[0] < kNone) {
        Unit& u = units_[static_cast<size_t>(unit_of_[t])];
        u.latest = std::min(u.latest, w[t].start[0]);
      }
  }

  /// When what the unit reads (or whose buffer it reuses) has made its first micro-batch and
  /// its last: by this placement for units placed before it, by the run otherwise.
  std::pair<double, double> inputs(const Unit& u) {
    double release = 0, feed = 0;
    for (int32_t t : u.tasks)
      for (const TaskEdge& e : g_.edges_to(t)) {
        if (uf_.find(e.from) == uf_.find(t)) continue;
        const TaskTimes& p = tt_[static_cast<size_t>(e.from)];
        if (!p.seen) continue;
        const int32_t pu = unit_of_[static_cast<size_t>(e.from)];
        const bool placed = pu >= 0 && units_[static_cast<size_t>(pu)].placed;
        release = std::max(release, placed ? units_[static_cast<size_t>(pu)].first : p.first + (p.last - p.first) / k_);
        feed = std::max(feed, placed ? units_[static_cast<size_t>(pu)].end : p.last);
      }
    return {release, feed};
  }

  /// The blocks (both ends) that drive block `lane` of a logical connection of m in the run.
  std::array<int32_t, 2> lane_blocks(const ConnKey& c, int32_t m, int32_t lane) const {
    auto it = ends_.find({std::get<0>(c), std::get<1>(c), std::get<2>(c) * m + lane});
    return it == ends_.end() ? std::array<int32_t, 2>{0, 0} : it->second;
  }

  /// When blocks a .. a+n-1 of all the unit's connections are free.
  double ready(const Unit& u, const std::vector<double>& free, int32_t a, int32_t n) const {
    double at = 0;
    for (const ConnKey& c : u.conns)
      for (int32_t l = a; l < a + n; ++l)
        for (int32_t b : lane_blocks(c, u.m, l)) at = std::max(at, free[static_cast<size_t>(b)]);
    return at;
  }

  /// Places the unit: one block when it may take fewer, all its connection's blocks
  /// otherwise; holds them until it ends. Of its blocks it takes the lowest on which it
  /// starts in time (within a micro-batch of when it began in the run or of when its inputs
  /// now come, or by its latest start) or ends within a micro-batch of the soonest end it
  /// has on any of them (a unit fed at another link's pace ends with its feed).
  void fit(Unit& u, std::vector<double>& free) {
    const auto [release, feed] = inputs(u);
    u.at = {0, u.m};
    if (u.narrowable && u.m > 1) {
      const double step = u.work / k_;
      const double in_time = std::max(std::max(u.began, release) + step, by_latest_ && u.latest < 1e299 ? u.latest : 0.0);
      std::vector<double> start(static_cast<size_t>(u.m)), end(static_cast<size_t>(u.m));
      double soonest = 1e300;
      for (int32_t a = 0; a < u.m; ++a) {
        const size_t i = static_cast<size_t>(a);
        start[i] = std::max(release, ready(u, free, a, 1));
        end[i] = std::max(start[i] + u.work, feed + step);
        soonest = std::min(soonest, end[i]);
      }
      for (int32_t a = 0; a < u.m; ++a)
        if (start[static_cast<size_t>(a)] <= in_time || end[static_cast<size_t>(a)] <= soonest + step) {
          u.at = {a, 1};
          break;
        }
    }
    const int32_t n = u.at.count;
    const double start = std::max(release, ready(u, free, u.at.first, n));
    const double step = u.work / (n * static_cast<double>(k_));  // one micro-batch on n blocks
    u.first = start + step;
    u.end = std::max(start + u.work / n, feed + step);
    u.placed = true;
    for (const ConnKey& c : u.conns)
      for (int32_t l = u.at.first; l < u.at.first + n; ++l)
        for (int32_t b : lane_blocks(c, u.m, l)) free[static_cast<size_t>(b)] = u.end;
  }

  std::vector<double> task_latest_;  ///< per task, its latest start by the last find_latest (or its start there)
  const CompileResult& ref_;
  const TaskGraph& g_;
  const int32_t ranks_;
  const int32_t k_;
  const LinkClass bound_;  ///< ops on this link class keep all their blocks
  UnionFind uf_;
  std::vector<TaskTimes> tt_;
  std::vector<Unit> units_;
  std::vector<int32_t> unit_of_;  ///< per task, its unit (-1: local)
  bool by_latest_ = true;         ///< a unit may start as late as its latest start
  std::unordered_map<int32_t, std::pair<int32_t, int32_t>> conn_of_transfer_;  ///< transfer -> (logical channel, blocks)
  std::map<ConnKey, std::array<int32_t, 2>> ends_;  ///< physical connection -> its two blocks (global ids)
  int32_t blocks_ = 0;
};

OpPlacer::OpPlacer(const CompileResult& reference, const Topology& topo, const Simulator& sim, const SimReport& times) {
  if (reference.plan.execution == ExecutionModel::Task && reference.graph.size() > 0 && !times.slot_first_us.empty())
    impl_ = std::make_unique<Impl>(reference, topo, sim, times);
}
OpPlacer::~OpPlacer() = default;

std::vector<OpBlocks> OpPlacer::place(size_t transfers, bool by_latest) {
  return impl_ ? impl_->place(transfers, by_latest) : std::vector<OpBlocks>{};
}

OpPlacer::Chains OpPlacer::order_chains(const Algorithm& algo, const std::vector<OpBlocks>& placed) const {
  return impl_ ? impl_->order_chains(algo, placed) : Chains{};
}

void OpPlacer::refine(const Plan& placed, const Simulator& sim, const SimReport& times) {
  if (impl_ && !times.slot_first_us.empty()) impl_->refine(placed, sim, times);
}

}  // namespace weft::sim
