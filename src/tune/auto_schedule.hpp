// The runtime's schedule choice for a compiled source under scheduler "auto" (a selection
// row's "scheduler": "auto", or WEFT_SCHEDULER=auto for the sources WEFT_ALGO names): per
// size bucket, every compiler scheduler (hpds, algo, stage, rr, gc3) and, for an MSCCL XML
// file, its own schedule (as-given) are built as the runtime builds a plan (make_plan, with
// the call's protocol, instances and placement) and simulated at the bucket's size on the
// runtime's topology (node_topology); the fastest wins, the one with fewer thread blocks per
// rank on a tie, then the one listed first. The communicator compiles once per bucket and
// caches the plan (its PlanKey holds the bucket); the choice and its reason are logged under
// WEFT_LOG_SUBSYS=PLAN, and `weft bench --predict` shows the chosen scheduler in its plan
// column. docs/runtime.md, "Choosing a schedule per size".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/plan.hpp"
#include "plan/algorithms.hpp"

namespace weft {

using algo::auto_bucket;
using algo::auto_bucket_bytes;

struct AutoCandidate {
  std::string scheduler;
  double time_us = 0;      ///< simulated, launch excluded
  int32_t tbs = 0;         ///< thread blocks per rank, max
  std::string error;       ///< why it could not be built or simulated (then not chosen)
};

struct AutoChoice {
  Plan plan;               ///< the chosen candidate's plan, as make_plan builds it
  std::string scheduler;   ///< hpds, algo, stage, rr, gc3 or as-given
  std::string reason;      ///< one sentence: the figures it was chosen by
  uint64_t bytes = 0;      ///< the size simulated (auto_bucket_bytes)
  std::vector<AutoCandidate> candidates;
};

/// The candidates for `algorithm`: the compiler's schedulers, then as-given for an .xml file.
std::vector<std::string> auto_candidates(const std::string& algorithm);

/// Chooses the schedule of `algorithm` for calls in the bucket of `bytes` (arguments as
/// make_plan's, plan/plan_source.hpp; `slot_bytes` the runtime's staging slot for the
/// protocol). Throws what make_plan throws for the source itself (wrong collective, rank
/// count or root, a parse error), and InvalidArgument naming each candidate's error when
/// none could be built.
AutoChoice choose_auto_schedule(Collective c, int nranks, const std::string& algorithm, const std::string& protocol,
                                int instances, bool in_place, int root, int fifo_depth, const std::string& allocator,
                                const std::vector<int>& node_of_rank, uint64_t bytes, uint64_t slot_bytes);

}  // namespace weft
