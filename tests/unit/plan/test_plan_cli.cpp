// `weft simulate plan.json` and `weft bench --algo plan.json`: a plan written by
// `weft compile -o` simulates to the same figures as the algorithm it came from, and a bad
// plan file is one located error line and exit status 2.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_run.hpp"

namespace weft {
namespace {

const std::string kWeft = WEFT_CLI;

test::CliRun weft(const std::string& args) { return test::run_command(kWeft + " " + args, "plan_cli"); }
test::CliRun weft_no_gpu(const std::string& args) {
  return test::run_command("CUDA_VISIBLE_DEVICES= " + kWeft + " " + args, "plan_cli");
}

std::string temp_path(const std::string& name) { return testing::TempDir() + "weft_plan_cli_" + name; }

// The report without its first line, whose compile time differs from run to run.
std::string rows(const std::string& out) { return out.substr(out.find('\n') + 1); }

// A JSON report without "sim_seconds", the simulator's own run time.
std::string without_sim_seconds(std::string json) {
  const size_t at = json.find(",\"sim_seconds\":");
  if (at != std::string::npos) json.erase(at, json.find('}', at) - at);
  return json;
}

TEST(PlanCli, SimulatePlanFileMatchesTheAlgorithm) {
  const std::pair<const char*, const char*> cases[] = {{"ring_allreduce", "h200-1x8"}, {"hm_allreduce", "a100-2x4"}};
  for (const auto& [algo, topo] : cases) {
    const std::string plan = temp_path(std::string(algo) + ".json");
    const std::string compile_args = std::string(algo) + " -t " + topo + " -s rr --out-of-place";
    test::CliRun c = weft("compile " + compile_args + " -o " + plan);
    ASSERT_EQ(c.status, 0) << c.err;
    // The plan file holds the derived instances: the algorithm simulated untuned matches it.
    for (const char* extra : {"--sizes 1M:64M", "--size 4M --json"}) {
      test::CliRun from_algo = weft("simulate " + compile_args + " --no-tune " + extra);
      test::CliRun from_file = weft("simulate " + plan + " -t " + topo + " " + extra);
      ASSERT_EQ(from_algo.status, 0) << from_algo.err;
      ASSERT_EQ(from_file.status, 0) << from_file.err;
      if (std::string(extra).find("--json") != std::string::npos) {
        EXPECT_EQ(without_sim_seconds(from_file.out), without_sim_seconds(from_algo.out)) << algo;
        EXPECT_NE(from_file.out.find("\"busbw_GBps\""), std::string::npos) << from_file.out;
      } else {
        EXPECT_EQ(rows(from_file.out), rows(from_algo.out)) << algo;
        EXPECT_NE(from_file.out.find("scheduler rr"), std::string::npos) << from_file.out;
      }
    }
    // Compiled for one size, the plan is what `weft simulate` tunes for that size.
    const std::string sized = temp_path(std::string(algo) + "_4M.json");
    c = weft("compile " + compile_args + " --size 4M -o " + sized);
    ASSERT_EQ(c.status, 0) << c.err;
    test::CliRun tuned_algo = weft("simulate " + compile_args + " --tune --size 4M --json");
    test::CliRun tuned_file = weft("simulate " + sized + " -t " + topo + " --size 4M --json");
    ASSERT_EQ(tuned_algo.status, 0) << tuned_algo.err;
    ASSERT_EQ(tuned_file.status, 0) << tuned_file.err;
    EXPECT_EQ(without_sim_seconds(tuned_file.out), without_sim_seconds(tuned_algo.out)) << algo;
    EXPECT_NE(tuned_algo.out.find("\"variant_reason\""), std::string::npos) << tuned_algo.out;
    // A plan file is scheduled already: no list of schedulers, no parameters.
    test::CliRun list = weft("simulate " + plan + " -t " + topo + " --size 1M -s hpds,rr");
    EXPECT_EQ(list.status, 2);
    EXPECT_NE(list.err.find("it takes no list of schedulers"), std::string::npos) << list.err;
    test::CliRun param = weft("simulate " + plan + " -t " + topo + " --size 1M -p nRanks=8");
    EXPECT_EQ(param.status, 2);
    EXPECT_NE(param.err.find("takes no parameters"), std::string::npos) << param.err;
    test::CliRun compile_again = weft("compile " + plan + " -t " + topo);
    EXPECT_EQ(compile_again.status, 2);
    EXPECT_NE(compile_again.err.find("weft compile --check"), std::string::npos) << compile_again.err;
    std::remove(plan.c_str());
  }
}

TEST(PlanCli, ChunkDslBuiltinsAreSources) {
  test::CliRun r = weft("compile dsl:ring_allreduce -t h200-1x4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"ranks\": 4"), std::string::npos) << r.out;
  r = weft("simulate dsl:alltoall_twostep -t a100-2x4 --size 1M --out-of-place");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(AllToAll) on a100-2x4, 8 ranks"), std::string::npos) << r.out;
  r = weft("simulate dsl:nosuch -t h200-1x4 --size 1M");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("'nosuch' is no chunk-DSL algorithm (known: allpairs_allreduce, alltoall_twostep, hm_allreduce, "
                       "ring_allreduce)"),
            std::string::npos)
      << r.err;
}

TEST(PlanCli, BadPlanFileIsOneLocatedError) {
  const std::string plan = temp_path("bad.json");
  std::ofstream(plan) << "{\"format\": \"weft-plan\",\n \"version\": }\n";
  test::CliRun r = weft("simulate " + plan + " -t h200-1x4 --size 1M");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("weft simulate: " + plan + ":2:13: the plan is not valid JSON (", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  // Before the builder this file went to the ResCCLang parser: "1:1: unexpected character '{'".
  EXPECT_EQ(r.err.find("unexpected character"), std::string::npos) << r.err;
  std::remove(plan.c_str());

  test::CliRun ranks = weft("compile ring_allreduce -t h200-1x8 -o " + plan);
  ASSERT_EQ(ranks.status, 0) << ranks.err;
  ranks = weft("simulate " + plan + " -t h200-1x4 --size 1M");
  EXPECT_EQ(ranks.status, 2);
  EXPECT_NE(ranks.err.find(plan + ": the plan is for 8 ranks, topology h200-1x4 has 4"), std::string::npos) << ranks.err;
  std::remove(plan.c_str());
}

TEST(PlanCli, BenchRunsAPlanFile) {
  const std::string plan = temp_path("bench.json");
  ASSERT_EQ(weft("compile allpairs_allgather -t h200-1x4 -o " + plan).status, 0);
  // No GPU for the command, whatever the machine has: `weft bench` then simulates.
  test::CliRun r = weft_no_gpu("bench AllGather --algo " + plan + " -t h200-1x4 --sizes 1M:4M");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_NE(r.out.find("# " + plan + " (AllGather, 4 ranks)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n4194304 "), std::string::npos) << r.out;
  // A plan file of another collective has no row in an AllReduce bench.
  r = weft_no_gpu("bench AllReduce --algo " + plan + " -t h200-1x4 --sizes 1M:4M");
  EXPECT_EQ(r.status, 1) << r.out;
  std::remove(plan.c_str());
}

}  // namespace
}  // namespace weft
