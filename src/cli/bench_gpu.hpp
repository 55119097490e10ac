// `weft bench` on GPUs: weft against NCCL (loaded with dlopen, never linked), same run,
// same buffers, nccl-tests' table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::cli {

struct BenchOptions {
  std::vector<std::string> collectives;  ///< AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll
  uint64_t from = 8;                     ///< bytes (nccl-tests' size column)
  uint64_t to = 256ull << 20;
  double factor = 2;                     ///< size multiplier between rows
  std::vector<uint64_t> sizes;           ///< the rows' sizes (cmd_bench.cpp: from, times factor, up to to)
  bool graph = false;                    ///< time replays of a captured CUDA graph
  std::string csv;                       ///< also write rows to this file
  bool json = false;                     ///< print JSON rows instead of the table
  int ranks = 0;                         ///< 0: every visible GPU
  int warmup = 5;
  int iters = 20;
  bool nccl = true;
  bool check = true;
  std::string dtype = "float32";
  std::string op = "sum";
  /// Measured traces (docs/traces.md): one extra traced call per size (or at trace_size
  /// only), its Chrome trace written to `trace` (several sizes: the size before the
  /// extension), an SVG of measured against simulated busbw beside it.
  std::string trace;
  uint64_t trace_size = 0;          ///< 0: every size
  uint32_t trace_records = 4096;    ///< records per thread block at most
  bool predict = true;              ///< the simulator's prediction column
  std::string sim_topology;         ///< its topology; empty: h200-1x<ranks>
};

/// Runs the benchmark, one process per GPU. Returns the exit status: 0, 1 (a rank
/// failed or a result was wrong), or 77 when no GPU is present.
int bench_gpu(const BenchOptions& o);

}  // namespace weft::cli
