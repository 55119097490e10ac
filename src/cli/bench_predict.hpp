// `weft bench`'s prediction column (docs/traces.md): the simulator's time for the call the
// runtime makes, from the same decision (tune/decide.hpp: the selection table and its
// overrides), plan and geometry, on a topology preset for the ranks; the one-shot kernel by
// its closed form (sim/call_model.hpp). Host code only: it runs the runtime's plan builder
// and the simulator, never a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"
#include "tune/decide.hpp"

namespace weft::cli {

struct Prediction {
  double us = -1;                        ///< per call, launch included; < 0: none (see why)
  std::string why;                       ///< why there is none
  std::optional<sim::SimReport> report;  ///< the simulated plan's run (none for the one-shot kernel)
  std::string plan;                      ///< what the selection chose, as `weft bench` names it
  int oneshot_blocks = 0;                ///< the one-shot kernel's thread blocks (a plan's are in the report)
  std::string schedule_why;              ///< scheduler auto: which schedule it chose and why (tune/auto_schedule.hpp)
};

class BenchPredictor {
 public:
  /// `topology`: a preset or file; empty: h200-1x<ranks> (NV18 like the H100 and H200
  /// machines the calibration comes from). A topology that does not load leaves every
  /// prediction empty, with the reason.
  BenchPredictor(int ranks, bool graph, const std::string& topology);

  /// The simulator's time for `c` of `bytes` (nccl-tests' size, out of place), as the
  /// runtime would run it with this process's environment (WEFT_SELECTION, WEFT_ALGO, ...).
  /// `trace`: keep the spans (for the thread-block figures beside a measured trace).
  Prediction predict(Collective c, uint64_t bytes, bool trace = false);

  const std::string& topology_name() const { return topo_name_; }
  const std::string& error() const { return error_; }

 private:
  int ranks_;
  bool graph_;
  std::string topo_name_, error_;
  std::optional<Topology> topo_;
  std::unique_ptr<Decider> decider_;  ///< the runtime's decision for one node of `ranks`
  std::unordered_map<PlanKey, std::unique_ptr<sim::Simulator>, PlanKeyHash> sims_[2];  ///< [traced]
  std::unordered_map<PlanKey, std::string, PlanKeyHash> auto_why_;  ///< scheduler auto: the choice's reason
};

/// `weft bench --predict` (nothing runs on a GPU): per collective, an nccl-tests style table (or JSON
/// lines, or CSV rows) of the predictions for `sizes`; its first line says that every
/// figure is simulated. Throws what the predictor throws for a topology that does not load.
void run_predicted_bench(const std::vector<Collective>& collectives, const std::vector<uint64_t>& sizes, int ranks,
                         bool graph, const std::string& topology, const std::string& dtype, size_t dtype_bytes, bool json,
                         std::ostream* csv);

}  // namespace weft::cli
