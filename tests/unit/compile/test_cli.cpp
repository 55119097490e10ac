// `weft compile` as a user runs it: --json keys, plan files, and one error line per bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "ir/plan_json.hpp"

namespace weft {
namespace {

using weft::test::CliRun;

CliRun weft(const std::string& args) { return weft::test::run_command(std::string(WEFT_CLI) + " " + args, "cli"); }

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(Cli, JsonHasTheIssuesKeys) {
  CliRun r = weft("compile hm_allreduce --topology a100-2x4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tasks"].get<int>(), 2 * 8 * 2 * 3 + 2 * 8 * 1);  // 2RN(G-1) + 2R(N-1)
  EXPECT_EQ(j["subpipelines"].get<int>(), 4);
  EXPECT_GT(j["tbs_per_rank_max"].get<int>(), 0);
  EXPECT_GT(j["tbs_per_rank_mean"].get<double>(), 0);
  for (const char* k : {"parse", "analyse", "schedule", "lower", "total"}) EXPECT_TRUE(j["seconds"][k].is_number()) << k;
  double sum = 0;
  for (const char* k : {"parse", "verify", "analyse", "schedule", "lower"}) sum += j["seconds"][k].get<double>();
  EXPECT_NEAR(j["seconds"]["total"].get<double>(), sum, 1e-6);
}

TEST(Cli, TextNamesEveryQuantity) {
  CliRun r = weft("compile ring_allreduce --topology a100-1x4 --param nRanks=4 --scheduler gc3 --alloc conn");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* k : {"tasks", "sub-pipelines", "thread blocks per rank, max", "thread blocks per rank, mean",
                        "fused primitives", "seconds: parse", "seconds: analyse", "seconds: schedule", "seconds: lower"})
    EXPECT_NE(r.out.find(k), std::string::npos) << k;
}

TEST(Cli, PlanFilesAreWrittenAndChecked) {
  std::string path = testing::TempDir() + "weft_cli_plan_" + std::to_string(getpid()) + ".json";
  CliRun r = weft("compile hm_allgather -t a100-2x4 --out-of-place -o " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  Plan p = load_plan(path);
  EXPECT_FALSE(p.in_place);
  EXPECT_EQ(p.num_ranks, 8);
  CliRun c = weft("compile --check " + path);
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.out.find("deadlock-free"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Cli, BadInputIsOneErrorLine) {
  struct Case {
    std::string args, message;
  };
  for (const Case& c : std::vector<Case>{
           {"compile hm_allreduce -t a100-2x4 --scheduler fifo",
            "weft: unknown scheduler 'fifo' (known: hpds, algo, stage, rr, gc3; as-given for .xml files)\n"},
           {"compile hm_allreduce -t a100-2x4 --alloc greedy", "weft: unknown allocator 'greedy' (known: state, conn, peer, peer-mixed, rank)\n"},
           {"compile hm_allreduce -t a100-4x4 -p nRanks=8",
            "weft: topology a100-4x4 has 16 GPUs (4 nodes x 4) but algorithm hm_allreduce needs 8 ranks\n"},
           {"compile --check /nonexistent/plan.json", "weft: cannot read plan file /nonexistent/plan.json\n"},
           {"compile hm_allreduce -t a100-2x4 -o /nonexistent/dir/plan.json",
            "weft: cannot write plan file /nonexistent/dir/plan.json\n"},
       }) {
    CliRun r = weft(c.args);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(r.err, c.message) << c.args;
    EXPECT_EQ(lines(r.err), 1) << c.args;
  }
  CliRun r = weft("compile no_such_algorithm -t a100-2x4");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace weft
