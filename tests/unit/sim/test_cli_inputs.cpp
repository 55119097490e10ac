// Bad inputs to `weft` (issue 19, item 9): each is one clear error line and exit status 2,
// never a crash, an "internal error", a false result or exit 0. What the verifier refuses
// is never simulated; the compiler and the simulator refuse what would exceed their memory
// budget before allocating it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"

namespace weft {
namespace {

using weft::test::CliRun;

CliRun weft(const std::string& args) {
  // No GPU for the command, whatever the machine has: `weft bench` then simulates.
  return weft::test::run_command("CUDA_VISIBLE_DEVICES= " + std::string(WEFT_CLI) + " " + args, "cli_inputs");
}

CliRun weft_with_env(const std::string& env, const std::string& args) {
  return weft::test::run_command("CUDA_VISIBLE_DEVICES= " + env + " " + std::string(WEFT_CLI) + " " + args, "cli_inputs");
}

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "weft_cli_inputs_" + std::to_string(getpid()) + "_" + name;
}

std::string broken(const std::string& name) { return std::string(WEFT_TEST_DATA_DIR) + "/tests/data/broken/" + name; }

std::vector<std::string> broken_files() {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(std::string(WEFT_TEST_DATA_DIR) + "/tests/data/broken"))
    if (e.path().extension() == ".rccl") v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

/// Whether the output has a table row (a line that starts with a size).
bool has_rows(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    const size_t p = line.find_first_not_of(' ');
    if (p != std::string::npos && std::isdigit(static_cast<unsigned char>(line[p]))) return true;
  }
  return false;
}

// An error is one located sentence: no "internal error", no CLI11 self-contradiction.
void expect_clean_error(const CliRun& r, const std::string& must_contain) {
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find(must_contain), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("deadlock"), std::string::npos) << r.err;
}

TEST(CliInputs, SimulateRunsTheVerifierOnEveryBrokenFile) {
  const std::vector<std::string> files = broken_files();
  ASSERT_EQ(files.size(), 10u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    CliRun r = weft("simulate " + broken(f) + " -t h200-1x4 --size 1M");
    expect_clean_error(r, "fails verification");
    EXPECT_FALSE(has_rows(r.out)) << r.out;  // never simulated
  }
}

TEST(CliInputs, SimulatedBenchRunsTheVerifier) {
  for (const std::string f : {"race.rccl", "missing_reduction.rccl", "wrong_chunk.rccl"}) {
    SCOPED_TRACE(f);
    CliRun r = weft("bench -a " + broken(f) + " -t h200-1x4 --sizes 1M:2M");
    expect_clean_error(r, "fails verification");
    EXPECT_FALSE(has_rows(r.out)) << r.out;
  }
}

TEST(CliInputs, AHugeChunkCountIsRefusedNotSimulated) {
  CliRun r = weft("simulate ring_allreduce -t h200-1x8 -p nChunks=100000000 --size 256M");
  expect_clean_error(r, "too large to verify");
  EXPECT_FALSE(has_rows(r.out)) << r.out;
}

TEST(CliInputs, TheMemoryBudgetRefusesBeforeAllocating) {
  CliRun c = weft("compile ring_allreduce -t a100-8x8 --memory-budget 1M");
  expect_clean_error(c, "more than the budget of 1 MiB (raise it with --memory-budget");
  EXPECT_NE(c.err.find("(8064 transfers, 8192 chunk slots)"), std::string::npos) << c.err;  // 2 x 64 x 63
  CliRun s = weft("simulate ring_allreduce -t a100-8x8 --size 64M --memory-budget 1M");
  expect_clean_error(s, "more than the budget of 1 MiB");
  CliRun b = weft("bench -a ring_allreduce -t h200-1x8 --sizes 1M:1M --memory-budget 16K");
  expect_clean_error(b, "more than the budget of");
  // The plan's own slots count once the instances are known: room for the analysis only.
  CliRun p = weft("compile ring_allreduce -t a100-8x8 --instances 64 --memory-budget 8M");
  expect_clean_error(p, "the plan of ring_allreduce at 64 instances per link");
  expect_clean_error(weft("compile ring_allreduce -t h200-1x2 --memory-budget 0"), "--memory-budget: the budget must be");
  EXPECT_EQ(weft("compile ring_allreduce -t a100-8x8 --memory-budget 1G").status, 0);
  // WEFT_MEMORY_BUDGET sets the default; the option overrides it; a bad value names it.
  expect_clean_error(weft_with_env("WEFT_MEMORY_BUDGET=1M", "compile ring_allreduce -t a100-8x8"),
                     "more than the budget of 1 MiB");
  EXPECT_EQ(weft_with_env("WEFT_MEMORY_BUDGET=1M", "compile ring_allreduce -t a100-8x8 --memory-budget 1G").status, 0);
  expect_clean_error(weft_with_env("WEFT_MEMORY_BUDGET=lots", "compile ring_allreduce -t h200-1x2"),
                     "WEFT_MEMORY_BUDGET: 'lots' is not a byte size");
}

TEST(CliInputs, ByteSizesOf2To64OrMoreAreAClearError) {
  const std::string sim = "simulate ring_allreduce -t h200-1x2 ";
  expect_clean_error(weft(sim + "--size 18446744073709551616"), "--size: byte size '18446744073709551616' is too large");
  expect_clean_error(weft(sim + "--sizes 1M:16777216T"), "--sizes: byte size '16777216T' is too large");
  expect_clean_error(weft(sim + "--size 1M --microbatch 99999999999999999999"), "--microbatch: byte size");
  expect_clean_error(weft("bench --sizes 8:99999999999999999999999"), "--sizes: byte size");
  // The largest size that fits is read, and a micro-batch of 2^64 - 1 bytes is one per slot.
  CliRun r = weft(sim + "--size 1M --microbatch 18446744073709551615");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(has_rows(r.out)) << r.out;
}

TEST(CliInputs, ExtremeCostFiguresAreOutOfRangeNotADeadlock) {
  const std::string sim = "simulate ring_allreduce -t h200-1x4 --size 1M --cost ";
  for (const std::string c : {"tb_copy_GBps=1e300", "tb_copy_GBps=1e-300", "primitive_overhead_us=1e300",
                               "hbm_bandwidth_GBps=1e-300", "nvlink_bandwidth_GBps=1e-200", "contention_gamma=1e300",
                               "nvlink_latency_us=1e20"}) {
    SCOPED_TRACE(c);
    CliRun r = weft(sim + c);
    expect_clean_error(r, "--cost: topology h200-1x4: " + c.substr(0, c.find('=')) + " = ");
    EXPECT_NE(r.err.find("is out of range"), std::string::npos) << r.err;
  }
  // The bounds themselves simulate, at the smallest and a large size.
  for (const std::string size : {"4", "4G"})
    for (const std::string c : {"tb_copy_GBps=1e6,nvlink_bandwidth_GBps=1e6,hbm_bandwidth_GBps=1e6",
                                 "nvlink_latency_us=1e6,primitive_overhead_us=1e6", "contention_gamma=1e3",
                                 "hbm_bandwidth_GBps=1e-3", "nvlink_bandwidth_GBps=1e-3,tb_copy_GBps=1e-3"}) {
      SCOPED_TRACE(c + " at " + size);
      CliRun r = weft("simulate ring_allreduce -t h200-1x4 --size " + size + " --cost " + c);
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_TRUE(has_rows(r.out)) << r.out;
    }
}

TEST(CliInputs, OutputThatCannotBeWrittenIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  for (const std::string cmd : {"simulate ring_allreduce -t h200-1x2 --size 1M", "env", "topology h200-1x2",
                                 "compile ring_allreduce -t h200-1x2 --json", "bench --sizes 1M:1M"}) {
    SCOPED_TRACE(cmd);
    CliRun r = weft(cmd + " >/dev/full");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("weft: cannot write the standard output"), std::string::npos) << r.err;
  }
}

TEST(CliInputs, BenchCsvIsWrittenOrRefused) {
  expect_clean_error(weft("bench --sizes 1M:1M --csv /nonexistent-weft-dir/rows.csv"),
                     "cannot write the --csv file '/nonexistent-weft-dir/rows.csv'");
  const std::string path = temp_path("rows.csv");
  CliRun r = weft("bench AllReduce --sizes 1M:2M --type float64 --csv " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(path);
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header, "algorithm,collective,bytes,count,type,time_us,algbw_GBps,busbw_GBps,tbs_per_rank");
  int rows = 0;
  while (std::getline(in, row)) {
    ++rows;
    EXPECT_NE(row.find(",AllReduce,"), std::string::npos) << row;
    EXPECT_NE(row.find(",float64,"), std::string::npos) << row;
  }
  EXPECT_GE(rows, 2);
  EXPECT_NE(r.out.find("131072  float64"), std::string::npos) << r.out;  // 1 MiB of 8-byte elements
  std::remove(path.c_str());
}

TEST(CliInputs, BenchRefusesBadOptionsWithoutAGpu) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--ranks -1", "--ranks: Value -1 not in range"},
      {"--iters -5", "--iters: Value -5 not in range"},
      {"--warmup -1", "--warmup: Value -1 not in range"},
      {"--type float128", "--type: float128 not in {int8,"},
      {"--op xor", "--op: xor not in {sum,"},
      {"--factor nan", "--factor nan must be more than 1 and at most 1024"},
      {"--factor 1", "--factor 1 must be more than 1"},
      {"--factor inf", "--factor inf must be"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    CliRun r = weft("bench --sizes 1M:1M " + args);
    expect_clean_error(r, message);
    EXPECT_FALSE(has_rows(r.out)) << r.out;
  }
}

TEST(CliInputs, CompileCheckRefusesBadPlanFields) {
  const std::string plan = temp_path("plan.json");
  ASSERT_EQ(weft("compile ring_allreduce -t h200-1x2 -o " + plan).status, 0);
  std::ifstream in(plan);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string good = ss.str();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    const std::string path = temp_path("bad.json");
    std::ofstream(path) << s;
    return weft("compile --check " + path);
  };
  const std::string bad = temp_path("bad.json");
  expect_clean_error(with("\"protocol\": \"Simple\"", "\"protocol\": \"LL256\""),
                     bad + ": protocol: is \"LL256\", expected \"Simple\", \"LL\" or \"LL128\"");
  expect_clean_error(with("\"root\": 0", "\"root\": 99"), bad + ": root: 99 is not a rank in [0, 2)");
  expect_clean_error(with("\"count\": ", "\"colour\": 3, \"count\": "),
                     bad + ": ranks[0].tbs[0].slots[0]: unknown field \"colour\"");
  expect_clean_error(with("\"num_subpipelines\"", "\"extra\": 1, \"num_subpipelines\""), ": (top): unknown field \"extra\"");
  EXPECT_EQ(weft("compile --check " + plan).status, 0);
  std::remove(plan.c_str());
  std::remove(bad.c_str());
}

TEST(CliInputs, ATopologyGpuNamingAMissingNicIsRefused) {
  CliRun t = weft("topology h200-1x2");
  ASSERT_EQ(t.status, 0);
  std::string s = t.out;
  const size_t at = s.find("\"nic_of_gpu\": []");
  ASSERT_NE(at, std::string::npos) << s;
  s.replace(at, 16, "\"nic_of_gpu\": [0, 3]");
  const std::string path = temp_path("topo.json");
  std::ofstream(path) << s;
  CliRun r = weft("simulate ring_allreduce -t " + path + " --size 1M");
  expect_clean_error(r, path + ": topology h200-1x2: nic_of_gpu[0] = 0 names a NIC, but nics_per_node is 0");
  std::remove(path.c_str());
}

TEST(CliInputs, OptionErrorsDoNotContradictThemselves) {
  CliRun r = weft("verify --max-errors 0 ring_allreduce");
  // CLI11 words the range "1 to 1000000" (Debian 12) or "[1 - 1000000]" (Ubuntu 24.04).
  expect_clean_error(r, "--max-errors: Value 0 not in range");
  EXPECT_NE(r.err.find("1000000"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("179769"), std::string::npos) << r.err;  // no 309-digit bound
}

TEST(CliInputs, AnUnknownCommandSaysSo) {
  CliRun r = weft("frobnicate --size 1M");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "weft: unknown command 'frobnicate'; see weft --help\n");
  CliRun none = weft("");
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("weft: give a command"), std::string::npos) << none.err;
  EXPECT_EQ(weft("--version").status, 0);
  EXPECT_EQ(weft("env").status, 0);
}

}  // namespace
}  // namespace weft
