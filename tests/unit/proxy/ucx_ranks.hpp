// Rank processes for tests of the UCX transport (tests/unit/proxy/test_ucx_transport.cpp,
// tests/unit/part/test_part_ucx.cpp): fork_ranks runs a body per rank in forked processes
// with a deadline; ucx_missing says, asked in a child process, why UCX cannot run here.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net/ucx_transport.hpp"

namespace weft::ucxtest {

/// Why UCX cannot run here ("" if it can), asked in a child process: this test process
/// forks rank processes and must never load or initialize UCX itself (a child of a process
/// with UCX's threads and state would inherit them half-alive).
inline std::string ucx_missing() {
  static std::string why = [] {
    int fds[2];
    if (pipe(fds) != 0) return std::string("pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string w = weft::net::ucx_unavailable_reason();
      ssize_t n = write(fds[1], w.data(), w.size());
      _exit(n == static_cast<ssize_t>(w.size()) ? 0 : 1);
    }
    close(fds[1]);
    std::string w;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) w.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? w : std::string("the UCX probe process failed");
  }();
  return why;
}

#define SKIP_WITHOUT_UCX()                                                     \
  do {                                                                         \
    std::string why_ = ::weft::ucxtest::ucx_missing();                                          \
    if (!why_.empty()) GTEST_SKIP() << why_;                                   \
  } while (0)

/// Forks `n` rank processes running body(rank) (exit status: its return, 2 when it throws);
/// kills them all after `limit_s`. Returns each rank's wait status.
/// `tcp_only`: UCX_TLS=tcp, the network path even on one host (else UCX's own choice).
inline std::vector<int> fork_ranks(int n, const std::function<int(int)>& body, double limit_s = 60, bool tcp_only = true) {
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      if (tcp_only) setenv("UCX_TLS", "tcp", 1);
      int status = 2;
      try {
        status = body(r);
      } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> st(static_cast<size_t>(n), -1);
  auto t0 = std::chrono::steady_clock::now();
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (st[static_cast<size_t>(r)] != -1) continue;
      int s = 0;
      if (waitpid(pids[static_cast<size_t>(r)], &s, WNOHANG) == pids[static_cast<size_t>(r)]) {
        st[static_cast<size_t>(r)] = s;
        --left;
      }
    }
    if (left > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) {
      for (int r = 0; r < n; ++r)
        if (st[static_cast<size_t>(r)] == -1) kill(pids[static_cast<size_t>(r)], SIGKILL);
      ADD_FAILURE() << "rank processes still running after " << limit_s << " s: a hang";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return st;
}

inline bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

}  // namespace weft::ucxtest
