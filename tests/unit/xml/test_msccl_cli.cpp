// The weft command on MSCCL XML files (the project's own, tests/data/msccl): verify and
// compile take them as they take ResCCLang files, and compile --scheduler as-given keeps
// the file's own schedule.
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

// The project's own files (tests/data/msccl): hand-written ones and weft's exports of built-ins.
std::string hand(const std::string& file) { return test::own_msccl_dir() + "/hand/" + file; }
std::string exported(const std::string& file) { return test::own_msccl_dir() + "/exported/" + file; }

TEST(MscclCli, VerifyTakesXmlFiles) {
  CliRun r = run_weft("verify " + hand("ring_allreduce_2ch.xml") + " " + exported("ring_allreduce_8_ll.xml") + " " +
                      hand("reduce_scatter_scratch.xml") + " " + hand("custom_alltonext.xml"));
  EXPECT_EQ(r.status, 0) << r.err;
  for (const char* name : {"ring_allreduce_2ch", "ring_allreduce", "reduce_scatter_scratch", "alltonext"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << ": " << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  CliRun bad = run_weft("verify " + hand("ring_allreduce_2ch.xml") + " --param InPlace=0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("an out-of-place import was asked for, but the file runs in place only"), std::string::npos) << bad.err;
}

TEST(MscclCli, CompileSchedulesXmlAfresh) {
  CliRun r = run_weft("compile " + hand("ring_allreduce_2ch.xml") + " --topology h200-1x4 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["algorithm"], "ring_allreduce_2ch");
  EXPECT_EQ(j["scheduler"], "hpds");
  EXPECT_GT(j["tasks"].get<int>(), 0);  // the 48 transfers, after the compiler's aggregation
  EXPECT_LE(j["tasks"].get<int>(), 48);
}

TEST(MscclCli, CompileAsGivenKeepsTheFilesSchedule) {
  std::string path = testing::TempDir() + "weft_xml_as_given_" + std::to_string(getpid()) + ".json";
  CliRun r = run_weft("compile " + hand("ring_allreduce_2ch.xml") + " --topology h200-1x4 --scheduler as-given --json -o " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["scheduler"], "as-given");
  EXPECT_EQ(j["allocator"], "as-given");
  EXPECT_EQ(j["execution"], "algorithm");
  EXPECT_EQ(j["topology"], "h200-1x4");
  EXPECT_EQ(j["tbs_per_rank_max"].get<int>(), 2);
  EXPECT_EQ(j["tasks"].get<int>(), 48);
  Plan p = load_plan(path);
  EXPECT_EQ(p.scheduler, "as-given");
  EXPECT_EQ(p.protocol, "LL128");
  EXPECT_EQ(p.max_tbs_per_rank(), 2);
  std::remove(path.c_str());
  // The text form and the --schedule spelling.
  CliRun t = run_weft("compile " + hand("allgather_direct.xml") + " -t h200-1x4 --schedule as-given");
  ASSERT_EQ(t.status, 0) << t.err;
  EXPECT_NE(t.out.find("the file's own schedule (as-given)"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("thread blocks per rank, max"), std::string::npos) << t.out;
}

// Files MSCCL runs that weft once refused as-given: compile and simulate agree on each.
TEST(MscclCli, CompileAndSimulateAgreeAsGiven) {
  for (const char* f : {"same_tb_dependency.xml", "alltoall_threestep.xml", "reduce_scatter_scratch.xml",
                        "custom_alltonext.xml", "broadcast_chain.xml", "reduce_chain.xml"}) {
    const std::string topo = std::string(f) == "same_tb_dependency.xml" ? "h200-1x2" : "h200-1x4";
    CliRun c = run_weft("compile " + hand(f) + " -t " + topo + " -s as-given --json");
    EXPECT_EQ(c.status, 0) << f << ": " << c.err;
    CliRun s = run_weft("simulate " + hand(f) + " -t " + topo + " -s as-given --size 1M --json");
    EXPECT_EQ(s.status, 0) << f << ": " << s.err;
  }
}

TEST(MscclCli, SimulateComparesWeftsScheduleWithTheFiles) {
  CliRun r = run_weft("simulate " + hand("ring_allreduce_2ch.xml") + " -t h200-1x4 -s hpds,as-given --size 1M --json");
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
    EXPECT_EQ(j["algorithm"], "ring_allreduce_2ch");
    EXPECT_GT(j["time_us"].get<double>(), 0);
  }
  CliRun table = run_weft("simulate " + hand("allgather_direct.xml") + " -t h200-1x4 --size 1M");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("allgather_direct"), std::string::npos) << table.out;
  CliRun rccl = run_weft("simulate ring_allreduce -t h200-1x8 -s as-given --size 1M");
  EXPECT_NE(rccl.status, 0);
  EXPECT_NE(rccl.err.find("scheduler as-given runs an MSCCL XML file's own schedule"), std::string::npos) << rccl.err;
}

TEST(MscclCli, AsGivenErrorsAreOneLine) {
  const std::string ring = exported("ring_allreduce_8_ll.xml");
  struct Case {
    std::string args, words;
  };
  for (const Case& c : {Case{"compile ring_allreduce -t h200-1x8 --scheduler as-given", "is not an .xml file"},
                        Case{"compile " + ring + " -t a100-2x8 --scheduler as-given", "is for 8 gpus, topology a100-2x8 has 16"},
                        Case{"compile " + ring + " --scheduler as-given", "needs --topology"},
                        Case{"compile " + ring + " -t h200-1x8 --scheduler nope", "as-given for .xml files"}}) {
    CliRun r = run_weft(c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.err.find(c.words), std::string::npos) << c.args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace weft
