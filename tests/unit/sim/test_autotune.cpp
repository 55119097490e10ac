// Automatic instances and the choice of a schedule per size, checked on simulated results
// only (regression tests of the simulator's figures, not of GPU speed; docs/scheduling.md):
//   - every published MSCCL file (../shared/msccl-xml, one test each, skipped without it) and
//     the project's own (tests/data/msccl): HPDS, tuned at 1 MiB, 64 MiB and 1 GiB within the
//     file's own thread blocks per rank, takes no more blocks than the file and is no slower;
//     the choice between HPDS and the file's schedule is never slower than the file;
//   - every built-in algorithm on h200-1x8: HPDS within the blocks of the algorithm's written
//     schedule (`algo`) is no slower than it;
//   - `weft compile -s auto`'s choice is the fastest candidate and never slower than the
//     file's own schedule;
//   - thread-block idle of HM AllReduce and AllGather on the paper's topologies.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "exec/plan_lowering.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "plan/builder.hpp"
#include "exec/plan_check.hpp"
#include "sim/autotune.hpp"
#include "sim/choose.hpp"
#include "sim/simulator.hpp"
#include "xml/xml_test_util.hpp"

namespace weft::sim {
namespace {

constexpr uint64_t kSizes[] = {uint64_t{1} << 20, uint64_t{64} << 20, uint64_t{1} << 30};

SimReport run(const Plan& p, const Topology& t, uint64_t bytes) {
  SimOptions o;
  o.bytes = bytes;
  return simulate(p, t, o);
}

TuneResult tuned(const Algorithm& a, const Topology& t, uint64_t bytes, int32_t max_tbs, const std::string& sched = "hpds",
                 bool in_place = true) {
  CompileOptions c;
  c.scheduler = sched;
  c.in_place = in_place;
  TuneOptions o;
  o.bytes = bytes;
  o.max_tbs = max_tbs;
  return autotune(a, t, c, o);
}

Topology preset_for(int32_t ranks) {
  Topology t = topology_preset("h200-1x8");
  t.gpus_per_node = ranks;
  t.name = "h200-1x" + std::to_string(ranks);
  return t;
}

/// The plan moves the right data: the CPU emulator runs it on random data and compares every
/// element with the host reference (exec/plan_check.hpp).
void expect_correct(const Plan& p, const std::string& what) {
  SCOPED_TRACE(what);
  try {
    check_plan_on_emulator(lower_plan(p, p.num_ranks, 32), 4);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
  }
}

/// HPDS tuned within the file's own blocks against the file's own schedule, at each size;
/// and the choice `weft compile -s auto` makes between the two (sim/choose.hpp), which must
/// be no slower than the file and take no more blocks per rank.
void compare_with_given(const std::string& path, const std::string& name) {
  SCOPED_TRACE(path);
  const PlanSource probe = load_source(path, topology_preset("h200-1x8"), SourceOptions{{}, true, false, true});
  const Topology t = probe.given->num_ranks == 8 ? topology_preset("h200-1x8") : preset_for(probe.given->num_ranks);
  const PlanSource src = load_source(path, t, {});
  ASSERT_TRUE(src.algorithm && src.given);
  const int32_t given_tbs = src.given->max_tbs_per_rank();
  for (uint64_t bytes : kSizes) {
    SCOPED_TRACE(std::to_string(bytes >> 20) + " MiB");
    const double own = run(*src.given, t, bytes).time_us;
    // In the file's own buffer layout (an out-of-place file compiled in place would add
    // copies through scratch that the file does not have).
    const TuneResult r = tuned(*src.algorithm, t, bytes, given_tbs, "hpds", src.given->in_place);
    const double hpds = run(r.result.plan, t, bytes).time_us;
    EXPECT_LE(r.result.plan.max_tbs_per_rank(), given_tbs);
    EXPECT_DOUBLE_EQ(hpds, r.trials[r.chosen].time_us);  // the plan returned is the one simulated
    EXPECT_LE(hpds, own * (1 + 1e-9)) << r.reason;
    if (bytes == kSizes[0]) expect_correct(r.result.plan, name + " tuned: " + r.reason);  // the shape it took moves the right data
    TuneOptions o;
    o.bytes = bytes;
    CompileOptions base;
    base.in_place = src.given->in_place;
    const ScheduleChoice ch = choose_schedule(*src.algorithm, &*src.given, t, base, o, {"hpds", "as-given"});
    // The faster, or on a tie the one with fewer blocks (HPDS, listed first, on a full tie).
    const int32_t hpds_tbs = r.result.plan.max_tbs_per_rank();
    const bool given_wins = own < hpds * (1 - 1e-9) || (own <= hpds * (1 + 1e-9) && given_tbs < hpds_tbs);
    EXPECT_EQ(ch.scheduler, given_wins ? "as-given" : "hpds") << ch.reason;
    EXPECT_LE(run(ch.plan, t, bytes).time_us, std::min(own, hpds) * (1 + 1e-9)) << ch.reason;
    EXPECT_LE(ch.plan.max_tbs_per_rank(), given_tbs);
  }
}

/// The published files (../shared/msccl-xml/README.md), one test each; each skips without
/// the folder. A file there that is not listed fails `EveryPublishedFileIsListed`.
const char* const kPublished[] = {"ap2ll.xml",           "ap4ll.xml",          "ndv5-ag-16m.xml",    "ndv5-ag-1k-512k.xml",
                                  "ndv5-ag-1m.xml",      "ndv5-ag-2m.xml",     "ndv5-ag-4m.xml",     "ndv5-ag-8m.xml",
                                  "ndv5-ar-1k-512k.xml", "ndv5-ar-1m.xml",     "ndv5-ar-2m.xml",     "ndv5-ar-4m.xml",
                                  "r48ll.xml",           "r48ll128.xml"};

class PublishedFile : public ::testing::TestWithParam<const char*> {};

TEST_P(PublishedFile, HpdsWithinItsBlocksIsNoSlowerAndTheChoiceIsNoSlower) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
  const std::string path = dir + "/" + GetParam();
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is listed in kPublished but absent";
  compare_with_given(path, GetParam());
}

INSTANTIATE_TEST_SUITE_P(GivenSchedules, PublishedFile, ::testing::ValuesIn(kPublished),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           n = n.substr(0, n.size() - 4);
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(GivenSchedules, EveryPublishedFileIsListed) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".xml") continue;
    const std::string f = e.path().filename().string();
    EXPECT_TRUE(std::find_if(std::begin(kPublished), std::end(kPublished), [&](const char* k) { return f == k; }) !=
                std::end(kPublished))
        << f << " has no test: add it to kPublished";
  }
}

TEST(GivenSchedules, HpdsWithinTheProjectsOwnFilesBlocksIsNoSlower) {
  // The project's MSCCL files (tests/data/msccl/README.md) that a 1-node preset runs.
  for (const char* f : {"exported/ring_allreduce_8_ll.xml", "exported/allpairs_allreduce_4_ll.xml",
                        "exported/ring_allgather_4.xml", "exported/alltoall_direct_4.xml",
                        "exported/chain_broadcast_4.xml", "exported/allpairs_allreduce_2_oop.xml",
                        "exported/ring_allgather_2_oop.xml"})
    compare_with_given(test::own_msccl_dir() + "/" + f, f);
}

TEST(GivenSchedules, AFileForOutOfPlaceBuffersOnlyIsCompiledOutOfPlace) {
  // So that `weft compile` and `weft simulate` compare (and choose between) its own schedule
  // and the compiler's for the same buffers.
  const PlanSource oop = load_source(test::own_msccl_dir() + "/exported/ring_allgather_2_oop.xml", preset_for(2), {});
  ASSERT_TRUE(oop.given);
  EXPECT_FALSE(oop.given->in_place);
  EXPECT_FALSE(compile_in_place(oop, true));
  EXPECT_FALSE(compile_in_place(oop, false));
  const PlanSource in = load_source(test::own_msccl_dir() + "/exported/allpairs_allreduce_4_ll.xml", preset_for(4), {});
  EXPECT_TRUE(compile_in_place(in, true));
  EXPECT_FALSE(compile_in_place(in, false));
  const PlanSource builtin = load_source("ring_allgather", preset_for(2), {});
  EXPECT_TRUE(compile_in_place(builtin, true));
}

TEST(GivenSchedules, HpdsWithinTheWrittenSchedulesBlocksIsNoSlowerOnEveryBuiltin) {
  const Topology t = topology_preset("h200-1x8");
  for (const std::string& name : builtin_algorithm_names()) {
    SCOPED_TRACE(name);
    const Algorithm a = load_algorithm(name, params_for_topology(t, {}));
    CompileOptions written;
    written.scheduler = "algo";
    const Plan algo = compile(a, t, written).plan;
    for (uint64_t bytes : kSizes) {
      SCOPED_TRACE(std::to_string(bytes >> 20) + " MiB");
      const TuneResult r = tuned(a, t, bytes, algo.max_tbs_per_rank());
      EXPECT_LE(r.result.plan.max_tbs_per_rank(), algo.max_tbs_per_rank());
      EXPECT_LE(run(r.result.plan, t, bytes).time_us, run(algo, t, bytes).time_us * (1 + 1e-9)) << r.reason;
    }
  }
}

TEST(GivenSchedules, TheChoiceIsTheFastestCandidateAndNeverSlowerThanTheFile) {
  const std::string path = test::own_msccl_dir() + "/exported/ring_allreduce_8_ll.xml";
  const Topology t = topology_preset("h200-1x8");
  const PlanSource src = load_source(path, t, {});
  TuneOptions o;
  o.bytes = 64u << 20;
  const ScheduleChoice ch = choose_schedule(*src.algorithm, &*src.given, t, CompileOptions{}, o, auto_schedulers(true));
  ASSERT_EQ(ch.candidates.size(), 6u);
  EXPECT_EQ(ch.max_tbs, src.given->max_tbs_per_rank());
  double fastest = 1e300;
  for (const ScheduleCandidate& c : ch.candidates)
    if (c.error.empty()) fastest = std::min(fastest, c.time_us);
  const double chosen = run(ch.plan, t, o.bytes).time_us;
  EXPECT_DOUBLE_EQ(chosen, fastest);
  EXPECT_LE(chosen, run(*src.given, t, o.bytes).time_us);
  EXPECT_LE(ch.plan.max_tbs_per_rank(), ch.max_tbs);
  EXPECT_NE(ch.reason.find(ch.scheduler), std::string::npos);
  // The runner-up and by how much it is slower (or that it ties).
  EXPECT_TRUE(ch.reason.find("% slower)") != std::string::npos || ch.reason.find(" is as fast with ") != std::string::npos)
      << ch.reason;
  EXPECT_NE(ch.reason.find("as-given"), std::string::npos) << ch.reason;  // always against the file's own
  EXPECT_THROW(choose_schedule(*src.algorithm, &*src.given, t, CompileOptions{}, TuneOptions{}, {"hpds"}), Error);
}

TEST(Autotune, NeverSlowerNorLargerThanTheDerivedPlan) {
  for (const char* topo : {"a100-2x4", "a100-4x8"})
    for (const char* algo : {"hm_allreduce", "hm_allgather"}) {
      SCOPED_TRACE(std::string(algo) + " on " + topo);
      const Topology t = topology_preset(topo);
      const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
      const Plan derived = compile(a, t, CompileOptions{}).plan;
      const TuneResult r = tuned(a, t, 256u << 20, 0);
      const SimReport d = run(derived, t, 256u << 20), x = run(r.result.plan, t, 256u << 20);
      // Slower only by the default idle rule's cost, for blocks that idle at most 15%.
      EXPECT_LE(x.time_us, d.time_us * (1 + TuneOptions{}.idle_cost + 1e-9));
      if (x.time_us > d.time_us * (1 + 1e-9)) {
        EXPECT_LE(x.tb_idle_mean, kDefaultMaxIdle);
        EXPECT_NE(r.reason.find("whose blocks idle at most 15%"), std::string::npos) << r.reason;
      }
      EXPECT_LE(r.result.plan.max_tbs_per_rank(), derived.max_tbs_per_rank());
      EXPECT_LE(x.tb_idle_mean, d.tb_idle_mean + 1e-9);
      EXPECT_FALSE(r.reason.empty());
    }
}

TEST(Autotune, IdleOnThePapersTopologiesWhenFewerBlocksMayCostTenPercent) {
  // Paper 001 Table 3 reports 1.7-15% mean idle. Allowed 10% (--tolerance 0.1; the default
  // idle rule is then off) the tuner takes the fewest blocks within that of the fastest: the
  // figures measured when this was written, kept from getting worse. HM AllReduce over 4
  // servers keeps its 32 blocks (ops placed on fewer of them by latest start, its reduce
  // chains in another order per chunk, 13.7% idle): one block per NVLink connection (18
  // blocks, 15.9%, 5,117 us) is 12% slower than that.
  struct Case {
    const char* algo;
    const char* topo;
    double idle;  ///< mean idle at most
  };
  for (const Case& c : {Case{"hm_allreduce", "a100-2x4", 0.18}, Case{"hm_allgather", "a100-2x4", 0.12},
                        Case{"hm_allreduce", "a100-4x8", 0.137}, Case{"hm_allgather", "a100-4x8", 0.01}}) {
    SCOPED_TRACE(std::string(c.algo) + " on " + c.topo);
    const Topology t = topology_preset(c.topo);
    const Algorithm a = load_algorithm(c.algo, params_for_topology(t, {}));
    TuneOptions o;
    o.bytes = 256u << 20;
    o.tolerance = 0.1;
    const TuneResult r = autotune(a, t, CompileOptions{}, o);
    const SimReport x = run(r.result.plan, t, o.bytes);
    EXPECT_LE(x.tb_idle_mean, c.idle + 5e-3);
    double fastest = 1e300;
    for (const TuneTrial& tr : r.trials)
      if (tr.error.empty()) fastest = std::min(fastest, tr.time_us);
    EXPECT_LE(x.time_us, fastest * 1.1 * (1 + 1e-9));
  }
}

TEST(Autotune, EveryShapeItTakesRunsCorrectlyOnTheEmulator) {
  const Topology t = topology_preset("h200-1x8");
  // The shapes one by one: hpds at algorithm level in step order, chunk channels in step
  // order at task level, the peer allocators (with blocks for local work) at both levels.
  struct Shape {
    const char* algo;
    const char* execution;
    const char* channels;
    const char* allocator;
    int32_t spare;
    bool aggregate = true;  ///< chunk channels: one block per chunk DAG unless aggregated
  };
  for (const Shape& sh : {Shape{"ring_allreduce", "algorithm", "link", "state", 0},
                          Shape{"hm_allreduce", "task", "chunk", "conn", 0, false},
                          // A block per peer and chunk channel: the chunk sent to a peer and
                          // the one received from it on one block, reductions in chains on
                          // the blocks (the tuner's seed for all-pairs MSCCL files).
                          Shape{"allpairs_allreduce", "algorithm", "chunk", "peer-mixed", 0},
                          Shape{"allpairs_allreduce", "algorithm", "chunk", "peer-mixed", 3},
                          Shape{"allpairs_reducescatter", "algorithm", "chunk", "peer", 0},
                          Shape{"allpairs_allreduce", "task", "link", "peer", 2},
                          Shape{"allpairs_allreduce", "algorithm", "link", "peer", 0},
                          Shape{"alltoall_direct", "task", "link", "peer", 0},
                          Shape{"peerwise_alltoall", "algorithm", "link", "peer", 4},
                          Shape{"allpairs_reducescatter", "algorithm", "link", "peer", 1},
                          // Local work on the communication blocks, with other instance counts
                          // than the receives it reads (instance parts, docs/plan-format.md).
                          Shape{"allpairs_allreduce", "task", "link", "peer-mixed", 2},
                          Shape{"allpairs_allreduce", "algorithm", "link", "peer-mixed", 0},
                          Shape{"direct_reduce", "task", "link", "peer-mixed", 3},
                          Shape{"peerwise_alltoall", "algorithm", "link", "peer-mixed", 4},
                          // Every peer of a rank from each block (allpairs_broadcast's root).
                          Shape{"allpairs_broadcast", "algorithm", "link", "rank", 0},
                          Shape{"allpairs_allreduce", "algorithm", "link", "rank", 0}}) {
    const Algorithm a = load_algorithm(sh.algo, params_for_topology(t, {}));
    CompileOptions c;
    c.execution = sh.execution;
    c.channels = sh.channels;
    c.aggregate = sh.aggregate;
    c.allocator = sh.allocator;
    c.spare_blocks = sh.spare;
    c.step_order = true;
    c.instances = 2;
    expect_correct(compile(a, t, c).plan, std::string(sh.algo) + " " + sh.execution + " " + sh.channels + " " + sh.allocator);
  }
  // What the tuner returns, blocks merged on the simulated timeline included.
  for (const char* algo :
       {"ring_allreduce", "allpairs_allreduce", "hm_allgather", "alltoall_direct", "peerwise_alltoall", "direct_reduce",
        "allpairs_broadcast"})
    for (uint64_t bytes : {uint64_t{1} << 20, uint64_t{64} << 20}) {
      const Algorithm a = load_algorithm(algo, params_for_topology(t, {}));
      const TuneResult r = tuned(a, t, bytes, 0);
      expect_correct(r.result.plan, std::string(algo) + " tuned: " + r.reason);
    }
}

TEST(Autotune, RefusesGivenInstancesAndAMissingSize) {
  const Topology t = topology_preset("h200-1x8");
  const Algorithm a = load_algorithm("ring_allreduce", params_for_topology(t, {}));
  CompileOptions c;
  TuneOptions o;
  EXPECT_THROW(autotune(a, t, c, o), Error);  // no size
  o.bytes = 1u << 20;
  c.instances = 4;
  EXPECT_THROW(autotune(a, t, c, o), Error);
}

}  // namespace
}  // namespace weft::sim
