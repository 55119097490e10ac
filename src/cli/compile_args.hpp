// `weft compile`'s options, shared by its plain path (cmd_compile.cpp) and the path that
// compiles for one call size with the simulator's help (compile_sized.cpp).
#pragma once

#include <string>

#include "compile/deadlock.hpp"

namespace weft::cli {

struct CompileArgs {
  std::string algo, topology, params, scheduler = "hpds", allocator = "state", protocol = "Simple";
  std::string output, check, memory_budget;
  std::string size;               ///< --size: compile for calls of this size
  std::string microbatch = "1M";  ///< --microbatch: what the simulator runs with --size
  int instances = 0;
  int max_tbs = 0;
  int fifo_depth = kDefaultFifoDepth;
  bool out_of_place = false, no_fuse = false, no_aggregate = false, no_verify = false, json = false;
  bool no_tune = false;
  double tolerance = 0;           ///< --tolerance: TuneOptions::tolerance
  double max_idle = 1;            ///< --max-idle: TuneOptions::max_idle
  double idle_cost = 0.02;        ///< --idle-cost: TuneOptions::idle_cost
};

/// `weft compile --size S` (and `--scheduler auto`, which needs it): instances tuned for the
/// size, or the schedule chosen among the compiler's schedulers and an MSCCL file's own by
/// the simulator; --json says which and why.
void run_compile_sized(const CompileArgs& a);

}  // namespace weft::cli
