// Choosing a schedule per call size by the simulator: every compiler scheduler (each tuned,
// sim/autotune.hpp) and an MSCCL file's own schedule are simulated at the size; the fastest
// wins, the one with fewer thread blocks per rank on a tie. `weft compile -s auto --size S`
// runs it and says in --json which it chose and why (docs/compile.md, "Choosing a schedule").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compile/compiler.hpp"
#include "ir/algorithm.hpp"
#include "ir/plan.hpp"
#include "ir/topology.hpp"
#include "sim/autotune.hpp"

namespace weft::sim {

/// Simulated times within this fraction of each other tie (sums differ in their last bits):
/// the one tie rule of every choice among simulated schedules (here, and the runtime's
/// scheduler "auto", tune/auto_schedule.cpp).
inline constexpr double kScheduleTie = 1e-9;
/// Whether time `t` is as fast as `best` (within kScheduleTie).
inline bool as_fast(double t, double best) { return t <= best * (1 + kScheduleTie); }
/// Whether (t, tbs) beats (best, best_tbs): faster, or as fast with fewer thread blocks per rank.
inline bool beats(double t, int32_t tbs, double best, int32_t best_tbs) {
  return t < best * (1 - kScheduleTie) || (as_fast(t, best) && tbs < best_tbs);
}

struct ScheduleCandidate {
  std::string scheduler;  ///< hpds, rr, gc3, algo, stage, or as-given
  std::string variant;    ///< the tuner's choice for a compiler scheduler
  double time_us = 0, busbw_GBps = 0, tb_idle_mean = 0;
  int32_t tbs = 0;        ///< thread blocks per rank, max
  std::string error;      ///< non-empty when it could not be built within the budget
};

struct ScheduleChoice {
  Plan plan;                        ///< the chosen plan
  std::optional<CompileResult> compiled;  ///< its compilation, unless the given schedule won
  std::string scheduler;            ///< the chosen candidate's scheduler
  std::string reason;               ///< one sentence: why
  int32_t max_tbs = 0;              ///< the budget every candidate kept to (0: each its own plan's)
  std::vector<ScheduleCandidate> candidates;
};

/// Simulates each of `schedulers` (compiler schedulers tuned with `options`; "as-given" the
/// plan `given`, when there is one) at options.bytes and returns the fastest. The budget is
/// options.max_tbs when positive, else the given schedule's thread blocks per rank when there
/// is one, else each scheduler's own plan's. Throws InvalidArgument when no candidate could
/// be built, naming each one's error.
ScheduleChoice choose_schedule(const Algorithm& algo, const Plan* given, const Topology& topo, const CompileOptions& base,
                               TuneOptions options, const std::vector<std::string>& schedulers);

/// The candidates `weft compile -s auto` compares: the compiler's schedulers, then as-given.
std::vector<std::string> auto_schedulers(bool has_given);

}  // namespace weft::sim
