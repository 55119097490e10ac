// Sweeps: an algorithm compiled once per scheduler and simulated over a range of sizes, the
// work behind `weft simulate --sizes` and the simulated `weft bench` (docs/simulator.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "ir/topology.hpp"
#include "plan/builder.hpp"
#include "sim/report.hpp"
#include "sim/simulator.hpp"

namespace weft::sim {

/// Parses "FROM:TO" or "FROM:TO:FACTOR" (sizes as text::parse_bytes reads them, FACTOR an
/// integer >= 2, default 2) into FROM, FROM*FACTOR, ... up to TO inclusive. Throws
/// InvalidArgument naming the range when it is malformed, empty or has more than 64 sizes.
std::vector<uint64_t> parse_size_range(const std::string& range);

/// plan/builder.hpp's: nRanks, GPUPerNode and NICPerNode from the topology unless set.
using weft::params_for_topology;

struct SweepSpec {
  std::string algorithm;                      ///< any source plan/builder.hpp takes (a plan file: schedulers, allocator, instances, max_tbs and in_place do not apply)
  std::map<std::string, std::string> params;  ///< --param, before params_for_topology
  Topology topology;
  std::vector<std::string> schedulers{"hpds"};
  std::string allocator = "state";
  int32_t instances = 0;                      ///< 0: derived from the topology
  int32_t max_tbs = 0;                        ///< CompileOptions::max_tbs (0: no limit); the tuning budget when tuning
  /// Automatic instances (sim/autotune.hpp): a compiler scheduler with derived instances is
  /// tuned for each size by the simulator, within max_tbs thread blocks per rank when set,
  /// else within an MSCCL file's own schedule's (when the source has one), else within the
  /// scheduler's own plan's.
  bool tune = false;
  double tolerance = 0;  ///< TuneOptions::tolerance
  double max_idle = 1;   ///< TuneOptions::max_idle
  double idle_cost = 0.02;  ///< TuneOptions::idle_cost
  bool in_place = true;                       ///< CompileOptions::in_place
  double pace = 0;                            ///< CompileOptions::pace (untuned runs; the tuner tries it itself)
  std::vector<uint64_t> sizes;
  SimOptions options;                         ///< per-run options; `bytes` is set per size
  uint64_t max_memory_bytes = 0;              ///< compiler's and simulator's budget (0: the default)
};

/// Called once per (scheduler, size), in order, with the simulator that produced the report
/// (for traces) and the time compile() took for that scheduler.
using SweepCallback = std::function<void(const Simulator&, const SimReport&, double compile_seconds)>;

/// Loads the source sized to the topology and verifies it (plan/builder.hpp), builds its plan
/// once per scheduler (a plan file: once, as it is) and simulates each size. Errors from any stage propagate (weft::Error, naming what failed).
void run_sweep(const SweepSpec& spec, const SweepCallback& on_report);

struct BenchSpec {
  std::string topology = "h200-1x2";           ///< preset name or file
  std::vector<Collective> collectives;          ///< empty: all; else only algorithms of these
  std::vector<std::string> algorithms;          ///< empty: every built-in that fits the topology
  std::vector<uint64_t> sizes;                  ///< empty: 1 MiB to 1 GiB, doubling
  std::string scheduler = "hpds";
  bool json = false;                            ///< one JSON object per line instead of tables
  std::string dtype = "float32";                ///< element type named in the rows (times do not depend on it)
  size_t dtype_bytes = 4;                       ///< its size: the rows' count is bytes / dtype_bytes
  std::ostream* csv = nullptr;                  ///< also write the rows here as CSV (a header line first)
  /// Shape the plans as the GPU runtime does on one node (its Simple path from 768 KiB on:
  /// 24 instances per connection, micro-batches of one 512 KiB staging slot per block), so
  /// that the figures stand for what `weft bench` measures there. Across nodes, and with
  /// false, the compiler's derived instances and 1 MiB micro-batches.
  bool runtime_shape = true;
  uint64_t max_memory_bytes = 0;                ///< compiler's and simulator's budget (0: the default)
};

/// The simulated `weft bench`: its first line says the figures are simulated and on which
/// topology; then, per algorithm of the asked collectives, an nccl-tests style table (or JSON
/// lines). Built-ins that do not load or compile at the topology's size are listed as
/// skipped, with the reason; sizes smaller than an algorithm's chunk count are left out with
/// a comment. Returns the number of algorithms benchmarked.
int run_simulated_bench(const BenchSpec& spec, std::ostream& out);

}  // namespace weft::sim
