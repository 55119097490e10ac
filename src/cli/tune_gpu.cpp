#include "cli/tune_gpu.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cli/bench_calls.hpp"
#include "util/launcher.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::cli {

namespace {

/// A rank's verdicts (failed, wrong elements) and its time (rank 0's counts: the others give
/// 0), summed over the ranks through the control communicator, so that every rank takes the
/// same decisions (leave out, prune); false when that exchange fails.
bool agree_verdicts(weftComm_t ctl, RankCtx& x, char* shared, double failed, double wrong, double us, double sums[3]) {
  double v[3] = {failed, wrong, x.rank == 0 ? us : 0.0};
  cudaMemcpyAsync(shared + 128, v, sizeof v, cudaMemcpyHostToDevice, x.st);
  bool ok = weftAllReduce(shared + 128, shared + 128, 3, weftFloat64, weftSum, ctl, reinterpret_cast<weftStream_t>(x.st)) ==
                weftSuccess &&
            gputest::sync_bounded(reinterpret_cast<weftStream_t>(x.st), 300);
  cudaMemcpy(sums, shared + 128, 3 * sizeof(double), cudaMemcpyDeviceToHost);
  return ok;
}

/// Times candidate k of collective ci at each of `sizes` on x.weft, writing "c k s us"
/// lines to `out` (rank 0) and lowering `best` (per size, rank 0's times, the same on every
/// rank). Returns -1 when the ranks cannot agree (give up), 1 when the candidate computed
/// wrong elements, 0 otherwise (also when it stopped at a size some rank could not run, or
/// was pruned: o.prune).
template <typename Agree>
int time_candidate(const TuneGpuOptions& o, RankCtx& x, const BenchOptions& bo, size_t ci, size_t k,
                   const tune::Candidate& cand, const std::vector<size_t>& sizes, std::vector<double>& best,
                   tune::Progress& progress, std::FILE* out, Agree&& agree) {
  const Collective c = o.collectives[ci];
  double sums[3] = {0, 0, 0};
  for (size_t s : sizes) {
    const uint64_t count = count_for(c, o.sizes[s], 4, x.R);
    const double us = time_calls(x, Lib::Weft, c, count, bo);
    const std::string error = us < 0 ? weftGetLastError(nullptr) : "";
    const long wrong = us >= 0 && o.check ? check(x, Lib::Weft, c, count, o.sizes[s] * 7 + 11) : 0;
    if (!agree(us < 0 ? 1 : 0, static_cast<double>(wrong), us, sums)) return -1;
    if (sums[0] > 0) {
      // The plan is the same on every rank: where one cannot run it, none can.
      progress.skipped(k, cand, text::format("%s: %s", text::format_bytes(o.sizes[s]).c_str(),
                                             error.empty() ? "another rank failed" : error.c_str()));
      return 0;
    }
    if (sums[1] > 0) {
      if (x.rank == 0)
        std::fprintf(stderr, "weft tune: %s %s: %s computed %.0f wrong elements: left out\n",
                     std::string(to_string(c)).c_str(), text::format_bytes(o.sizes[s]).c_str(), cand.label().c_str(),
                     sums[1]);
      return 1;
    }
    progress.timed(k, cand, s, o.sizes[s], us);
    if (out) {
      std::fprintf(out, "%zu %zu %zu %.6f\n", ci, k, s, us);
      std::fflush(out);
    }
    const double before = best[s];
    if (before < 0 || sums[2] < before) best[s] = sums[2];
    if (tune::prune_after(o.prune, o.sizes[s], sums[2], before) && s != sizes.back()) {
      progress.skipped(k, cand, text::format("larger sizes not timed (--prune %g): %.2f us at %s, more than %g x the best so far (%.2f us)",
                                             o.prune.factor, sums[2], text::format_bytes(o.sizes[s]).c_str(),
                                             o.prune.factor, before));
      return 0;
    }
  }
  return 0;
}

/// What every rank does: one control communicator for the whole run (it carries each
/// candidate's unique id and the ranks' verdicts), then per candidate a communicator of its
/// own, created with WEFT_SELECTION naming a table whose one row is the candidate, so that
/// the call runs exactly what a table naming it would run (the runtime's own loader, choice
/// and plan cache). Rank 0 prints the progress and writes "c k s us" lines to `results`.
int tune_rank(const TuneGpuOptions& o, const std::vector<std::vector<tune::Candidate>>& cands, const std::string& results,
              int rank, int R, const weftUniqueId& id) {
  unsetenv("WEFT_SELECTION");  // the control communicator runs weft's default table
  weftComm_t ctl = nullptr;
  if (weftCommInitRank(&ctl, R, id, rank) != weftSuccess) {
    std::fprintf(stderr, "rank %d: weftCommInitRank: %s\n", rank, weftGetLastError(nullptr));
    return 1;
  }
  RankCtx x;
  x.rank = rank;
  x.R = R;
  cudaStreamCreateWithFlags(&x.st, cudaStreamNonBlocking);
  const uint64_t max_bytes = std::max<uint64_t>(o.sizes.back(), 64) * 2;
  char* shared = nullptr;  // the unique id (rank 0's) and the verdicts, through the control communicator
  if (cudaMalloc(reinterpret_cast<void**>(&x.send), max_bytes) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&x.recv), max_bytes) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&shared), 256) != cudaSuccess) {
    std::fprintf(stderr, "rank %d: cannot allocate 2 x %llu bytes\n", rank, static_cast<unsigned long long>(max_bytes));
    return 1;
  }
  cudaMemset(x.send, 0, max_bytes);
  cudaMemset(x.recv, 0, max_bytes);
  cudaDeviceSynchronize();
  std::FILE* out = nullptr;
  if (rank == 0) {
    out = std::fopen(results.c_str(), "w");
    if (!out) return 1;
    cudaDeviceProp prop{};
    int dev = 0;
    cudaGetDevice(&dev);
    cudaGetDeviceProperties(&prop, dev);
    std::fprintf(out, "gpu %s\n", prop.name);
    std::fflush(out);
  }
  const std::string table_path = "/tmp/weft-tune-" + std::to_string(getpid()) + ".json";
  BenchOptions bo;
  bo.warmup = o.warmup;
  bo.iters = o.iters;
  auto agree = [&](double failed, double wrong, double us, double sums[3]) {
    return agree_verdicts(ctl, x, shared, failed, wrong, us, sums);
  };
  int status = 0;
  for (size_t ci = 0; ci < o.collectives.size(); ++ci) {
    const Collective c = o.collectives[ci];
    tune::Progress progress(rank == 0 && !o.quiet ? stderr : nullptr, c, cands[ci].size(), o.sizes.size());
    std::vector<double> best(o.sizes.size(), -1.0);
    for (size_t k = 0; k < cands[ci].size(); ++k) {
      const tune::Candidate& cand = cands[ci][k];
      std::vector<size_t> sizes;
      for (size_t s = 0; s < o.sizes.size(); ++s)
        if (tune::applies(cand, c, o.sizes[s], R) && count_for(c, o.sizes[s], 4, R) > 0) sizes.push_back(s);
      if (sizes.empty()) {
        progress.skipped(k, cand, "it runs none of the sizes");
        continue;
      }
      {
        std::ofstream(table_path) << tune::candidate_table(c, cand);
      }
      setenv("WEFT_SELECTION", table_path.c_str(), 1);
      weftUniqueId nid{};
      if (rank == 0 && weftGetUniqueId(&nid) != weftSuccess) return 1;
      // On the stream the broadcast runs on: a pageable cudaMemcpy may return before its DMA lands.
      cudaMemcpyAsync(shared, nid.internal, sizeof nid.internal, cudaMemcpyHostToDevice, x.st);
      if (weftBroadcast(shared, shared, sizeof nid.internal, weftUint8, 0, ctl, reinterpret_cast<weftStream_t>(x.st)) !=
              weftSuccess ||
          !gputest::sync_bounded(reinterpret_cast<weftStream_t>(x.st), 300))
        return 1;
      cudaMemcpy(nid.internal, shared, sizeof nid.internal, cudaMemcpyDeviceToHost);
      double sums[3] = {0, 0, 0};
      const bool made = weftCommInitRank(&x.weft, R, nid, rank) == weftSuccess;
      const std::string made_error = made ? "" : weftGetLastError(nullptr);
      if (!agree(made ? 0 : 1, 0, 0, sums)) return 1;
      if (sums[0] > 0) {
        progress.skipped(k, cand, made ? "another rank could not create its communicator" : made_error);
        if (made) weftCommDestroy(x.weft);
        status = 1;
        continue;
      }
      const int rc = time_candidate(o, x, bo, ci, k, cand, sizes, best, progress, out, agree);
      if (rc < 0) return 1;
      if (rc > 0) status = 1;
      weftCommDestroy(x.weft);
      x.weft = nullptr;
    }
  }
  unlink(table_path.c_str());
  if (out) std::fclose(out);
  cudaFree(x.send);
  cudaFree(x.recv);
  cudaFree(shared);
  weftCommDestroy(ctl);
  return status;
}

}  // namespace

int tune_gpu(const TuneGpuOptions& given, std::vector<tune::Tuned>& tuned, std::string& gpu) {
  const int ndev = gputest::probe_device_count();
  if (ndev == 0) return gputest::kSkip;
  const int R = given.ranks > 0 ? given.ranks : ndev;
  if (R < 2) fail(ErrorCode::InvalidArgument, "tuning needs at least 2 ranks (one rank runs a copy, no plan); this machine has 1 GPU: give --ranks 2");
  TuneGpuOptions o = given;
  o.sizes = tune::whole_sizes(given.sizes, R);
  std::vector<std::vector<tune::Candidate>> cands;
  for (Collective c : o.collectives) {
    cands.push_back(tune::candidates(c, R, o.sweep));
    if (o.keep > 0) cands.back().insert(cands.back().begin(), tune::incumbent_candidate());
  }
  const std::string results = "/tmp/weft-tune-" + std::to_string(getpid()) + ".results";
  const int rc = gputest::run_ranks(
      R, [&](int rank, const weftUniqueId& id) { return tune_rank(o, cands, results, rank, R, id); }, 24 * 3600, "weft tune");
  tuned.clear();
  for (size_t ci = 0; ci < o.collectives.size(); ++ci) {
    tune::Tuned t;
    t.collective = o.collectives[ci];
    t.ranks = R;
    t.candidates = cands[ci];
    t.sizes = o.sizes;
    t.times.assign(t.candidates.size(), std::vector<double>(t.sizes.size(), -1));
    tuned.push_back(std::move(t));
  }
  std::ifstream in(results);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("gpu ", 0) == 0) {
      gpu = line.substr(4);
      continue;
    }
    std::istringstream ss(line);
    size_t ci = 0, k = 0, s = 0;
    double us = -1;
    if (ss >> ci >> k >> s >> us && ci < tuned.size() && k < tuned[ci].candidates.size() && s < o.sizes.size())
      tuned[ci].times[k][s] = us;
  }
  unlink(results.c_str());
  for (tune::Tuned& t : tuned) t.winners = tune::pick_winners(t.times, t.sizes, o.keep > 0 ? 0 : -1, o.keep);
  return rc == gputest::kSkip ? 1 : rc;
}

}  // namespace weft::cli
