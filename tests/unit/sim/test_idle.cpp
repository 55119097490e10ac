// Thread-block idle on paper 001's topologies (docs/scheduling.md, "Idle"), checked on
// simulated figures only (regression tests of the simulator, not of GPU speed):
//   - paced instances (CompileOptions::pace): NVLink work fed by the network runs on fewer
//     blocks, the connection's other blocks end early; the plans move the right data on the
//     CPU emulator, and nothing changes in one node;
//   - ops placed on fewer of their connection's blocks (CompileOptions::op_blocks, chosen by
//     sim::OpPlacer from the simulated timeline): the plans move the right data on the CPU
//     emulator, nothing is placed in one node, out-of-range entries are refused, and placed by
//     latest start the block that goes on takes the ops the NIC needs last;
//   - the tuner's idle bound (TuneOptions::max_idle) and its default idle rule
//     (TuneOptions::idle_cost): the figures of HM AllReduce and AllGather on a100-2x4 and
//     a100-4x8 at 256 MiB against the 15% of the target, within the scheduler's own
//     plan's blocks and within twice as many.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "exec/plan_check.hpp"
#include "exec/plan_lowering.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "sim/autotune.hpp"
#include "sim/op_blocks.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {
namespace {

constexpr uint64_t k256M = uint64_t{256} << 20;

SimReport run(const Plan& p, const Topology& t, uint64_t bytes) {
  SimOptions o;
  o.bytes = bytes;
  return simulate(p, t, o);
}

Plan compiled(const char* algo, const Topology& t, double pace, const char* allocator = "state") {
  const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
  CompileOptions c;
  c.pace = pace;
  c.allocator = allocator;
  return compile(a, t, c).plan;
}

/// Slots of `p` whose instance count is below the largest one on their connection (rank,
/// peer, direction and channel / instances of the widest): the NIC-fed ones when paced.
int32_t narrower_slots(const Plan& p) {
  std::map<std::tuple<int32_t, int32_t, bool>, int32_t> widest;  // (rank, peer, sends) -> instances
  for (size_t r = 0; r < p.ranks.size(); ++r)
    for (const ThreadBlock& tb : p.ranks[r].tbs)
      for (const Slot& s : tb.slots) {
        if (s.send_peer >= 0) widest[{static_cast<int32_t>(r), s.send_peer, true}] = std::max(widest[{static_cast<int32_t>(r), s.send_peer, true}], s.instances);
        if (s.recv_peer >= 0) widest[{static_cast<int32_t>(r), s.recv_peer, false}] = std::max(widest[{static_cast<int32_t>(r), s.recv_peer, false}], s.instances);
      }
  int32_t n = 0;
  for (size_t r = 0; r < p.ranks.size(); ++r)
    for (const ThreadBlock& tb : p.ranks[r].tbs)
      for (const Slot& s : tb.slots)
        if (s.send_peer >= 0 && s.instances < widest[{static_cast<int32_t>(r), s.send_peer, true}]) ++n;
  return n;
}

/// The plan verifies lane by lane (replay through the symbolic verifier: every dependency
/// between instances of different counts is there) and runs right on the CPU emulator.
void expect_correct(const Plan& p) {
  try {
    for (int32_t lane = 0; lane < plan_lanes(p); ++lane) {
      const VerifyResult v = verify(replay_plan(p, lane));
      EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
    }
    check_plan_on_emulator(lower_plan(p, p.num_ranks, 32), 4);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

TEST(Pace, NicFedNvlinkWorkTakesFewerBlocksAndTheOthersEndEarly) {
  // HM AllGather over 4 servers of 8: an NVLink connection carries the GPU's own chunk and
  // three that came through the NIC; derived, it has 2 blocks, which wait for the NIC 45% of
  // the time. Paced, the NIC-fed chunks take one block, the second block moves half of the
  // GPU's own chunk and ends (docs/scheduling.md, "Idle").
  const Topology t = topology_preset("a100-4x8");
  const Plan plain = compiled("hm_allgather", t, 0), paced = compiled("hm_allgather", t, 1);
  EXPECT_EQ(narrower_slots(plain), 0);
  EXPECT_EQ(narrower_slots(paced), 32 * 7 * 3);  // every rank, 7 local peers, 3 NIC-fed chunks
  EXPECT_EQ(paced.max_tbs_per_rank(), plain.max_tbs_per_rank());
  const SimReport a = run(plain, t, k256M), b = run(paced, t, k256M);
  EXPECT_GT(a.tb_idle_mean, 0.35);
  EXPECT_LT(b.tb_idle_mean, 0.05);
  EXPECT_LE(b.time_us, a.time_us * 1.02);  // the last micro-batch forwarded by one block, not two
  int32_t short_lived = 0;
  for (const TbStat& s : b.tbs)
    if (s.rank == 0 && s.lifetime_us < 0.2 * b.time_us) short_lived += s.weight;
  EXPECT_EQ(short_lived, 14);  // rank 0's second block of each NVLink connection end
}

TEST(Pace, PacedPlansVerifyAndMoveTheRightDataOnTheEmulator) {
  const Topology t = topology_preset("a100-4x4");
  for (const char* algo : {"hm_allgather", "hm_allreduce"})
    for (const char* alloc : {"state", "conn", "peer", "peer-mixed"})
      for (double pace : {0.5, 1.0, 1.5}) {
        SCOPED_TRACE(std::string(algo) + " " + alloc + " pace " + std::to_string(pace));
        expect_correct(compiled(algo, t, pace, alloc));
      }
  // At least one of them is paced (the emulator saw instances of two counts on a connection).
  EXPECT_GT(narrower_slots(compiled("hm_allgather", t, 1)), 0);
}

TEST(Pace, ChangesNothingInOneNode) {
  const Topology t = topology_preset("h200-1x8");
  for (const char* algo : {"hm_allreduce", "ring_allgather", "allpairs_allreduce"})
    EXPECT_EQ(plan_to_json(compiled(algo, t, 1)), plan_to_json(compiled(algo, t, 0))) << algo;
}

/// CompileOptions::op_blocks as sim::OpPlacer chooses them from a run of `algo` compiled with
/// `c` at `bytes`.
std::vector<OpBlocks> placed_blocks(const Algorithm& a, const Topology& t, const CompileOptions& c, uint64_t bytes) {
  const CompileResult ref = compile(a, t, c);
  SimOptions so;
  so.bytes = bytes;
  so.slot_times = true;
  const Simulator sim(ref.plan, t, false);
  return OpPlacer(ref, t, sim, sim.run(so)).place(a.transfers.size());
}

/// Sending slots of `placed` that run on a block of their connection past the first ones:
/// their channel is not the one their op's instance 0 has in `plain` (the same compilation
/// without op_blocks) plus their instance.
int32_t placed_past_first(const Plan& placed, const Plan& plain) {
  std::map<std::tuple<int32_t, int32_t, int32_t>, int32_t> first_channel;  // (rank, peer, transfer) -> channel
  for (size_t r = 0; r < plain.ranks.size(); ++r)
    for (const ThreadBlock& tb : plain.ranks[r].tbs)
      for (const Slot& s : tb.slots)
        if (s.send_peer >= 0 && s.instance == 0 && !s.tasks.empty())
          first_channel[{static_cast<int32_t>(r), s.send_peer, s.tasks[0]}] = s.channel;
  int32_t n = 0;
  for (size_t r = 0; r < placed.ranks.size(); ++r)
    for (const ThreadBlock& tb : placed.ranks[r].tbs)
      for (const Slot& s : tb.slots) {
        if (s.send_peer < 0 || s.tasks.empty()) continue;
        auto it = first_channel.find({static_cast<int32_t>(r), s.send_peer, s.tasks[0]});
        if (it != first_channel.end() && s.channel != it->second + s.instance) ++n;
      }
  return n;
}

TEST(OpBlocks, PlacedPlansVerifyAndMoveTheRightDataOnTheEmulator) {
  // HM AllReduce and AllGather, each allocator: the placement the tuner would try (over 2
  // servers of 4, at 256 MiB), and a hand-made one on 4 blocks per NVLink connection that puts
  // ops on blocks 1-2 and 3 (every intra-node transfer alike, over 4 servers of 4), with the
  // replay's symbolic check lane by lane and the CPU emulator.
  for (const char* algo : {"hm_allgather", "hm_allreduce"}) {
    int32_t side_by_side = 0;  // placed ops past their connection's first block, all allocators
    for (const char* alloc : {"state", "conn", "peer", "peer-mixed"}) {
      SCOPED_TRACE(std::string(algo) + " " + alloc);
      const Topology t2 = topology_preset("a100-2x4");
      const Algorithm a2 = load_algorithm(algo, params_for_topology(t2, {}));
      CompileOptions c;
      c.allocator = alloc;
      const Plan plain2 = compile(a2, t2, c).plan;
      c.op_blocks = placed_blocks(a2, t2, c, k256M);
      ASSERT_FALSE(c.op_blocks.empty());
      const Plan placed = compile(a2, t2, c).plan;
      side_by_side += placed_past_first(placed, plain2);
      expect_correct(placed);
      const Topology t4 = topology_preset("a100-4x4");
      const Algorithm a4 = load_algorithm(algo, params_for_topology(t4, {}));
      c.scale_intra = 2;
      c.op_blocks.clear();
      const Plan plain4 = compile(a4, t4, c).plan;
      c.op_blocks.assign(a4.transfers.size(), OpBlocks{});
      for (size_t i = 0; i < a4.transfers.size(); ++i)
        if (a4.transfers[i].src_rank != a4.transfers[i].dst_rank && t4.same_node(a4.transfers[i].src_rank, a4.transfers[i].dst_rank))
          c.op_blocks[i] = i % 2 ? OpBlocks{1, 2} : OpBlocks{3, 1};
      const Plan hand = compile(a4, t4, c).plan;
      EXPECT_GT(placed_past_first(hand, plain4), 0);
      expect_correct(hand);
    }
    EXPECT_GT(side_by_side, 0) << algo;
  }
}

/// Blocks of rank 0 of `p` that run one slot.
int32_t single_op_blocks(const Plan& p) {
  int32_t n = 0;
  for (const ThreadBlock& tb : p.ranks[0].tbs) n += tb.slots.size() == 1;
  return n;
}

TEST(OpBlocks, ByLatestStartTheBlockThatGoesOnTakesTheOpsTheNicNeedsLast) {
  // HM AllReduce over 4 servers of 8: each NVLink connection carries 4 reduce-scatter chunks
  // for 2 blocks; the NIC needs two of them at once, the third one NIC step later, the fourth
  // two. Placed by when they began in the run of the unplaced plan (all four back to back),
  // they alternate over the two blocks; by latest start (from the NIC's times in that run,
  // then in the placed plan's run), the block that goes on to the all-gather takes the
  // first, third and fourth and the other block ends after one (docs/scheduling.md, "Idle").
  const Topology t = topology_preset("a100-4x8");
  const Algorithm a = load_algorithm("hm_allreduce", params_for_topology(t, {}));
  const CompileResult ref = compile(a, t, CompileOptions{});
  SimOptions so;
  so.bytes = k256M;
  so.slot_times = true;
  const Simulator sim(ref.plan, t, false);
  OpPlacer placer(ref, t, sim, sim.run(so));
  auto placed = [&](const std::vector<OpBlocks>& ob) {
    CompileOptions c;
    c.op_blocks = ob;
    return compile(a, t, c).plan;
  };
  const Plan began = placed(placer.place(a.transfers.size(), false));
  Plan latest = placed(placer.place(a.transfers.size(), true));
  for (int32_t pass = 0; pass < 2; ++pass) {  // as the tuner does (autotune.cpp, placement)
    const Simulator s(latest, t, false);
    placer.refine(latest, s, s.run(so));
    latest = placed(placer.place(a.transfers.size(), true));
  }
  EXPECT_LT(single_op_blocks(began), 14);
  EXPECT_EQ(single_op_blocks(latest), 14);  // one per NVLink connection end of rank 0
  const SimReport rb = run(began, t, k256M), rl = run(latest, t, k256M);
  EXPECT_LE(rl.time_us, rb.time_us * (1 + 1e-9));
  EXPECT_LT(rl.tb_idle_mean, rb.tb_idle_mean - 0.02);
  EXPECT_EQ(latest.max_tbs_per_rank(), ref.plan.max_tbs_per_rank());
  expect_correct(latest);
}

TEST(OpBlocks, OutOfRangeEntriesAreRefused) {
  const Topology t = topology_preset("a100-2x4");
  const Algorithm a = load_algorithm("hm_allgather", params_for_topology(t, {}));
  for (const OpBlocks bad : {OpBlocks{-1, 1}, OpBlocks{0, -1}, OpBlocks{65, 1}, OpBlocks{0, 65}}) {
    CompileOptions c;
    c.op_blocks.assign(a.transfers.size(), OpBlocks{});
    c.op_blocks[3] = bad;
    try {
      compile(a, t, c);
      ADD_FAILURE() << "op_blocks[3] = {" << bad.first << ", " << bad.count << "} was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("op_blocks[3]"), std::string::npos) << e.what();
    }
  }
}

TEST(OpBlocks, NothingIsPlacedInOneNodeAndTheTunerChoosesAsBefore) {
  // In one node NVLink bounds the call and every op crosses it: nothing is placed, no placed
  // or paced variant is tried, and the idle rule does not apply (the plan is the one taken
  // with it off).
  const Topology t = topology_preset("h200-1x8");
  for (const char* algo : {"hm_allreduce", "allpairs_allreduce", "ring_allgather"}) {
    SCOPED_TRACE(algo);
    const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
    EXPECT_TRUE(placed_blocks(a, t, CompileOptions{}, 64u << 20).empty());
    TuneOptions o;
    o.bytes = 64u << 20;
    const TuneResult r = autotune(a, t, CompileOptions{}, o);
    for (const TuneTrial& tr : r.trials) EXPECT_TRUE(!tr.placed && tr.pace == 0) << tr.label;
    o.idle_cost = 0;
    EXPECT_EQ(plan_to_json(autotune(a, t, CompileOptions{}, o).result.plan), plan_to_json(r.result.plan));
  }
}

/// The tuner's choice at 256 MiB with an idle bound of 15%, against its fastest variant.
struct Bounded {
  Plan plan;
  SimReport chosen;
  double fastest_us = 0;
  std::string reason;
};

Bounded tuned_within_idle(const char* algo, const char* topo, double max_idle, int32_t max_tbs = 0) {
  const Topology t = topology_preset(topo);
  const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
  TuneOptions o;
  o.bytes = k256M;
  o.max_idle = max_idle;
  o.max_tbs = max_tbs;
  const TuneResult r = autotune(a, t, CompileOptions{}, o);
  Bounded b{r.result.plan, run(r.result.plan, t, k256M), 1e300, r.reason};
  for (const TuneTrial& tr : r.trials)
    if (tr.error.empty()) b.fastest_us = std::min(b.fastest_us, tr.time_us);
  return b;
}

/// The four cases of issue 30's idle target: mean idle at most `idle` (simulated, 256 MiB)
/// at a time at most `cost` over the fastest variant's, as measured when this was written
/// (docs/scheduling.md, "Idle").
struct IdleCase {
  const char* algo;
  const char* topo;
  double idle;  ///< mean idle at most
  double cost;  ///< time over the fastest variant's, at most
};

TEST(Autotune, DefaultIdleWithinFifteenPercentOnThePapersTopologies) {
  // Issue 30's target: mean thread-block idle at most 15% (paper 001 Table 3: 1.7-15%), by
  // default. HM AllGather over 2 servers meets it fastest; over 4 servers the default idle
  // rule takes the paced variant (1.7% slower: the NIC's last micro-batch is forwarded by one
  // block); HM AllReduce over 2 servers the variant whose ops are placed on fewer blocks (1.3%
  // slower). HM AllReduce over 4 servers: its placed variant with the reduce chains in
  // another order per chunk, 4,571 us as the placed one (7.9% faster than the default before
  // placement, 4,961 us) at 13.7% idle (17.0% placed, 42.8% before placement), its second
  // block of each NVLink connection end ending after one reduce-scatter op, now one early in
  // its chain (docs/scheduling.md, "Idle").
  for (const IdleCase& c : {IdleCase{"hm_allgather", "a100-2x4", 0.125, 0.0}, IdleCase{"hm_allgather", "a100-4x8", 0.029, 0.017},
                            IdleCase{"hm_allreduce", "a100-2x4", 0.121, 0.014}, IdleCase{"hm_allreduce", "a100-4x8", 0.137, 0.0}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Bounded b = tuned_within_idle(c.algo, c.topo, 1.0);
    EXPECT_LE(b.chosen.tb_idle_mean, c.idle + 5e-3) << b.reason;
    EXPECT_LE(b.chosen.tb_idle_mean, kDefaultMaxIdle) << b.reason;
    EXPECT_LE(b.chosen.time_us, b.fastest_us * (1 + c.cost + 1e-3)) << b.reason;
    EXPECT_LE(b.chosen.tbs_per_rank_max, std::string(c.topo) == "a100-2x4" ? 16 : 32);
    if (std::string(c.algo) == "hm_allreduce" && std::string(c.topo) == "a100-4x8") {
      EXPECT_LE(b.chosen.time_us, 4571.0 * (1 + 1e-3)) << b.reason;  // not slower than placed without it
      EXPECT_EQ(single_op_blocks(b.plan), 14) << b.reason;
      EXPECT_NE(b.reason.find("reduce chains reordered"), std::string::npos) << b.reason;
    }
    if (b.plan.num_ranks <= 8) expect_correct(b.plan);  // the placed plan taken moves the right data
  }
}

TEST(OpBlocks, ReduceChainsInAnotherOrderReachTheBlocksThatEndEarlyFirst) {
  // HM AllReduce over 4 servers of 8, placed by latest start as the tuner does: each NVLink
  // connection end into a rank has one block that ends after one reduce-scatter op, and all
  // seven take the same chunk, at positions 0 to 6 of its chain (the one the algorithm
  // wrote for every chunk), the late ones waiting from the launch. OpPlacer::order_chains
  // deals them over the two chunks the NIC needs at once and runs each chain's lone ops
  // first: positions 0, 0, 1, 1, 2, 2 and 3. Idle goes from 17.0% to 13.7% with the same
  // 32 blocks in the same 4,571 us; the plan replays right lane by lane and on the emulator.
  const Topology t = topology_preset("a100-4x8");
  const Algorithm a = load_algorithm("hm_allreduce", params_for_topology(t, {}));
  const CompileResult ref = compile(a, t, CompileOptions{});
  SimOptions so;
  so.bytes = k256M;
  so.slot_times = true;
  const Simulator sim(ref.plan, t, false);
  OpPlacer placer(ref, t, sim, sim.run(so));
  auto placed = [&](const std::vector<OpBlocks>& ob) {
    CompileOptions c;
    c.op_blocks = ob;
    return compile(a, t, c).plan;
  };
  // As the tuner does (autotune.cpp, placement): by latest start, again from the run of the
  // plan placed so, and order_chains from the run of the plan it takes.
  std::vector<OpBlocks> ob = placer.place(a.transfers.size(), true);
  Plan latest;
  for (int32_t pass = 0; pass < 2; ++pass) {
    latest = placed(ob);
    const Simulator s(latest, t, false);
    placer.refine(latest, s, s.run(so));
    if (pass == 0) ob = placer.place(a.transfers.size(), true);
  }
  const OpPlacer::Chains ch = placer.order_chains(a, ob);
  ASSERT_FALSE(ch.op_blocks.empty());
  // The lone op of each NVLink connection into rank 0: the reduce-scatter op on a block no
  // other op of its connection takes; its position in its chain is its key.
  std::map<int32_t, std::map<int32_t, std::vector<size_t>>> by_lane;  // src -> block -> transfers
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    const Transfer& x = a.transfers[i];
    if (x.dst_rank == 0 && x.src_rank != 0 && t.same_node(x.src_rank, 0)) by_lane[x.src_rank][ch.op_blocks[i].first].push_back(i);
  }
  std::vector<double> positions;
  for (const auto& [src, lanes] : by_lane)
    for (const auto& [block, xs] : lanes)
      if (xs.size() == 1) positions.push_back(ch.chain_keys[xs[0]]);
  std::sort(positions.begin(), positions.end());
  EXPECT_EQ(positions, (std::vector<double>{0, 0, 1, 1, 2, 2, 3}));
  CompileOptions c;
  c.op_blocks = ch.op_blocks;
  c.chain_keys = ch.chain_keys;
  c.op_order = ch.op_order;
  const Plan chains = compile(a, t, c).plan;
  const SimReport rl = run(latest, t, k256M), rc = run(chains, t, k256M);
  EXPECT_LE(rc.time_us, rl.time_us * (1 + 1e-9));
  EXPECT_LE(rc.time_us, 4571.0 * (1 + 1e-3));
  EXPECT_LE(rc.tb_idle_mean, 0.15);
  EXPECT_LT(rc.tb_idle_mean, rl.tb_idle_mean - 0.03);
  EXPECT_EQ(chains.max_tbs_per_rank(), ref.plan.max_tbs_per_rank());
  EXPECT_EQ(single_op_blocks(chains), 14);
  expect_correct(chains);
}

TEST(Autotune, TheIdleRuleTradesAtMostItsCostAndIsOffAtZero) {
  // HM AllReduce over 2 servers: the default takes the placed plan (12.1% idle, 1.3% slower
  // than the fastest); idle_cost 0 takes the fastest (18.0%); idle_cost 0.01 finds no variant
  // within 1% whose blocks idle at most 15%, and says so.
  const Topology t = topology_preset("a100-2x4");
  const Algorithm a = load_algorithm("hm_allreduce", params_for_topology(t, {}));
  TuneOptions o;
  o.bytes = k256M;
  auto taken = [&](double cost) {
    o.idle_cost = cost;
    const TuneResult r = autotune(a, t, CompileOptions{}, o);
    return std::make_pair(r.trials[r.chosen], r.reason);
  };
  const auto [def, def_why] = taken(0.02);
  const auto [off, off_why] = taken(0);
  const auto [tight, tight_why] = taken(0.01);
  EXPECT_TRUE(def.placed) << def_why;
  EXPECT_LE(def.tb_idle_mean, kDefaultMaxIdle);
  EXPECT_LE(def.time_us, off.time_us * 1.02);
  EXPECT_GT(def.time_us, off.time_us);
  EXPECT_GT(off.tb_idle_mean, kDefaultMaxIdle);
  EXPECT_EQ(tight.time_us, off.time_us);
  EXPECT_NE(tight_why.find("no variant within 1% of it has blocks idle at most 15%"), std::string::npos) << tight_why;
}

TEST(Autotune, IdleWithinFifteenPercentOnThePapersTopologies) {
  // With max_idle 0.15 the tuner takes the fastest variant whose blocks idle at most that, at
  // any cost: the same plans as the default's (HM AllReduce over 2 servers paced on 16 blocks,
  // as the fastest under the bound before placement, cost 18%; on a100-4x8 the placed plan
  // with its reduce chains in another order, 13.7%, at no cost).
  for (const IdleCase& c : {IdleCase{"hm_allgather", "a100-2x4", 0.125, 0.0}, IdleCase{"hm_allgather", "a100-4x8", 0.029, 0.017},
                            IdleCase{"hm_allreduce", "a100-2x4", 0.121, 0.014}, IdleCase{"hm_allreduce", "a100-4x8", 0.137, 0.0}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Bounded b = tuned_within_idle(c.algo, c.topo, 0.15);
    EXPECT_LE(b.chosen.tb_idle_mean, c.idle + 5e-3) << b.reason;
    EXPECT_LE(b.chosen.time_us, b.fastest_us * (1 + c.cost + 1e-3)) << b.reason;
    if (c.idle <= 0.15) EXPECT_LE(b.chosen.tb_idle_mean, 0.15) << b.reason;
    else EXPECT_NE(b.reason.find("so all competed"), std::string::npos) << b.reason;
  }
}

TEST(Autotune, IdleWithinFifteenPercentAtNoCostWithTwiceTheBlocks) {
  // With twice the scheduler's own plan's blocks per rank as the budget, the fastest variants
  // are plans whose extra blocks mostly wait; paced, those blocks end early, and the idle
  // bound takes a paced plan faster than the default choice (HM AllReduce on a100-2x4, 28
  // blocks, 12 of them ending early: 6.4% idle, 5,797 us against 5,875) or as fast (on
  // a100-4x8, 60 blocks: 4,567 us against 4,571, 12.6% idle). HM AllGather stays at the
  // default's plan.
  struct Case {
    const char* algo;
    const char* topo;
    int32_t budget;
    double cost;  ///< time over the default choice's (own plan's budget), at most
  };
  for (const Case& c : {Case{"hm_allreduce", "a100-2x4", 32, -0.013}, Case{"hm_allreduce", "a100-4x8", 64, 0.0},
                        Case{"hm_allgather", "a100-2x4", 32, 0.0}, Case{"hm_allgather", "a100-4x8", 64, 0.0}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Bounded def = tuned_within_idle(c.algo, c.topo, 1.0);
    const Bounded b = tuned_within_idle(c.algo, c.topo, 0.15, c.budget);
    EXPECT_LE(b.chosen.tb_idle_mean, 0.15) << b.reason;
    EXPECT_LE(b.chosen.tbs_per_rank_max, c.budget);
    EXPECT_LE(b.chosen.time_us, def.chosen.time_us * (1 + c.cost + 1e-6)) << b.reason;
    if (b.plan.num_ranks <= 8) expect_correct(b.plan);  // the paced plan taken moves the right data
  }
}

}  // namespace
}  // namespace weft::sim
