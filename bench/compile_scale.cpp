// Compile time and memory of HM AllReduce as the cluster grows (issue 4; paper 001 Fig. 10(a)).
//
//   compile_scale [--sizes 8,32,128,1024] [--gpus-per-node 8] [--scheduler hpds] [--alloc state]
//                 [--instances 0] [--algo hm_allreduce]
//
// Each size runs in its own child process, so "peak MiB" is that size's own peak resident set
// (getrusage). The algorithm is the built-in (parsed from algorithms/<algo>.rccl with nRanks
// and GPUPerNode set), the topology the a100-NxG preset. Prints a table; asserts nothing.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "util/error.hpp"
#include "util/huge_pages.hpp"
#include "util/text.hpp"

namespace {

struct Row {
  int gpus = 0;
  long tasks = 0, subpipelines = 0, slots = 0, tbs_max = 0;
  double parse = 0, verify = 0, analyse = 0, schedule = 0, lower = 0, total = 0;
  long peak_mib = 0;
  char error[200] = {0};
};

Row measure(int gpus, int per_node, const std::string& algo, const weft::CompileOptions& o) {
  Row row;
  row.gpus = gpus;
  try {
    auto t0 = std::chrono::steady_clock::now();
    weft::Algorithm a = weft::load_algorithm(algo, {{"nRanks", std::to_string(gpus)}, {"GPUPerNode", std::to_string(per_node)}});
    row.parse = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto t1 = std::chrono::steady_clock::now();
    weft::verify_or_throw(a);
    row.verify = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    weft::Topology topo = weft::topology_preset(weft::text::format("a100-%dx%d", gpus / per_node, per_node));
    weft::CompileResult r = weft::compile(a, topo, o);
    row.tasks = r.tasks;
    row.subpipelines = static_cast<long>(r.pipeline.subpipelines.size());
    row.slots = r.slots;
    row.tbs_max = r.plan.max_tbs_per_rank();
    row.analyse = r.seconds.analyse;
    row.schedule = r.seconds.schedule;
    row.lower = r.seconds.lower;
    row.total = row.parse + row.verify + r.seconds.total;
  } catch (const std::exception& e) {
    std::snprintf(row.error, sizeof row.error, "%s", e.what());
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  row.peak_mib = u.ru_maxrss / 1024;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  weft::reexec_with_huge_pages(argv);  // as the weft command does
  std::vector<int> sizes = {8, 32, 128, 1024};
  int per_node = 8;
  std::string algo = "hm_allreduce";
  weft::CompileOptions o;
  o.keep_graph = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--sizes") {
      sizes.clear();
      for (const std::string& s : weft::text::split(v, ',')) sizes.push_back(std::atoi(s.c_str()));
    } else if (k == "--gpus-per-node") per_node = std::atoi(v.c_str());
    else if (k == "--scheduler") o.scheduler = v;
    else if (k == "--alloc") o.allocator = v;
    else if (k == "--instances") o.instances = std::atoi(v.c_str());
    else if (k == "--algo") algo = v;
    else {
      std::fprintf(stderr, "compile_scale: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::printf("%s, %s / %s, a100 presets, %d GPUs per node; seconds per phase, peak resident memory per size\n",
              algo.c_str(), o.scheduler.c_str(), o.allocator.c_str(), per_node);
  weft::text::Table t({"GPUs", "tasks", "sub-pipelines", "slots", "TBs/rank", "parse", "verify", "analyse", "schedule",
                       "lower", "total", "peak MiB"});
  for (int gpus : sizes) {
    int fd[2];
    if (pipe(fd) != 0) return 3;
    pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      Row row = measure(gpus, per_node, algo, o);
      ssize_t n = write(fd[1], &row, sizeof row);
      _exit(n == static_cast<ssize_t>(sizeof row) ? 0 : 1);
    }
    close(fd[1]);
    Row row;
    ssize_t got = read(fd[0], &row, sizeof row);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got != static_cast<ssize_t>(sizeof row)) {
      std::snprintf(row.error, sizeof row.error, "the measuring process died (status %d)", status);
      row.gpus = gpus;
    }
    if (row.error[0]) {
      t.add_row({std::to_string(gpus), std::string("error: ") + row.error, "", "", "", "", "", "", "", "", "", ""});
      continue;
    }
    auto f = [](double x) { return weft::text::format("%.2f", x); };
    t.add_row({std::to_string(gpus), std::to_string(row.tasks), std::to_string(row.subpipelines), std::to_string(row.slots),
               std::to_string(row.tbs_max), f(row.parse), f(row.verify), f(row.analyse), f(row.schedule), f(row.lower),
               f(row.total), std::to_string(row.peak_mib)});
  }
  std::fputs(t.str().c_str(), stdout);
  return 0;
}
