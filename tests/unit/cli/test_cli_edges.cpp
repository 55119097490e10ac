// Edges of the `weft` command line (issue 26), each run through the built binary without a
// GPU: the bootstrap secret never printed by `weft env`; `weft compile --no-verify` refused
// with the budget's message under `ulimit -v` instead of ending in std::bad_alloc; `weft
// bench --ranks` honoured by the simulated sweep, too many rows and an unknown scheduler
// refused; --help and --version that cannot be written exit 2.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>
#include <string>

#include "cli_run.hpp"

namespace weft {
namespace {

using weft::test::CliRun;

CliRun weft(const std::string& args) {
  return weft::test::run_command("CUDA_VISIBLE_DEVICES= " + std::string(WEFT_CLI) + " " + args, "cli_edges");
}

/// Lines of the table rows of `out` (lines that start with a digit after spaces).
int table_rows(const std::string& out) {
  std::istringstream in(out);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    const size_t p = line.find_first_not_of(' ');
    n += p != std::string::npos && line[p] >= '0' && line[p] <= '9';
  }
  return n;
}

TEST(CliEdges, WeftEnvShowsTheSecretAsSetHidden) {
  const std::string secret = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";
  CliRun r = weft::test::run_command("WEFT_BOOTSTRAP_SECRET=" + secret + " " + std::string(WEFT_CLI) + " env", "cli_edges");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("WEFT_BOOTSTRAP_SECRET  (string, default '', set (hidden))"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("c0ffee"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("c0ffee"), std::string::npos) << r.err;
}

TEST(CliEdges, CompileWithoutVerifyIsRefusedWithinUlimitNotBadAlloc) {
  // 40 M chunks on 8 ranks: 640 M chunk slots, whose task graph alone takes 5.1 GB (two
  // int32 arrays per slot); the estimate used to say 2.6 GB and the run ended in
  // std::bad_alloc (exit 3) under a 4 GB address space.
  const std::string limit = "ulimit -v 4000000; ";
  CliRun big = weft::test::run_command(
      limit + std::string(WEFT_CLI) + " compile ring_allreduce -t h200-1x8 -p nChunks=40000000 --no-verify", "cli_edges");
  EXPECT_EQ(big.status, 2) << big.err;
  EXPECT_NE(big.err.find("compiling ring_allreduce (112 transfers, 640000000 chunk slots) needs about"), std::string::npos)
      << big.err;
  EXPECT_NE(big.err.find("more than the budget of"), std::string::npos) << big.err;
  EXPECT_EQ(big.err.find("bad_alloc"), std::string::npos) << big.err;
  EXPECT_EQ(big.err.find("internal error"), std::string::npos) << big.err;
  // One that fits compiles under the same limit.
  CliRun small = weft::test::run_command(
      limit + std::string(WEFT_CLI) + " compile ring_allreduce -t h200-1x8 -p nChunks=1000000 --no-verify", "cli_edges");
  EXPECT_EQ(small.status, 0) << small.err;
}

TEST(CliEdges, SimulatedBenchHonoursRanks) {
  CliRun four = weft("bench AllReduce -a ring_allreduce --ranks 4 --sizes 1M:1M");
  EXPECT_EQ(four.status, 0) << four.err;
  EXPECT_NE(four.out.find("SIMULATED on topology h200-1x4 (4 GPUs)"), std::string::npos) << four.out;
  EXPECT_NE(four.out.find("# ring_allreduce (AllReduce, 4 ranks)"), std::string::npos) << four.out;
  CliRun three = weft("bench AllReduce -a ring_allreduce --ranks 3 --sizes 1M:1M");
  EXPECT_EQ(three.status, 2) << three.err;
  EXPECT_NE(three.err.find("weft bench: --ranks 3 without a GPU simulates topology h200-1x3: unknown topology preset"),
            std::string::npos)
      << three.err;
  CliRun clash = weft("bench AllReduce -a ring_allreduce --ranks 4 -t h200-1x2 --sizes 1M:1M");
  EXPECT_EQ(clash.status, 2) << clash.err;
  EXPECT_NE(clash.err.find("--ranks 4 but topology h200-1x2 has 2 GPUs"), std::string::npos) << clash.err;
}

TEST(CliEdges, BenchRowsAreCappedWithAnErrorNotSilently) {
  // --factor 1.0000001 adds one byte per row: 64:127 is 64 rows, 64:128 would be 65.
  CliRun fits = weft("bench AllReduce -a ring_allreduce --sizes 64:127 --factor 1.0000001");
  EXPECT_EQ(fits.status, 0) << fits.err;
  EXPECT_EQ(table_rows(fits.out), 64) << fits.out;
  CliRun over = weft("bench AllReduce -a ring_allreduce --sizes 64:128 --factor 1.0000001");
  EXPECT_EQ(over.status, 2) << over.err;
  EXPECT_NE(over.err.find("--sizes 64:128 with --factor 1.0000001 makes more than 64 rows"), std::string::npos)
      << over.err;
  EXPECT_EQ(table_rows(over.out), 0) << over.out;
  CliRun wide = weft("bench --factor 1.0000001");
  EXPECT_EQ(wide.status, 2) << wide.err;
  EXPECT_NE(wide.err.find("makes more than 64 rows"), std::string::npos) << wide.err;
}

TEST(CliEdges, UnknownSchedulerIsTheSameErrorForBenchAndSimulate) {
  CliRun bench = weft("bench -s bogus --sizes 1M:1M");
  CliRun sim = weft("simulate ring_allreduce -t h200-1x2 --size 1M -s bogus");
  EXPECT_EQ(sim.status, 2) << sim.err;
  EXPECT_EQ(bench.status, 2) << bench.err;
  EXPECT_NE(bench.err.find("weft bench: unknown scheduler 'bogus'"), std::string::npos) << bench.err;
  EXPECT_NE(sim.err.find("unknown scheduler 'bogus'"), std::string::npos) << sim.err;
  EXPECT_EQ(table_rows(bench.out), 0) << bench.out;
}

TEST(CliEdges, HelpAndVersionThatCannotBeWrittenExit2) {
  if (access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no /dev/full here";
  for (const char* args : {"--help", "--version", "bench --help", "compile --help"}) {
    SCOPED_TRACE(args);
    CliRun r = weft(std::string(args) + " >/dev/full");
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("weft: cannot write the standard output: No space left on device"), std::string::npos) << r.err;
  }
  CliRun ok = weft("--version");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("weft ", 0), 0u) << ok.out;
}

}  // namespace
}  // namespace weft
