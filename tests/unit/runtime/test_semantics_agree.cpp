// The three codes that execute plans must agree: the compiler's deadlock check
// (compile/deadlock.hpp, exact for a FIFO depth), the runtime's CPU emulator
// (exec/plan_emulator.hpp, which runs a lowered plan on real bytes as the GPU executor
// does) and the simulator's engine (sim/engine.cpp, which times it). For every built-in
// algorithm under every scheduler, both placements and one or two instances, and for the
// published MSCCL files' own schedules, at FIFO depths 1, 2 and 4: the check passes, the
// emulator finishes without deadlock and reproduces the host reference exactly, and the
// simulator finishes with several micro-batches per chunk. A plan the check passes but the
// emulator cannot run would be a hang on a GPU; one whose result differs would be a wrong
// answer; one the simulator cannot finish would be a prediction of nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_import.hpp"
#include "exec/plan_lowering.hpp"
#include "exec/plan_check.hpp"
#include "plan/plan_source.hpp"
#include "util/error.hpp"
#include "plan_runs.hpp"
#include "random_soak.hpp"
#include "xml/xml_test_util.hpp"

namespace weft {
namespace {

/// "" when the emulator runs the plan at `depth` to the host reference; else what failed.
std::string emulate_at(const Plan& p, int depth) {
  try {
    check_plan_on_emulator(lower_plan(p, p.num_ranks, 64), depth);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// "" when the simulator finishes the plan at `depth` with 8 micro-batches per chunk slot;
/// else what failed.
std::string simulate_at(const Plan& p, int depth) {
  try {
    test::PlanRun r = test::simulate_plan(p, depth, 8, 4096);
    if (r.deadlock) return r.error;
    if (!(r.time_us > 0)) return "the simulator reports no time";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SemanticsAgree, CompiledBuiltinsUnderEveryScheduler) {
  int cases = 0;
  for (const std::string& name : builtin_algorithm_names())
    for (int R : {2, 3, 4})
      for (const char* sched : {"hpds", "rr", "gc3", "algo", "stage"})
        for (bool in_place : {false, true})
          for (int instances : {1, 2}) {
            ParamMap params{{"nRanks", std::to_string(R)}};
            if (name.rfind("hm_", 0) == 0 || name == "alltoall_twostep" || name == "alltonext")
              params["GPUPerNode"] = std::to_string(R);
            Algorithm a = load_algorithm(name, params);
            Topology topo = topology_preset("h200-1x8");
            topo.gpus_per_node = R;
            topo.name = "h200-1x" + std::to_string(R);
            CompileOptions o;
            o.scheduler = sched;
            o.in_place = in_place;
            o.instances = instances;
            o.fifo_depth = 1;
            Plan p = compile(a, topo, o).plan;
            for (int depth : {1, 2, 4}) {
              SCOPED_TRACE(name + " R=" + std::to_string(R) + " " + sched + (in_place ? " in place" : " out of place") +
                           " instances=" + std::to_string(instances) + " depth=" + std::to_string(depth));
              DeadlockReport d = check_deadlock(p, depth);
              EXPECT_TRUE(d.ok) << d.message;
              EXPECT_EQ(emulate_at(p, depth), "");
              EXPECT_EQ(simulate_at(p, depth), "");
              ++cases;
            }
          }
  EXPECT_GE(cases, 2000);
}

// The MSCCL files of `dir` on their own schedules (thread blocks, steps, dependencies as
// MSCCL runs them) pass the check from depth 1 and run correctly on the runtime's emulator
// and the simulator; a file named in `depth1_deadlocks` deadlocks at depth 1 instead, and
// all three say so. Returns the number of files.
int expect_msccl_schedules_agree(const std::string& dir, const std::vector<std::string>& depth1_deadlocks = {}) {
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".xml") continue;
    const std::string name = f.path().filename().string();
    MscclImport im = import_msccl_file(f.path().string());
    for (int depth : {1, 2, 4}) {
      SCOPED_TRACE(name + " depth=" + std::to_string(depth));
      DeadlockReport d = check_deadlock(im.as_given, depth);
      if (depth == 1 && std::count(depth1_deadlocks.begin(), depth1_deadlocks.end(), name)) {
        EXPECT_FALSE(d.ok);
        EXPECT_TRUE(test::emulate_plan(im.as_given, depth, 256).deadlock);
        EXPECT_TRUE(test::simulate_plan(im.as_given, depth, 8, 4096).deadlock);
        continue;
      }
      EXPECT_TRUE(d.ok) << d.message;
      EXPECT_EQ(emulate_at(im.as_given, depth), "");
      EXPECT_EQ(simulate_at(im.as_given, depth), "");
    }
    ++files;
  }
  return files;
}

TEST(SemanticsAgree, PublishedMscclSchedulesAsGiven) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
  EXPECT_EQ(expect_msccl_schedules_agree(dir), 14);
}

TEST(SemanticsAgree, OwnMscclSchedulesAsGiven) {
  // tests/data/msccl: hand-written files and weft's exports of built-ins.
  // The hand-written ring forwards with rrs before it drains its first receive: with one
  // staging slot per connection every gpu waits for the next one.
  EXPECT_EQ(expect_msccl_schedules_agree(test::own_msccl_dir() + "/hand", {"ring_allreduce_2ch.xml"}), 8);
  EXPECT_EQ(expect_msccl_schedules_agree(test::own_msccl_dir() + "/exported"), 8);
}

/// A random plan of 2 or 3 ranks, 1 or 2 thread blocks per rank, 0 to 2 connections per
/// ordered pair with 1 or 2 instances each, carrying 1 to 3 messages of 1 or 2 chunks, in a
/// random order on each thread block (each connection's messages in order at both ends),
/// with local copies and reductions, receives that reduce, random dependencies on other
/// thread blocks' slots of the same rank, and some receive-then-send pairs fused into rcs,
/// rrcs or rrs, under either execution model. Most such plans
/// deadlock at some depth; the point is that all three codes say so of the same ones.
Plan random_plan(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Plan p;
  p.algorithm = "random";
  p.collective = Collective::Custom;
  p.num_ranks = pick(2, 3);
  p.input_chunks = p.output_chunks = 2;
  p.execution = pick(0, 1) ? ExecutionModel::Task : ExecutionModel::Algorithm;
  const int R = p.num_ranks;
  std::vector<int> tbs(R);
  p.ranks.resize(R);
  for (int r = 0; r < R; ++r) {
    p.ranks[r].rank = r;
    tbs[r] = pick(1, 2);
    p.ranks[r].tbs.resize(tbs[r]);
  }
  // Per thread block, the operations it must do. A connection (logical channel c, 0 or 1)
  // has 1 or 2 instances, each its own channel 2c + i with its own thread block at each end,
  // carrying the same messages of 1 or 2 chunks; `local` marks a copy or reduction.
  struct Op {
    int src = 0, dst = 0, channel = 0, count = 1, instance = 0, instances = 1;
    bool send = false, local = false;
  };
  std::vector<std::vector<std::vector<Op>>> ops(R);
  for (int r = 0; r < R; ++r) ops[r].resize(tbs[r]);
  for (int a = 0; a < R; ++a)
    for (int b = 0; b < R; ++b) {
      if (a == b) continue;
      const int conns = pick(0, 2);
      for (int c = 0; c < conns; ++c) {
        const int msgs = pick(1, 3), count = pick(1, 2), instances = pick(0, 3) == 0 ? 2 : 1;
        for (int i = 0; i < instances; ++i) {
          const int stb = pick(0, tbs[a] - 1), rtb = pick(0, tbs[b] - 1);
          for (int m = 0; m < msgs; ++m) {
            ops[a][stb].push_back({a, b, 2 * c + i, count, i, instances, true, false});
            ops[b][rtb].push_back({a, b, 2 * c + i, count, i, instances, false, false});
          }
        }
      }
    }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < tbs[r]; ++t)
      if (ops[r][t].empty() || pick(0, 2) == 0) ops[r][t].push_back({r, r, 0, 1, 0, 1, false, true});
  auto range = [&](Buffer b, int count) { return BufferRange{b, count == 2 ? 0 : pick(0, 1)}; };
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < tbs[r]; ++t) {
      // A random order that keeps each connection end's messages in order: the entries of
      // one connection end are identical, so any shuffle does.
      auto& list = ops[r][t];
      std::shuffle(list.begin(), list.end(), rng);
      for (size_t i = 0; i < list.size(); ++i) {
        const Op& o = list[i];
        Slot s;
        s.count = o.count;
        s.instance = o.instance;
        s.instances = o.instances;
        s.channel = o.channel;
        s.src = range(Buffer::Input, o.count);
        s.dst = range(Buffer::Output, o.count);
        if (o.local) {
          s.primitive = pick(0, 1) ? Primitive::Copy : Primitive::Reduce;
        } else if (o.send) {
          s.primitive = Primitive::Send;
          s.send_peer = o.dst;
        } else {
          s.primitive = pick(0, 1) ? Primitive::Recv : Primitive::RecvReduceCopy;
          s.recv_peer = o.src;
          // A receive followed by a send of the same channel, count and instance may fuse
          // into rcs, rrcs or rrs (receive and forward), as the compiler fuses chains.
          const Op* n = i + 1 < list.size() ? &list[i + 1] : nullptr;
          if (n && n->send && !n->local && n->channel == o.channel && n->count == o.count && n->instance == o.instance &&
              n->instances == o.instances && pick(0, 2) == 0) {
            const Primitive fused[] = {Primitive::RecvCopySend, Primitive::RecvReduceCopySend, Primitive::RecvReduceSend};
            s.primitive = fused[pick(0, 2)];
            s.send_peer = n->dst;
            ++i;
          }
        }
        p.ranks[r].tbs[t].slots.push_back(s);
      }
    }
  // Dependencies on another thread block of the same rank (any of its slots).
  for (int r = 0; r < R; ++r)
    if (tbs[r] == 2)
      for (int t = 0; t < 2; ++t)
        for (Slot& s : p.ranks[r].tbs[t].slots)
          if (pick(0, 3) == 0) s.deps.push_back({1 - t, pick(0, static_cast<int>(p.ranks[r].tbs[1 - t].slots.size()) - 1)});
  return p;
}

TEST(SemanticsAgree, RandomPlansDeadlockInAllThreeOrInNone) {
  const test::RandomSoak soak = test::random_soak(3000, 20261123u);
  const int count = soak.iters;
  std::mt19937 rng(soak.seed);
  int plans = 0, deadlocking = 0, free_of_deadlock = 0, conservative = 0;
  for (int i = 0; i < count; ++i) {
    Plan p = random_plan(rng);
    const int depth = 1 + i % 3;
    DeadlockReport d;
    try {
      d = check_deadlock(p, depth);
    } catch (const Error& e) {
      ADD_FAILURE() << "plan " << i << ": the generator made a plan the check refuses: " << e.what();
      continue;
    }
    // The emulator, with more micro-batches than the FIFO holds (the check is exact for
    // every count; a task-level plan needs counts past the depth to show its deadlocks),
    // then the simulator with as many.
    const test::PlanRun emu = test::emulate_plan(p, depth, 256);  // 16 micro-batches of 64 bytes
    ASSERT_GT(emu.microbatches, static_cast<uint32_t>(depth) + 1);
    const test::PlanRun sim = test::simulate_plan(p, depth, emu.microbatches);
    if (d.ok == emu.deadlock && std::getenv("DUMP_PLANS")) std::printf("%s\n", plan_to_json(p).c_str());
    const std::string what = "plan " + std::to_string(i) + " (" + std::string(to_string(p.execution)) + ", depth " +
                             std::to_string(depth) + "): check says " + (d.ok ? "free" : d.message) +
                             "; emulator says " + (emu.deadlock ? emu.error : "free") + "; simulator says " +
                             (sim.deadlock ? sim.error : "free");
    // The two executors agree on every plan, and the check agrees with them: it passes
    // exactly the plans that run (sound and, since fire_groups, exact for both models).
    EXPECT_EQ(emu.deadlock, sim.deadlock) << what;
    EXPECT_EQ(d.ok, !emu.deadlock) << what;
    if (!d.ok && !emu.deadlock) ++conservative;
    ++plans;
    (emu.deadlock ? deadlocking : free_of_deadlock) += 1;
  }
  // The generator makes both kinds in number, so the agreement means something.
  EXPECT_GT(deadlocking, plans / 10);
  EXPECT_GT(free_of_deadlock, plans / 10);
  std::printf("%d random plans: %d deadlock, %d do not, on the emulator and the simulator alike; the check passes "
              "none that deadlocks and refuses %d that run\n",
              plans, deadlocking, free_of_deadlock, conservative);
  EXPECT_EQ(conservative, 0);
}

}  // namespace
}  // namespace weft
