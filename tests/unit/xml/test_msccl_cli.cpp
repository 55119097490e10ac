// The weft command on MSCCL XML files: verify and compile take them as they take ResCCLang
// files, and compile --scheduler as-given keeps the file's own schedule.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "ir/plan_json.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

using weft::test::CliRun;

CliRun run_weft(const std::string& args) {
  return weft::test::run_command(std::string(WEFT_CLI) + " " + args, "xml_cli");
}

TEST(MscclCli, VerifyTakesXmlFiles) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  CliRun r = run_weft("verify " + dir + "/ndv5-ar-1m.xml " + dir + "/r48ll.xml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("all_reduce_llm"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("allreduce_ring_4channelsperring"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  CliRun bad = run_weft("verify " + dir + "/r48ll.xml --param InPlace=0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("an out-of-place import was asked for, but the file runs in place only"), std::string::npos) << bad.err;
}

TEST(MscclCli, CompileSchedulesXmlAfresh) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  CliRun r = run_weft("compile " + dir + "/r48ll.xml --topology h200-1x8 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["algorithm"], "allreduce_ring_4channelsperring");
  EXPECT_EQ(j["scheduler"], "hpds");
  EXPECT_GT(j["tasks"].get<int>(), 0);  // the 896 transfers, after the compiler's aggregation
  EXPECT_LE(j["tasks"].get<int>(), 896);
}

TEST(MscclCli, CompileAsGivenKeepsTheFilesSchedule) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  std::string path = testing::TempDir() + "weft_xml_as_given_" + std::to_string(getpid()) + ".json";
  CliRun r = run_weft("compile " + dir + "/ap2ll.xml --topology h200-1x8 --scheduler as-given --json -o " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["scheduler"], "as-given");
  EXPECT_EQ(j["allocator"], "as-given");
  EXPECT_EQ(j["execution"], "algorithm");
  EXPECT_EQ(j["topology"], "h200-1x8");
  EXPECT_EQ(j["tbs_per_rank_max"].get<int>(), 16);
  EXPECT_EQ(j["tasks"].get<int>(), 1120);
  Plan p = load_plan(path);
  EXPECT_EQ(p.scheduler, "as-given");
  EXPECT_EQ(p.protocol, "LL");
  EXPECT_EQ(p.max_tbs_per_rank(), 16);
  std::remove(path.c_str());
  // The text form and the --schedule spelling.
  CliRun t = run_weft("compile " + dir + "/ndv5-ag-1m.xml -t h200-1x8 --schedule as-given");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("the file's own schedule (as-given)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("thread blocks per rank, max"), std::string::npos) << t.out;
}

TEST(MscclCli, SimulateComparesWeftsScheduleWithTheFiles) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  CliRun r = run_weft("simulate " + dir + "/r48ll.xml -t h200-1x8 -s hpds,as-given --size 1M --json");
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  for (size_t nl; (nl = r.out.find('\n', start)) != std::string::npos; start = nl + 1)
    if (nl > start) lines.push_back(nlohmann::json::parse(r.out.substr(start, nl - start)));
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0]["scheduler"], "hpds");
  EXPECT_EQ(lines[1]["scheduler"], "as-given");
  EXPECT_EQ(lines[1]["execution"], "algorithm");
  for (const auto& j : lines) {
    EXPECT_EQ(j["algorithm"], "allreduce_ring_4channelsperring");
    EXPECT_GT(j["time_us"].get<double>(), 0);
  }
  CliRun table = run_weft("simulate " + dir + "/ndv5-ag-1m.xml -t h200-1x8 --size 1M");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("all_gather_llm"), std::string::npos) << table.out;
  CliRun rccl = run_weft("simulate ring_allreduce -t h200-1x8 -s as-given --size 1M");
  EXPECT_NE(rccl.status, 0);
  EXPECT_NE(rccl.err.find("scheduler as-given runs an MSCCL XML file's own schedule"), std::string::npos) << rccl.err;
}

TEST(MscclCli, AsGivenErrorsAreOneLine) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  struct Case {
    std::string args, words;
  };
  for (const Case& c : {Case{"compile ring_allreduce -t h200-1x8 --scheduler as-given", "is not an .xml file"},
                        Case{"compile " + dir + "/r48ll.xml -t a100-2x8 --scheduler as-given", "is for 8 gpus, topology a100-2x8 has 16"},
                        Case{"compile " + dir + "/r48ll.xml --scheduler as-given", "needs --topology"},
                        Case{"compile " + dir + "/r48ll.xml -t h200-1x8 --scheduler nope", "as-given for .xml files"}}) {
    CliRun r = run_weft(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace weft
