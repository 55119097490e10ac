// `weft tune` without a GPU: the candidates it sweeps, the winners it picks, the merging of
// adjacent sizes, the table it writes (which the runtime's own loader must accept and whose
// rows must choose the winners printed), its progress on standard error, and its errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "tune/selection.hpp"
#include "tune/selection_table.hpp"
#include "tune/tune.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {
namespace {

using test::CliRun;

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "weft_tune_" + std::to_string(getpid()) + "_" + name;
}

CliRun weft(const std::string& args) {
  // No GPU for the command, whatever the machine has: `weft tune` then simulates.
  return test::run_command("CUDA_VISIBLE_DEVICES= " + std::string(WEFT_CLI) + " " + args, "tune");
}

tune::Candidate cand(const std::string& algo, const std::string& proto, int inst, const std::string& sched = "algo") {
  tune::Candidate k;
  k.choice.algorithm = algo;
  k.choice.protocol = proto;
  k.choice.instances = inst;
  k.choice.scheduler = sched;
  return k;
}

TEST(Tune, CandidatesAreWhatRowsCanName) {
  const std::vector<std::string> algos = tune::algorithms_for(Collective::AllReduce, 2);
  for (const char* a : {"oneshot", "allpairs", "ring", "ring_allreduce", "allpairs_allreduce"})
    EXPECT_NE(std::find(algos.begin(), algos.end(), a), algos.end()) << a;
  for (const char* a : {"ring_allgather", "chain", "pipe_broadcast"})
    EXPECT_EQ(std::find(algos.begin(), algos.end(), a), algos.end()) << a;
  const std::vector<std::string> bcast = tune::algorithms_for(Collective::Broadcast, 4);
  EXPECT_EQ(std::find(bcast.begin(), bcast.end(), "oneshot"), bcast.end());
  EXPECT_NE(std::find(bcast.begin(), bcast.end(), "pipe_broadcast"), bcast.end());

  tune::SweepOptions o;
  o.algorithms = {"oneshot", "allpairs", "ring_allreduce"};
  o.instances = {2, 8};
  o.microbatches = {0, 65536};
  const std::vector<tune::Candidate> cs = tune::candidates(Collective::AllReduce, 2, o);
  // oneshot once; allpairs: 3 protocols (selection_protocols: Simple, LL, LL128) x 2 instances x
  // 2 micro-batches; ring_allreduce: x 2 schedulers.
  ASSERT_EQ(cs.size(), 1u + 12u + 24u);
  EXPECT_TRUE(cs[0].oneshot());
  EXPECT_EQ(cs[1].label(), "allpairs (hand-built, Simple, x2)");
  EXPECT_EQ(cs[2].label(), "allpairs (hand-built, Simple, x2, mb 64 KiB)");
  EXPECT_EQ(cs[13].label(), "ring_allreduce (compiled hpds/state, Simple, x2)");
  EXPECT_EQ(cs.back().label(), "ring_allreduce (compiled algo/state, LL128, x8, mb 64 KiB)");
  EXPECT_TRUE(tune::applies(cs[0], Collective::AllReduce, 4096, 2));
  EXPECT_FALSE(tune::applies(cs[0], Collective::AllReduce, 64u << 20, 2));

  auto error = [&](tune::SweepOptions bad) {
    try {
      tune::candidates(Collective::AllReduce, 2, bad);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      return std::string(e.what());
    }
    return std::string();
  };
  tune::SweepOptions b = o;
  b.algorithms = {"ring_allgather"};
  EXPECT_NE(error(b).find("none of the algorithms asked for runs AllReduce on 2 ranks (those that do: oneshot, "),
            std::string::npos)
      << error(b);
  b.algorithms = {"ring_allgather", "allpairs"};  // a list may serve several collectives
  EXPECT_EQ(tune::candidates(Collective::AllReduce, 2, b).front().choice.algorithm, "allpairs");
  b.algorithms = {"rign_allreduce"};
  EXPECT_NE(error(b).find("algorithm 'rign_allreduce' is neither oneshot"), std::string::npos) << error(b);
  b = o;
  b.protocols = {"LL256"};
  EXPECT_NE(error(b).find("protocol 'LL256' is not one a selection row names"), std::string::npos) << error(b);
  b = o;
  b.executors = {"jit"};
  EXPECT_NE(error(b).find("executor 'jit'"), std::string::npos) << error(b);
  b = o;
  b.instances = {0};
  EXPECT_NE(error(b).find("instances 0 is not in 1..1024"), std::string::npos) << error(b);
  b = o;
  b.schedulers = {"fast"};
  EXPECT_NE(error(b).find("fast"), std::string::npos) << error(b);
}

TEST(Tune, EachCandidatesTableRunsItThroughTheLoader) {
  for (const tune::Candidate& k : {cand("ring_allreduce", "LL", 8), cand("allpairs", "Simple", 4), cand("oneshot", "LL", 1)}) {
    tune::Candidate m = k;
    if (!m.oneshot()) {
      m.choice.microbatch_bytes = 1 << 16;
      m.choice.executor = "gen";
    }
    const SelectionTable t = parse_selection_table(tune::candidate_table(Collective::AllReduce, m), "cand.json");
    EXPECT_TRUE(m.same(t.choose(Collective::AllReduce, 4096, 2))) << m.label();
    EXPECT_TRUE(m.same(t.choose(Collective::AllReduce, 4096, 7))) << m.label();
  }
}

TEST(Tune, WinnersPreferTheEarlierOnATieAndMeasureTheRunnerUp) {
  const tune::Times times = {{10, 5, -1, 7}, {8, 5, -1, -1}, {9, 6, -1, -1}};
  const std::vector<tune::Winner> w = tune::pick_winners(times, {8, 16, 32, 64});
  ASSERT_EQ(w.size(), 3u);  // nothing ran at 32 bytes
  EXPECT_EQ(w[0].best, 1u);
  EXPECT_EQ(w[0].runner_up, 2u);
  EXPECT_DOUBLE_EQ(w[0].ratio, 9.0 / 8.0);
  EXPECT_EQ(w[1].best, 0u);
  EXPECT_EQ(w[1].runner_up, 1u);
  EXPECT_DOUBLE_EQ(w[1].ratio, 1.0);
  EXPECT_EQ(w[2].bytes, 64u);
  EXPECT_EQ(w[2].ratio, 0.0);  // alone
}

TEST(Tune, AdjacentSizesWithOneWinnerMergeAndTheTableChoosesThem) {
  tune::Tuned t;
  t.collective = Collective::AllReduce;
  t.ranks = 4;
  t.candidates = {cand("allpairs", "LL", 2), cand("ring_allreduce", "Simple", 8), cand("ring_allreduce", "Simple", 24)};
  t.candidates[2].choice.microbatch_bytes = 256 << 10;
  t.sizes = {1024, 2048, 4096, 8192, 16384, 32768};
  t.times = {{1, 1, 1, 9, 9, 9}, {2, 2, 2, 8, 1, 9}, {3, 3, 3, 9, 9, 1}};
  t.winners = tune::pick_winners(t.times, t.sizes);
  const std::vector<tune::Merged> m = tune::merge_winners(t);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].candidate, 0u);
  EXPECT_EQ(m[0].lo, 0u);
  EXPECT_EQ(m[0].hi, 8191u);
  EXPECT_EQ(m[0].winners.size(), 3u);
  EXPECT_EQ(m[1].candidate, 1u);
  EXPECT_EQ(m[1].lo, 8192u);
  EXPECT_EQ(m[1].hi, 32767u);
  EXPECT_EQ(m[2].candidate, 2u);
  EXPECT_EQ(m[2].lo, 32768u);
  EXPECT_EQ(m[2].hi, UINT64_MAX);

  tune::Provenance p{true, "topology h200-1x8", "2026-11-25"};
  const std::string text = tune::selection_json({t}, p);
  const SelectionTable table = parse_selection_table(text, "tuned.json");
  ASSERT_GT(table.rows.size(), 3u);  // the default rows follow
  EXPECT_EQ(table.rows[0].line, 6);  // one row per line after the header
  EXPECT_EQ(table.rows[1].bytes.lo, 8192u);
  EXPECT_EQ(table.rows[2].microbatch_bytes, 256u << 10);
  for (const tune::Winner& w : t.winners) {
    const Choice ch = table.choose(Collective::AllReduce, w.bytes, 4);
    EXPECT_TRUE(t.candidates[w.best].same(ch)) << w.bytes << ": " << describe_choice(ch);
  }
  // Between two timed sizes the smaller one's winner; beyond them, the nearest.
  EXPECT_TRUE(t.candidates[0].same(table.choose(Collective::AllReduce, 5000, 4)));
  EXPECT_TRUE(t.candidates[0].same(table.choose(Collective::AllReduce, 8, 4)));
  EXPECT_TRUE(t.candidates[2].same(table.choose(Collective::AllReduce, 1u << 30, 4)));
  // Other rank counts, in-place calls and other collectives fall back to the default table.
  EXPECT_EQ(describe_choice(table.choose(Collective::AllReduce, 64u << 20, 8)),
            describe_choice(default_json_table().choose(Collective::AllReduce, 64u << 20, 8)));
  EXPECT_EQ(describe_choice(table.choose(Collective::AllReduce, 64u << 20, 4, true)),
            describe_choice(default_json_table().choose(Collective::AllReduce, 64u << 20, 4, true)));
  EXPECT_EQ(table.choose(Collective::AllGather, 1 << 20, 4).algorithm,
            default_json_table().choose(Collective::AllGather, 1 << 20, 4).algorithm);
  EXPECT_NE(text.find("weft tune, simulated on topology h200-1x8, 4 ranks, out of place, 2026-11-25: fastest at 8 KiB..16 KiB"),
            std::string::npos)
      << text;
  // Without the fallback only the tuned rows remain.
  EXPECT_EQ(parse_selection_table(tune::selection_json({t}, p, false), "only.json").rows.size(), 3u);
}

TEST(Tune, TheSimulatorTimesEachCandidateAsTheRuntimeWouldRunIt) {
  const Topology topo = tune::simulation_topology("h200-1x8", 4);
  EXPECT_EQ(topo.num_gpus(), 4);
  EXPECT_EQ(topo.name, "h200-1x8 (one node of 4 GPUs)");
  const Topology node = tune::simulation_topology("a100-2x8", 0);  // a node's worth of a 2-node preset
  EXPECT_EQ(node.num_gpus(), 8);
  EXPECT_EQ(node.name, "a100-2x8 (one node of 8 GPUs)");
  std::vector<tune::Candidate> cs = {cand("ring_allreduce", "Simple", 4), cand("ring_allreduce", "Simple", 4),
                                     cand("oneshot", "LL", 1), cand("ring_allgather", "Simple", 4)};
  cs[1].choice.microbatch_bytes = 4096;  // many more micro-batches than the staging slot's
  tune::Progress quiet(nullptr, Collective::AllReduce, cs.size(), 2);
  const tune::Times t = tune::simulate_times(Collective::AllReduce, 4, cs, {1 << 20, 16 << 20}, topo, quiet);
  ASSERT_EQ(t.size(), 4u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_GT(t[0][s], 0) << s;
    EXPECT_GT(t[1][s], 0) << s;
    EXPECT_NE(t[0][s], t[1][s]) << "the micro-batch changes nothing at size " << s;
    EXPECT_LT(t[2][s], 0) << "the simulator has no one-shot kernel";
    EXPECT_LT(t[3][s], 0) << "an AllGather plan cannot run an AllReduce";
  }
  EXPECT_LT(t[0][0], t[0][1]);
}

TEST(Tune, TheDefaultTableKeepsTheSizesNoCandidateWinsByTheMargin) {
  tune::Tuned t;
  t.collective = Collective::AllReduce;
  t.ranks = 4;
  t.candidates = {tune::incumbent_candidate(), cand("allpairs", "LL", 2), cand("ring_allreduce", "Simple", 24)};
  t.sizes = {1024, 2048, 4096, 8192};
  // 1 KiB: 4% faster, kept; 2 KiB: 25% faster, taken; 4 KiB: the incumbent is fastest;
  // 8 KiB: the ring, 2x faster.
  t.times = {{10, 10, 10, 20}, {9.6, 8, 11, 30}, {12, 12, 12, 10}};
  t.winners = tune::pick_winners(t.times, t.sizes, 0, 1.05);
  ASSERT_EQ(t.winners.size(), 4u);
  EXPECT_EQ(t.winners[0].best, 0u);
  EXPECT_EQ(t.winners[0].runner_up, 1u);
  EXPECT_DOUBLE_EQ(t.winners[0].ratio, 0.96);  // the runner-up was faster, within the margin
  EXPECT_EQ(t.winners[1].best, 1u);
  EXPECT_EQ(t.winners[2].best, 0u);
  EXPECT_EQ(t.winners[3].best, 2u);
  // Without an incumbent the fastest wins, as before.
  EXPECT_EQ(tune::pick_winners(t.times, t.sizes)[0].best, 1u);
  // The incumbent's sizes get no row: the table holds 2 KiB..4 KiB-1 and 8 KiB on.
  tune::Provenance p{false, "NVIDIA H200", "2026-11-28"};
  const SelectionTable only = parse_selection_table(tune::selection_json({t}, p, false), "only.json");
  ASSERT_EQ(only.rows.size(), 2u);
  EXPECT_EQ(only.rows[0].bytes.lo, 2048u);
  EXPECT_EQ(only.rows[0].bytes.hi, 4095u);
  EXPECT_EQ(only.rows[1].bytes.lo, 8192u);
  // With the fallback, the kept sizes choose what the default table chooses.
  const SelectionTable table = parse_selection_table(tune::selection_json({t}, p), "tuned.json");
  for (uint64_t b : {1024u, 4096u})
    EXPECT_EQ(describe_choice(table.choose(Collective::AllReduce, b, 4)),
              describe_choice(default_json_table().choose(Collective::AllReduce, b, 4)));
  EXPECT_TRUE(t.candidates[1].same(table.choose(Collective::AllReduce, 2048, 4)));
  // The incumbent is timed through the default table itself.
  EXPECT_EQ(tune::candidate_table(Collective::AllReduce, t.candidates[0]), std::string(default_selection_text()));
  EXPECT_FALSE(t.candidates[0].same(table.choose(Collective::AllReduce, 1024, 4)));
}

TEST(Tune, PruningStopsOnlyCandidatesFarBehindFromItsSize) {
  const tune::PruneRule r;  // 1.5 x from 16 MiB
  const uint64_t M = 1ull << 20;
  EXPECT_TRUE(tune::prune_after(r, 16 * M, 151.0, 100.0));
  EXPECT_FALSE(tune::prune_after(r, 16 * M, 150.0, 100.0));   // exactly the factor: kept
  EXPECT_FALSE(tune::prune_after(r, 8 * M, 1000.0, 100.0));   // below --prune-from
  EXPECT_FALSE(tune::prune_after(r, 1024 * M, 1000.0, -1.0)); // the first candidate: no best yet
  tune::PruneRule off;
  off.factor = 0;
  EXPECT_FALSE(tune::prune_after(off, 1024 * M, 1e9, 1.0));
  tune::PruneRule early{2.0, 64 * 1024};
  EXPECT_TRUE(tune::prune_after(early, 64 * 1024, 20.1, 10.0));
  EXPECT_FALSE(tune::prune_after(early, 64 * 1024, 20.0, 10.0));
}

TEST(Tune, SizesAreWholeElementsPerRank) {
  EXPECT_EQ(tune::whole_sizes({8, 16, 100, 1000}, 3), (std::vector<uint64_t>{12, 96, 996}));
  EXPECT_THROW(tune::whole_sizes({8}, 4), Error);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TuneCli, SimulatedTableLoadsAndChoosesThePrintedWinners) {
  const std::string out = temp_path("sim.json");
  std::remove(out.c_str());
  CliRun r = weft("tune AllReduce ReduceScatter --sizes 4K:64K --factor 4 --ranks 4 -t h200-1x8 "
                  "--algo ring_allreduce,allpairs,ring_reducescatter --instances 2,8 -o " + out);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("# weft tune: no GPU in use; every time below is SIMULATED on topology h200-1x8 (one node of 4 GPUs), 4 ranks", 0), 0u)
      << r.out;
  EXPECT_NE(r.out.find("# wrote " + out), std::string::npos);
  const SelectionTable t = load_selection_table(out);
  EXPECT_EQ(t.origin, out);
  const std::string text = slurp(out);
  EXPECT_NE(text.find("simulated on topology h200-1x8 (one node of 4 GPUs), 4 ranks"), std::string::npos) << text;
  // Each printed winner line: size, then the winner's label; the table's row must choose it.
  int checked = 0;
  Collective c = Collective::AllReduce;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# ReduceScatter", 0) == 0) c = Collective::ReduceScatter;
    for (uint64_t s : {4096u, 16384u, 65536u}) {
      const std::string size = text::format_bytes(s) + "  ";
      const std::string l(text::trim(line));
      if (l.rfind(size, 0) != 0) continue;
      const std::string rest(text::trim(l.substr(size.size())));
      const std::string want = describe_choice(t.choose(c, s, 4));
      EXPECT_EQ(rest.rfind(want, 0), 0u) << "printed: " << line << "\ntable chooses: " << want;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6) << r.out;
  // Progress went to standard error, and nowhere else.
  EXPECT_NE(r.err.find("weft tune: AllReduce 4 KiB: candidate 1 of "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; best "), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("candidate 1 of"), std::string::npos);
  std::remove(out.c_str());
}

TEST(TuneCli, QuietSilencesProgress) {
  CliRun r = weft("tune Broadcast --simulate --sizes 64K:128K --ranks 2 --algo pipe_broadcast --instances 4 --quiet");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("pipe_broadcast (compiled hpds/state, Simple, x4)"), std::string::npos) << r.out;
}

TEST(TuneCli, BadArgumentsAreNamedWithExitStatus2) {
  struct Case {
    std::string args, want;
  };
  const Case cases[] = {
      {"tune AllReduces", "weft tune: unknown collective 'AllReduces'"},
      {"tune AllReduce --sizes 0:1K", "--sizes wants FROM:TO with 0 < FROM <= TO"},
      {"tune AllReduce --sizes 1K:1Q", "--sizes: "},
      {"tune AllReduce --factor 1", "--factor 1 must be more than 1"},
      {"tune AllReduce --factor 1.0000001", "--sizes 8:256M with --factor 1.0000001 makes more than 64 sizes"},
      {"tune AllReduce --algo bogus_allreduce --ranks 2", "algorithm 'bogus_allreduce' is neither oneshot"},
      {"tune AllReduce --algo pipe_broadcast --ranks 2", "none of the algorithms asked for runs AllReduce on 2 ranks"},
      {"tune AllReduce --ranks 9", "topology h200-1x8 has 8 GPUs per node"},
      {"tune AllReduce --ranks 1", "tuning needs at least 2 ranks"},
      {"tune AllReduce --instances many --ranks 2", "--instances: 'many' is not a number"},
      {"tune AllReduce --protocols LL256 --ranks 2", "protocol 'LL256'"},
      {"tune AllReduce --simulate --ranks 2 --call-cost nope=1", "--call-cost: unknown call cost 'nope'"},
      {"tune AllReduce --simulate --ranks 2 --call-cost ll_rate_scale=0", "ll_rate_scale=0: wants a number from 0.001"},
      {"tune AllReduce --simulate --ranks 2 --cost tb_copy_GBps=x", "--cost:"},
      {"tune AllReduce --microbatch 8 --ranks 2", "micro-batch 8 is not in 16 B..1 TiB"},
      {"tune AllReduce -t nowhere-1x1 --ranks 2", "weft tune: "},
      {"tune AllReduce --ranks 2 -o /nonexistent-dir/t.json", "cannot write the -o file '/nonexistent-dir/t.json'"},
      {"tune AllReduce --ranks 2 --prune -1", "--prune"},
      {"tune AllReduce --ranks 2 --keep 0.5", "--keep wants 0 or a factor from 1 to 1e6"},
      {"tune AllReduce --ranks 2 --prune-from lots", "--prune-from"},
  };
  for (const Case& k : cases) {
    CliRun r = weft(k.args + " --quiet");
    EXPECT_EQ(r.status, 2) << k.args << "\n" << r.err;
    EXPECT_NE(r.err.find(k.want), std::string::npos) << k.args << "\ngot: " << r.err;
  }
  CliRun e = test::run_command("WEFT_ALGO=ring CUDA_VISIBLE_DEVICES= " + std::string(WEFT_CLI) + " tune AllReduce --ranks 2",
                               "tune");
  EXPECT_EQ(e.status, 2);
  EXPECT_NE(e.err.find("WEFT_ALGO is set: it would override every candidate"), std::string::npos) << e.err;
  CliRun u = weft("tune AllReduce --bogus-option");
  EXPECT_EQ(u.status, 2);
}

}  // namespace
}  // namespace weft
