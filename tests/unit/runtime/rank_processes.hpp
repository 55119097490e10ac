// Ranks as processes for the bootstrap's tests: fork one process per rank, run the body in
// it, and expect every rank to exit 0.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

namespace weft::test {

/// Runs body(rank) in `n` forked processes; each exits with what body returns (2, with the
/// message printed, when it throws). Expects every rank to exit normally with 0.
inline void run_rank_processes(int n, const std::function<int(int rank)>& body) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 2;
      try {
        status = body(r);
      } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", r, e.what());
      } catch (...) {
        std::printf("rank %d: an unknown exception\n", r);
      }
      std::fflush(stdout);
      _exit(status);
    }
    pids.push_back(pid);
  }
  for (int r = 0; r < n; ++r) {
    int st = 0;
    waitpid(pids[static_cast<size_t>(r)], &st, 0);
    EXPECT_TRUE(WIFEXITED(st)) << "rank " << r;
    EXPECT_EQ(WEXITSTATUS(st), 0) << "rank " << r;
  }
}

}  // namespace weft::test
