#include "sim/autotune.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cmath>
#include <map>
#include <tuple>

#include "compile/deadlock.hpp"
#include "compile/lower.hpp"
#include "compile/merge_blocks.hpp"
#include "util/error.hpp"
#include "sim/op_blocks.hpp"
#include "sim/program.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::sim {
namespace {

struct Classes {
  bool intra = false, inter = false, local = false;
};

Classes classes_of(const Algorithm& algo, const Topology& topo) {
  Classes c;
  for (const Transfer& t : algo.transfers) {
    if (t.src_rank == t.dst_rank) c.local = true;
    else if (topo.same_node(t.src_rank, t.dst_rank)) c.intra = true;
    else c.inter = true;
  }
  return c;
}

/// Whether trial a beats trial b: faster beyond the tolerance, or as fast with fewer blocks.
bool better(const TuneTrial& a, const TuneTrial& b, double tolerance) {
  if (!a.error.empty()) return false;
  if (!b.error.empty()) return true;
  if (a.time_us < b.time_us * (1 - tolerance) - 1e-9) return true;
  if (a.time_us > b.time_us * (1 + tolerance) + 1e-9) return false;
  if (a.tbs != b.tbs) return a.tbs < b.tbs;
  return a.time_us < b.time_us - 1e-9;
}

/// Placements by latest start tried per placed variant (sim::OpPlacer::place): the first from
/// the run of the plan without placement, each next from the run of the plan placed by the
/// one before (sim::OpPlacer::refine).
constexpr int32_t kPlacementPasses = 3;

/// A merged plan may run this much longer than the plan it came from and still be taken.
constexpr double kMergeSlack = 1e-3;

class Search {
 public:
  Search(const Algorithm& algo, const Topology& topo, const CompileOptions& base, const TuneOptions& o)
      : algo_(algo), topo_(topo), base_(base), o_(o) {}

  CompileOptions options_for(const TuneTrial& t, int32_t max_tbs) const {
    CompileOptions c = base_;
    c.execution = t.execution;
    // Step order: at algorithm level a ring runs as one chain per block; with a channel per
    // chunk a fused chain may wait for work that comes later on its ranks.
    if (t.execution == "algorithm" || t.channels == "chunk") c.step_order = true;
    c.channels = t.channels;
    c.aggregate = t.aggregate;
    c.allocator = t.allocator;
    c.spare_blocks = t.spare_blocks;
    c.pace = t.pace;
    c.scale_intra = t.scale_intra, c.scale_inter = t.scale_inter, c.scale_local = t.scale_local;
    c.max_tbs = max_tbs;
    return c;
  }

  SimReport run(const Plan& plan, bool per_block) const {
    SimOptions so = o_.sim;
    so.bytes = o_.bytes;
    so.trace = false;
    return Simulator(plan, topo_, !per_block, base_.max_memory_bytes).run(so);
  }

  /// The plan with the blocks the simulator saw work apart merged, when that is no slower.
  bool merge_on_timeline(CompileResult& r, SimReport& rep, double overlap = 0, bool must_fit = false) const {
    if (r.plan.execution != ExecutionModel::Task) return false;
    SimOptions so = o_.sim;
    so.bytes = o_.bytes;
    so.trace = false;
    so.slot_times = true;
    const Simulator per_block(r.plan, topo_, false, base_.max_memory_bytes);
    const SimReport times = per_block.run(so);
    const Program& prog = per_block.program();
    std::vector<std::vector<std::vector<SlotActivity>>> activity(r.plan.ranks.size());
    for (size_t k = 0; k < r.plan.ranks.size(); ++k) {
      activity[k].resize(r.plan.ranks[k].tbs.size());
      for (size_t tb = 0; tb < r.plan.ranks[k].tbs.size(); ++tb) activity[k][tb].resize(r.plan.ranks[k].tbs[tb].slots.size());
    }
    for (const ProgTb& t : prog.tbs) {
      double prev = 0;  // a slot that never worked (a nop) sits where the one before it ended
      for (int32_t g = t.slot_begin; g < t.slot_end; ++g) {
        const bool worked = times.slot_first_us[g] >= 0;
        const SlotActivity a = worked ? SlotActivity{times.slot_first_us[g], times.slot_last_us[g]} : SlotActivity{prev, prev};
        activity[t.rank][t.local][g - t.slot_begin] = a;
        prev = a.last_us;
      }
    }
    const BlockMerge m = merge_by_activity(activity, -overlap * rep.time_us);
    bool fewer = false;
    for (size_t k = 0; k < m.size(); ++k) fewer = fewer || m[k].size() < r.plan.ranks[k].tbs.size();
    if (!fewer) return false;
    Plan merged = r.plan;
    if (!merge_thread_blocks(merged, m) || !check_deadlock(merged, base_.fifo_depth).ok) return false;
    const SimReport mr = run(merged, false);
    if (must_fit ? merged.max_tbs_per_rank() > budget_ : mr.time_us > rep.time_us * (1 + kMergeSlack)) return false;
    merged.allocator += "+timeline";
    r.plan = std::move(merged);
    rep = mr;
    return true;
  }

  /// The variant's ops placed on fewer blocks by the timeline of its run without that
  /// (OpPlacer); empty when it places none.
  OpPlacer::Chains placement(const TuneTrial& t) const {
    TuneTrial plain = t;
    plain.placed = false;
    plain.chains = false;
    CompileOptions c = options_for(plain, 0);
    const CompileResult ref = compile(algo_, topo_, c);
    SimOptions so = o_.sim;
    so.bytes = o_.bytes;
    so.trace = false;
    so.slot_times = true;
    const Simulator per_block(ref.plan, topo_, false, base_.max_memory_bytes);
    OpPlacer placer(ref, topo_, per_block, per_block.run(so));
    // Placements by when each op began in that run, then by when what follows it needs it,
    // again by the run of the plan placed so (the reference ran every op on all its blocks,
    // so the ops that keep theirs, and the call's end, came at other times there): the best
    // (faster, then less idle) is taken.
    std::vector<OpBlocks> best;
    double best_us = 0, best_idle = 0;
    c.keep_graph = false;
    for (int32_t pass = 0; pass <= kPlacementPasses; ++pass) {
      c.op_blocks = placer.place(algo_.transfers.size(), pass > 0);
      if (c.op_blocks.empty()) continue;
      const CompileResult placed = compile(algo_, topo_, c);
      const Simulator sim(placed.plan, topo_, false, base_.max_memory_bytes);
      const SimReport rep = sim.run(so);
      if (best.empty() || rep.time_us < best_us * (1 - 1e-9) ||
          (rep.time_us <= best_us * (1 + 1e-9) && rep.tb_idle_mean < best_idle - 1e-9))
        best = c.op_blocks, best_us = rep.time_us, best_idle = rep.tb_idle_mean;
      if (pass > 0) placer.refine(placed.plan, sim, rep);
    }
    if (!t.chains || best.empty()) return {best, {}, {}};
    // With chains: the best placement with its reduce chains in another order, the program
    // by latest start from its run.
    c.op_blocks = best;
    const CompileResult placed = compile(algo_, topo_, c);
    const Simulator sim(placed.plan, topo_, false, base_.max_memory_bytes);
    placer.refine(placed.plan, sim, sim.run(so));
    return placer.order_chains(algo_, best);
  }

  /// Compiles, merges and simulates one variant: its plan within the budget, or an error.
  CompileResult build(TuneTrial& t, bool merge = false) const {
    CompileOptions c = options_for(t, 0);
    c.keep_graph = false;
    if (t.placed) {
      OpPlacer::Chains p = placement(t);
      if (p.op_blocks.empty())
        fail(ErrorCode::InvalidArgument, t.chains ? "no reduce chain is reordered" : "no op is placed on fewer blocks");
      c.op_blocks = std::move(p.op_blocks);
      c.chain_keys = std::move(p.chain_keys);
      c.op_order = std::move(p.op_order);
    }
    CompileResult r = compile(algo_, topo_, c);
    if (r.slots > o_.max_slots) {  // too large to tune: taken as compiled, not simulated
      t.tbs = t.tbs_unmerged = r.plan.max_tbs_per_rank();
      t.instances_intra = r.instances_intra, t.instances_inter = r.instances_inter, t.instances_local = r.instances_local;
      return r;
    }
    SimReport rep = run(r.plan, false);
    t.tbs_unmerged = r.plan.max_tbs_per_rank();
    if (merge || (budget_ > 0 && t.tbs_unmerged > budget_)) merge_on_timeline(r, rep);
    // Still over: blocks whose work overlaps a little are merged too (the merged plan may run
    // longer; the search compares it with the others).
    for (double overlap : {0.01, 0.03, 0.1, 0.3, 1.0})
      if (budget_ > 0 && r.plan.max_tbs_per_rank() > budget_) merge_on_timeline(r, rep, overlap, true);
    if (budget_ > 0 && r.plan.max_tbs_per_rank() > budget_)
      fail(ErrorCode::InvalidArgument,
           text::format("%d thread blocks per rank, more than the budget of %d", r.plan.max_tbs_per_rank(), budget_));
    t.instances_intra = r.instances_intra, t.instances_inter = r.instances_inter, t.instances_local = r.instances_local;
    t.tbs = r.plan.max_tbs_per_rank();
    t.time_us = rep.time_us;
    t.busbw_GBps = rep.busbw_GBps;
    t.tb_idle_mean = rep.tb_idle_mean;
    return r;
  }

  /// The seed with every instance scale divided by the smallest power of sqrt(2) (down to
  /// 1/64) that brings its plan within the budget, before any merging; the seed itself when it
  /// fits, or at 1/64 when nothing does (merging may still fit it).
  TuneTrial fit(TuneTrial t) const {
    if (budget_ <= 0) return t;
    const TuneTrial seed = t;
    for (int32_t j = 0; j <= 12; ++j) {
      const double m = std::pow(2.0, -0.5 * j);
      t.scale_intra = std::max(seed.scale_intra * m, 1.0 / 64);
      t.scale_inter = std::max(seed.scale_inter * m, 1.0 / 64);
      t.scale_local = std::max(seed.scale_local * m, 1.0 / 64);
      CompileOptions c = options_for(t, 0);
      c.keep_graph = false;
      try {
        if (compile(algo_, topo_, c).plan.max_tbs_per_rank() <= budget_) return t;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Verify) throw;
      }
    }
    return t;
  }

  /// Compiles and simulates one variant (once per distinct variant); returns its index.
  int32_t trial(TuneTrial t) {
    const auto key = std::make_tuple(t.execution, t.channels, t.aggregate,
                                     t.allocator + "/" + std::to_string(t.spare_blocks) + (t.pace > 0 ? text::format("/paced %g", t.pace) : std::string()) +
                                         (t.placed ? "/placed" : "") + (t.chains ? "/chains" : ""),
                                     t.scale_intra, t.scale_inter, t.scale_local);
    if (auto it = seen_.find(key); it != seen_.end()) return it->second;
    t.label = text::format("%s, %s channels%s, %s%s, instances x%g/x%g/x%g%s%s%s", t.execution.c_str(), t.channels.c_str(),
                           t.aggregate ? "" : ", not aggregated", t.allocator.c_str(),
                           t.spare_blocks > 0 ? text::format(" + %d blocks for local work", t.spare_blocks).c_str() : "",
                           t.scale_intra, t.scale_inter, t.scale_local,
                           t.pace > 0 ? text::format(", NIC-fed work paced x%g", t.pace).c_str() : "",
                           t.placed ? ", ops placed on fewer blocks" : "",
                           t.chains ? ", reduce chains reordered" : "");
    try {
      const CompileResult r = build(t);
      last_slots_ = r.slots;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::InvalidArgument && e.code() != ErrorCode::Verify) throw;
      t.error = e.what();
    }
    trials_.push_back(t);
    const int32_t i = static_cast<int32_t>(trials_.size()) - 1;
    seen_[key] = i;
    return i;
  }

  bool room() const { return static_cast<int32_t>(trials_.size()) < std::min(o_.max_trials, limit_); }
  /// Trials the current descent may reach (a share of max_trials per seed).
  void set_limit(int32_t n) { limit_ = n; }
  int32_t count() const { return static_cast<int32_t>(trials_.size()); }
  const TuneTrial& at(int32_t i) const { return trials_[i]; }
  std::vector<TuneTrial>& trials() { return trials_; }
  int64_t last_slots() const { return last_slots_; }
  int32_t budget() const { return budget_; }
  void set_budget(int32_t b) { budget_ = b; }

 private:
  const Algorithm& algo_;
  const Topology& topo_;
  const CompileOptions& base_;
  const TuneOptions& o_;
  std::vector<TuneTrial> trials_;
  std::map<std::tuple<std::string, std::string, bool, std::string, double, double, double>, int32_t> seen_;
  int64_t last_slots_ = 0;
  int32_t budget_ = 0;  ///< thread blocks per rank a variant may take (0: no limit)
  int32_t limit_ = INT32_MAX;
};

/// Coordinate descent from trial `start` over the classes the algorithm uses.
int32_t descend(Search& s, int32_t start, const Classes& classes, double tolerance) {
  int32_t cur = start;
  // Multiplicative steps (x2, x1.5, x4/3 and back), then one block more or fewer on a class's
  // largest count (step 0), each as long as it improves.
  for (double step : {2.0, 1.5, 4.0 / 3, 0.0}) {
    for (bool improved = true; improved && s.room();) {
      improved = false;
      for (int32_t cls = 0; cls < 3 && s.room(); ++cls) {
        if ((cls == 0 && !classes.intra) || (cls == 1 && !classes.inter) || (cls == 2 && !classes.local)) continue;
        const TuneTrial& at = s.at(cur);
        const int32_t k = cls == 0 ? at.instances_intra : cls == 1 ? at.instances_inter : at.instances_local;
        if (step == 0 && k < 1) continue;
        const double up = step > 0 ? step : (k + 1.0) / k, down = step > 0 ? 1 / step : (k - 1.0) / k;
        for (double f : {up, down}) {
          if (!s.room() || f <= 0) break;
          TuneTrial c = s.at(cur);
          double* sc[3] = {&c.scale_intra, &c.scale_inter, &c.scale_local};
          *sc[cls] = std::clamp(*sc[cls] * f, 1.0 / 64, 64.0);
          c.error.clear();
          const int32_t t = s.trial(c);
          if (better(s.at(t), s.at(cur), tolerance)) {
            cur = t;
            improved = true;
          }
        }
      }
    }
  }
  return cur;
}

/// Trials the rank allocator's seed, and the seed of chunk channels with a peer allocator, may
/// take each (autotune).
constexpr int32_t kRankTrials = 16;

/// Seeds with a fixed share of kRankTrials: few algorithms need them.
bool fixed_share(const TuneTrial& seed) {
  return seed.allocator == "rank" || (seed.channels == "chunk" && seed.allocator.rfind("peer", 0) == 0);
}

/// The seeds of a task-level scheduler's search besides its own shape: algorithm level in
/// step order, chunk channels not aggregated with one instance each, the peer allocators at
/// both levels (peer-mixed only where there is local work to deal), and the rank allocator at
/// algorithm level (last: it has a fixed share of the trials).
std::vector<TuneTrial> seeds_for(const TuneTrial& own, bool local_work) {
  std::vector<TuneTrial> seeds = {own};
  if (own.execution != "task") return seeds;
  TuneTrial alg = own;
  alg.execution = "algorithm";
  seeds.push_back(alg);
  TuneTrial chunks = own;
  chunks.channels = "chunk";
  chunks.aggregate = false;
  chunks.allocator = "conn";
  // A block per chunk and link carries the parallelism already: one instance each, as an
  // MSCCL file's channels have (the search may raise them).
  chunks.scale_intra = chunks.scale_inter = chunks.scale_local = 1.0 / 64;
  seeds.push_back(chunks);
  // A block per peer and chunk channel, as an MSCCL file's block per peer and channel: the
  // chunks a rank sends to a peer and receives from it on one block, its reductions dealt
  // over those blocks (where it has local work), in step order.
  TuneTrial chunk_peers = chunks;
  chunk_peers.execution = "algorithm";
  chunk_peers.aggregate = true;
  chunk_peers.allocator = local_work ? "peer-mixed" : "peer";
  chunk_peers.scale_local = 1;  // derived: the descent's steps from 1/64 would change nothing
  seeds.push_back(chunk_peers);
  for (const char* e : {"task", "algorithm"})
    for (const char* alloc : {"peer", "peer-mixed"}) {
      if (!local_work && std::string(alloc) == "peer-mixed") continue;
      TuneTrial peer = own;
      peer.execution = e;
      peer.allocator = alloc;
      seeds.push_back(peer);
    }
  TuneTrial rank = own;  // a block per instance visits all of the rank's peers in turn
  rank.execution = "algorithm";
  rank.allocator = "rank";
  seeds.push_back(rank);
  return seeds;
}

/// Paced twins tried (autotune) and the trials the descent from the best of them may take.
constexpr int32_t kPacedTwins = 6, kPacedTrials = 12;
/// The loads (CompileOptions::pace) the twins take.
constexpr double kPaceLoads[] = {0.5, 1, 1.5};

/// Across nodes: the fastest task-level variants (state, conn or peer allocators) again with
/// NIC-fed NVLink work on only the blocks that keep pace with the network
/// (CompileOptions::pace), and a descent from the best of those.
void paced_twins(Search& s, const Classes& classes, double tolerance) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < s.count(); ++i) {
    const TuneTrial& t = s.at(i);
    if (t.error.empty() && t.pace == 0 && t.execution == "task" && t.allocator != "rank") order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return s.at(a).time_us < s.at(b).time_us; });
  if (order.size() > static_cast<size_t>(kPacedTwins)) order.resize(kPacedTwins);
  s.set_limit(s.count() + static_cast<int32_t>(order.size() * std::size(kPaceLoads)) + kPacedTrials);
  int32_t best = -1;
  for (int32_t i : order)
    for (double load : kPaceLoads) {
      TuneTrial twin = s.at(i);
      twin.pace = load;
      twin.error.clear();
      const int32_t t = s.trial(twin);
      if (best < 0 || better(s.at(t), s.at(best), tolerance)) best = t;
    }
  if (best >= 0 && s.at(best).error.empty()) descend(s, best, classes, tolerance);
}

/// Variants whose ops are placed on fewer blocks tried (autotune).
constexpr int32_t kPlacedTwins = 6;

/// Across nodes: the scheduler's own shape and the fastest other task-level variants (state,
/// conn or peer allocators, not paced; variants that ran alike, in time, blocks and idle,
/// count once) again with each connection's ops placed on fewer of its blocks by their
/// simulated timeline (CompileOptions::op_blocks, sim/op_blocks.hpp).
void placed_twins(Search& s) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < s.count(); ++i) {
    const TuneTrial& t = s.at(i);
    if (t.error.empty() && t.pace == 0 && !t.placed && t.execution == "task" && t.allocator != "rank") order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return (a == 0) != (b == 0) ? a == 0 : s.at(a).time_us < s.at(b).time_us;
  });
  std::vector<int32_t> twins;
  for (int32_t i : order) {
    const TuneTrial& t = s.at(i);
    bool alike = false;
    for (int32_t j : twins)
      alike = alike || (std::abs(s.at(j).time_us - t.time_us) < 1e-6 && s.at(j).tbs == t.tbs &&
                        std::abs(s.at(j).tb_idle_mean - t.tb_idle_mean) < 1e-9);
    if (!alike && static_cast<int32_t>(twins.size()) < kPlacedTwins) twins.push_back(i);
  }
  s.set_limit(s.count() + 2 * static_cast<int32_t>(twins.size()));
  for (int32_t i : twins) {
    TuneTrial twin = s.at(i);
    twin.placed = true;
    twin.error.clear();
    s.trial(twin);
    // And with its reduce chains in another order per chunk (OpPlacer::order_chains).
    twin.chains = true;
    s.trial(twin);
  }
}

int32_t fastest_of_all(const std::vector<TuneTrial>& ts) {
  int32_t f = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(ts.size()); ++i)
    if (ts[i].error.empty() && (f < 0 || ts[i].time_us < ts[f].time_us)) f = i;
  return f;
}

std::string describe(const TuneResult& out, const std::vector<TuneTrial>& ts, int32_t first) {
  const TuneTrial& c = ts[out.chosen];
  std::string budget = out.max_tbs > 0 ? text::format(", at most %d thread blocks per rank", out.max_tbs) : "";
  std::string merged = c.tbs < c.tbs_unmerged ? text::format("; %d blocks per rank merged into %d on the simulated timeline",
                                                              c.tbs_unmerged, c.tbs)
                                              : "";
  if (out.chosen == first)
    return text::format("the scheduler's own shape with derived instances ran fastest of %zu variants (%.1f us, %d thread "
                        "blocks per rank%s)%s",
                        ts.size(), c.time_us, c.tbs, budget.c_str(), merged.c_str());
  std::string against = ts[first].error.empty()
                            ? text::format("%.1f us and %d blocks per rank for the scheduler's own shape", ts[first].time_us,
                                           ts[first].tbs)
                            : "the scheduler's own shape, which did not fit (" + ts[first].error + ")";
  return text::format("%s ran %.1f us with %d thread blocks per rank, against %s (best of %zu variants%s)%s", c.label.c_str(),
                      c.time_us, c.tbs, against.c_str(), ts.size(), budget.c_str(), merged.c_str());
}

/// The variant taken (sim/autotune.hpp, TuneOptions): the fastest, then the fewest blocks
/// among those within the tolerance of it; with an idle bound, among the variants within it
/// (all of them when none is); by default across nodes, the fastest of those within idle_cost
/// of the fastest whose blocks idle at most kDefaultMaxIdle, when any does. `why` gets what
/// the reason adds; -1 when no variant fits.
int32_t choose(const std::vector<TuneTrial>& ts, const TuneOptions& o, const Topology& topo, std::string& why) {
  bool idle_met = false;
  for (const TuneTrial& t : ts) idle_met = idle_met || (t.error.empty() && t.tb_idle_mean <= o.max_idle + 1e-9);
  auto competes = [&](const TuneTrial& t) { return t.error.empty() && (!idle_met || t.tb_idle_mean <= o.max_idle + 1e-9); };
  // Across nodes, as fast (the same simulated time), the variant whose blocks idle less goes
  // first; in one node the one tried first, as before.
  auto quicker = [&](const TuneTrial& a, const TuneTrial& b) {
    return a.time_us < b.time_us ||
           (topo.nodes > 1 && a.time_us == b.time_us && a.tb_idle_mean < b.tb_idle_mean - 1e-9);
  };
  int32_t fastest = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(ts.size()); ++i)
    if (competes(ts[i]) && (fastest < 0 || quicker(ts[i], ts[fastest]))) fastest = i;
  if (fastest < 0) return -1;
  int32_t chosen = fastest;
  for (int32_t i = 0; i < static_cast<int32_t>(ts.size()); ++i)
    if (competes(ts[i]) && ts[i].time_us <= ts[fastest].time_us * (1 + o.tolerance) + 1e-9 &&
        (ts[i].tbs < ts[chosen].tbs || (ts[i].tbs == ts[chosen].tbs && quicker(ts[i], ts[chosen]))))
      chosen = i;
  if (o.max_idle < 1) {
    why = idle_met ? text::format("; among the variants whose blocks idle at most %.0f%% of their lifetime (the fastest of "
                                  "all: %.1f us)",
                                  100 * o.max_idle, ts[fastest_of_all(ts)].time_us)
                   : text::format("; no variant's blocks idle at most %.0f%% of their lifetime, so all competed",
                                  100 * o.max_idle);
    return chosen;
  }
  // The default idle rule: across nodes, with neither a tolerance nor an idle bound given.
  if (topo.nodes <= 1 || o.tolerance > 0 || o.idle_cost <= 0 || ts[fastest].tb_idle_mean <= kDefaultMaxIdle + 1e-9)
    return chosen;
  int32_t lean = -1;
  for (int32_t i = 0; i < static_cast<int32_t>(ts.size()); ++i)
    if (ts[i].error.empty() && ts[i].tb_idle_mean <= kDefaultMaxIdle + 1e-9 &&
        ts[i].time_us <= ts[fastest].time_us * (1 + o.idle_cost) + 1e-9 && (lean < 0 || ts[i].time_us < ts[lean].time_us))
      lean = i;
  if (lean < 0) {
    why = text::format("; no variant within %.0f%% of it has blocks idle at most %.0f%% of their lifetime (it: %.1f%%)",
                       100 * o.idle_cost, 100 * kDefaultMaxIdle, 100 * ts[fastest].tb_idle_mean);
    return chosen;
  }
  why = text::format("; the fastest of the variants within %.0f%% of the fastest (%.1f us, blocks idle %.1f%% of their "
                     "lifetime) whose blocks idle at most %.0f%%",
                     100 * o.idle_cost, ts[fastest].time_us, 100 * ts[fastest].tb_idle_mean, 100 * kDefaultMaxIdle);
  return lean;
}

}  // namespace

TuneResult autotune(const Algorithm& algo, const Topology& topo, const CompileOptions& base, const TuneOptions& o) {
  if (o.bytes == 0) fail(ErrorCode::InvalidArgument, "automatic instances need the call's size in bytes");
  if (base.instances != 0)
    fail(ErrorCode::InvalidArgument, "automatic instances start from derived instances; instances are given (" +
                                         std::to_string(base.instances) + ")");
  if (!(o.tolerance >= 0 && o.tolerance < 1)) fail(ErrorCode::InvalidArgument, "the tuning tolerance must be in [0, 1)");
  Search s(algo, topo, base, o);
  s.set_budget(std::max(o.max_tbs, 0));
  TuneTrial own;
  own.execution = std::string(to_string(execution_model_of(base)));
  own.channels = base.channels;
  own.aggregate = base.aggregate;
  own.allocator = base.allocator;
  const int32_t first = s.trial(own);
  // By default no variant takes more blocks than the scheduler's own plan.
  if (o.max_tbs == 0 && s.at(first).error.empty()) s.set_budget(s.at(first).tbs_unmerged);
  TuneResult out;
  out.max_tbs = s.budget();
  if (s.last_slots() <= o.max_slots) {
    out.tuned = true;
    const std::vector<TuneTrial> seeds = seeds_for(own, classes_of(algo, topo).local);
    const Classes classes = classes_of(algo, topo);
    // Each seed as it is and, when that is over the budget, scaled down until it fits.
    // Every seed gets an equal share of the trials, so that a long descent from one does not
    // leave the others unexplored; the rank allocator's seed and the chunk-channel peer
    // seed, which few algorithms need, a fixed share of kRankTrials each.
    int32_t ranked = 0;
    for (const TuneTrial& seed : seeds) ranked += fixed_share(seed);
    const int32_t main_seeds = std::max<int32_t>(1, static_cast<int32_t>(seeds.size()) - ranked);
    const int32_t share = std::max<int32_t>(2, (o.max_trials - s.count() - ranked * kRankTrials) / main_seeds);
    for (const TuneTrial& seed : seeds) {
      s.set_limit(s.count() + (fixed_share(seed) ? kRankTrials : share));
      const int32_t at = s.trial(seed);
      int32_t best = descend(s, at, classes, o.tolerance);
      if (!s.at(at).error.empty()) {
        // The seed is over the budget: the descent from it may still have found variants
        // that fit; the one from the seed scaled down to fit competes with them.
        const int32_t fitted = descend(s, s.trial(s.fit(seed)), classes, o.tolerance);
        if (better(s.at(fitted), s.at(best), o.tolerance)) best = fitted;
      }
      // The peer allocator deals local work over its blocks; blocks left in the budget can
      // take a share of it.
      if (seed.allocator.rfind("peer", 0) == 0 && s.budget() > 0 && s.at(best).error.empty() && s.at(best).tbs < s.budget()) {
        TuneTrial spare = s.at(best);
        spare.spare_blocks = s.budget() - spare.tbs;
        spare.error.clear();
        // Mixed: also as many instances of each local operation as the blocks it is dealt
        // over (the communication blocks and the spare ones), so that every block takes a
        // part of each. The steps of the descent rarely land on that count, and one instance
        // more than the blocks puts the local work on blocks of its own; both are run
        // even when the others have used up max_trials.
        int32_t from = -1;
        const TuneTrial& b = s.at(best);
        if (seed.allocator == "peer-mixed" && classes.local && b.instances_local > 0 && b.instances_local < s.budget()) {
          TuneTrial fill = spare;
          fill.scale_local = std::clamp(b.scale_local * s.budget() / b.instances_local, 1.0 / 64, 64.0);
          from = s.trial(fill);
        }
        s.set_limit(s.count() + 12);
        const int32_t plain = s.trial(spare);
        if (from < 0 || better(s.at(plain), s.at(from), o.tolerance)) from = plain;
        descend(s, from, classes, o.tolerance);
      }
    }
    if (topo.nodes > 1) {
      paced_twins(s, classes, o.tolerance);
      placed_twins(s);
    }
    s.set_limit(INT32_MAX);
  }
  const std::vector<TuneTrial>& ts = s.trials();
  std::string why;
  const int32_t chosen = choose(ts, o, topo, why);
  if (chosen < 0)
    fail(ErrorCode::InvalidArgument, text::format("no variant of %s on %s fits: %s", algo.name.c_str(), topo.name.c_str(),
                                                  ts[first].error.c_str()));
  // The chosen variant once more (compilation is deterministic), its blocks merged on the
  // simulated timeline where that is no slower.
  TuneTrial again = ts[chosen];
  out.result = s.build(again, true);
  out.chosen = chosen;
  out.trials = s.trials();
  out.trials[chosen] = again;
  out.reason = out.tuned ? describe(out, out.trials, first)
                         : text::format("the plan has %lld slots, more than the %lld tuned; derived instances as they are",
                                        static_cast<long long>(s.last_slots()), static_cast<long long>(o.max_slots));
  if (out.tuned) out.reason += why;
  return out;
}

}  // namespace weft::sim
