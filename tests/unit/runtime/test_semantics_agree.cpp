// The three codes that execute plans must agree: the compiler's deadlock check
// (compile/deadlock.hpp, exact for a FIFO depth), the runtime's CPU emulator
// (runtime/plan_emulator.hpp, which runs a lowered plan on real bytes as the GPU executor
// does) and the simulator's engine (sim/engine.cpp, which times it). For every built-in
// algorithm under every scheduler, both placements and one or two instances, and for the
// published MSCCL files' own schedules, at FIFO depths 1, 2 and 4: the check passes, the
// emulator finishes without deadlock and reproduces the host reference exactly, and the
// simulator finishes with several micro-batches per chunk. A plan the check passes but the
// emulator cannot run would be a hang on a GPU; one whose result differs would be a wrong
// answer; one the simulator cannot finish would be a prediction of nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_import.hpp"
#include "runtime/plan_lowering.hpp"
#include "runtime/plan_source.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "util/error.hpp"
#include "xml/xml_test_util.hpp"

namespace weft {
namespace {

/// "" when the emulator runs the plan at `depth` to the host reference; else what failed.
std::string emulate_at(const Plan& p, int depth) {
  try {
    check_plan_on_emulator(lower_plan(p, p.num_ranks, 64), depth);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/// "" when the simulator finishes the plan at `depth` with 8 micro-batches per chunk slot;
/// else what failed.
std::string simulate_at(const Plan& p, const Topology& topo, int depth) {
  try {
    sim::Simulator s(p, topo);
    sim::SimOptions o;
    o.microbatch_bytes = 4096;
    o.bytes = 8 * o.microbatch_bytes * static_cast<uint64_t>(std::max({p.input_chunks, p.output_chunks, 1}));
    o.fifo_depth = depth;
    sim::SimReport r = s.run(o);
    if (!(r.time_us > 0)) return "the simulator reports no time";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SemanticsAgree, CompiledBuiltinsUnderEveryScheduler) {
  int cases = 0;
  for (const std::string& name : builtin_algorithm_names())
    for (int R : {2, 3, 4})
      for (const char* sched : {"hpds", "rr", "gc3", "algo", "stage"})
        for (bool in_place : {false, true})
          for (int instances : {1, 2}) {
            ParamMap params{{"nRanks", std::to_string(R)}};
            if (name.rfind("hm_", 0) == 0 || name == "alltoall_twostep" || name == "alltonext")
              params["GPUPerNode"] = std::to_string(R);
            Algorithm a = load_algorithm(name, params);
            Topology topo = topology_preset("h200-1x8");
            topo.gpus_per_node = R;
            topo.name = "h200-1x" + std::to_string(R);
            CompileOptions o;
            o.scheduler = sched;
            o.in_place = in_place;
            o.instances = instances;
            o.fifo_depth = 1;
            Plan p = compile(a, topo, o).plan;
            for (int depth : {1, 2, 4}) {
              SCOPED_TRACE(name + " R=" + std::to_string(R) + " " + sched + (in_place ? " in place" : " out of place") +
                           " instances=" + std::to_string(instances) + " depth=" + std::to_string(depth));
              DeadlockReport d = check_deadlock(p, depth);
              EXPECT_TRUE(d.ok) << d.message;
              EXPECT_EQ(emulate_at(p, depth), "");
              EXPECT_EQ(simulate_at(p, topo, depth), "");
              ++cases;
            }
          }
  EXPECT_GE(cases, 2000);
}

TEST(SemanticsAgree, PublishedMscclSchedulesAsGiven) {
  // The files' own schedules (thread blocks, steps, dependencies as MSCCL runs them) pass
  // the check from depth 1 and run correctly on the runtime's emulator.
  std::string dir = test::msccl_xml_dir();
  if (dir.empty()) return;
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".xml") continue;
    MscclImport im = import_msccl_file(f.path().string());
    Topology topo = topology_preset("h200-1x8");
    topo.gpus_per_node = im.as_given.num_ranks;
    topo.name = "h200-1x" + std::to_string(topo.gpus_per_node);
    for (int depth : {1, 2, 4}) {
      SCOPED_TRACE(f.path().filename().string() + " depth=" + std::to_string(depth));
      DeadlockReport d = check_deadlock(im.as_given, depth);
      EXPECT_TRUE(d.ok) << d.message;
      EXPECT_EQ(emulate_at(im.as_given, depth), "");
      EXPECT_EQ(simulate_at(im.as_given, topo, depth), "");
    }
    ++files;
  }
  EXPECT_EQ(files, 14);
}

}  // namespace
}  // namespace weft
