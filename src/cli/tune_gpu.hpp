// `weft tune` on GPUs: every candidate timed as `weft bench` times weft (one process per GPU,
// warmup, iterations, a check of every result), each forced through a selection table of
// its own (WEFT_SELECTION) on a communicator of its own. CUDA builds only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/tune.hpp"

namespace weft::cli {

struct TuneGpuOptions {
  std::vector<Collective> collectives;
  std::vector<uint64_t> sizes;     ///< payload bytes per rank, ascending (rounded by tune::whole_sizes)
  int ranks = 0;                   ///< 0: every visible GPU
  int warmup = 5, iters = 20;
  bool check = true;
  bool quiet = false;              ///< no progress on stderr
  tune::SweepOptions sweep;
  tune::PruneRule prune;           ///< candidates far behind at a large size stop there
  /// The default table's choice is timed first (tune::Candidate::incumbent) and keeps a size
  /// unless a candidate is more than `keep` times faster; 0: not timed.
  double keep = 1.05;
};

/// Times every candidate of every collective at every size. Fills `tuned` (candidates,
/// times, winners) and `gpu` (the GPU's name). Returns 0; 1 when a rank failed or a result
/// was wrong (that candidate is left out); 77 when no GPU is present.
int tune_gpu(const TuneGpuOptions& o, std::vector<tune::Tuned>& tuned, std::string& gpu);

}  // namespace weft::cli
