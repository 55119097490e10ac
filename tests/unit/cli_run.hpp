// Runs a `weft` command line for the CLI tests of every stage and captures what it printed.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace weft::test {

/// What a command printed and its exit status (-1 when it did not exit normally).
struct CliRun {
  int status = -1;
  std::string out, err;
};

/// Runs `command` through the shell. Standard error goes to a temporary file named per
/// process and per `tag` (several checkouts may run their tests at once on one machine),
/// read back and removed.
inline CliRun run_command(const std::string& command, const std::string& tag) {
  const std::string err_path = testing::TempDir() + "weft_" + tag + "_err_" + std::to_string(getpid()) + ".txt";
  CliRun r;
  FILE* f = popen((command + " 2>" + err_path).c_str(), "r");
  if (!f) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (FILE* e = fopen(err_path.c_str(), "r")) {
    while ((n = fread(buf, 1, sizeof buf, e)) > 0) r.err.append(buf, n);
    fclose(e);
  }
  std::remove(err_path.c_str());
  return r;
}

}  // namespace weft::test
