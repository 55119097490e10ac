// `weft bench [COLLECTIVE...] [--sizes FROM:TO] [--graph] [--csv F] [--json]`: on GPUs,
// weft against NCCL in one run (bench_gpu.cpp); without a GPU, the simulated sweep.
#include <cstdio>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/text.hpp"
#if WEFT_HAVE_CUDA
#include "cli/bench_gpu.hpp"
#endif

namespace weft::cli {

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Benchmark collectives on this machine's GPUs against NCCL (nccl-tests' table)");
  struct Args {
    std::vector<std::string> collectives;
    std::string sizes = "8:256M";
    bool graph = false, json = false, no_nccl = false, no_check = false;
    std::string csv, dtype = "float32", op = "sum";
    int ranks = 0, warmup = 5, iters = 20;
    double factor = 2;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("collectives", args->collectives, "AllReduce AllGather ReduceScatter Broadcast Reduce AllToAll (default: the first three)");
  cmd->add_option("--sizes", args->sizes, "FROM:TO in bytes, with K/M/G suffixes (default 8:256M)");
  cmd->add_option("--factor", args->factor, "size multiplier between rows (default 2)");
  cmd->add_flag("--graph", args->graph, "time replays of a CUDA graph of the calls");
  cmd->add_option("--csv", args->csv, "also write the rows to this CSV file");
  cmd->add_flag("--json", args->json, "print one JSON object per row instead of the table");
  cmd->add_option("--ranks", args->ranks, "GPUs to use, one process each (default: all)");
  cmd->add_option("--warmup", args->warmup, "untimed calls per size (default 5)");
  cmd->add_option("--iters", args->iters, "timed calls per size (default 20)");
  cmd->add_option("--type", args->dtype, "element type (default float32)");
  cmd->add_option("--op", args->op, "reduction (default sum)");
  cmd->add_flag("--no-nccl", args->no_nccl, "do not load NCCL");
  cmd->add_flag("--no-check", args->no_check, "skip the #wrong check");
  cmd->callback([args] {
    auto colon = args->sizes.find(':');
    uint64_t from = text::parse_bytes(colon == std::string::npos ? args->sizes : args->sizes.substr(0, colon));
    uint64_t to = colon == std::string::npos ? from : text::parse_bytes(args->sizes.substr(colon + 1));
    if (from == 0 || to < from || args->factor <= 1)
      fail(ErrorCode::InvalidArgument, "--sizes wants FROM:TO with 0 < FROM <= TO, --factor > 1");
#if WEFT_HAVE_CUDA
    BenchOptions o;
    o.collectives = args->collectives.empty() ? std::vector<std::string>{"AllReduce", "AllGather", "ReduceScatter"}
                                              : args->collectives;
    o.from = from;
    o.to = to;
    o.factor = args->factor;
    o.graph = args->graph;
    o.csv = args->csv;
    o.json = args->json;
    o.ranks = args->ranks;
    o.warmup = args->warmup;
    o.iters = std::max(1, args->iters);
    o.nccl = !args->no_nccl;
    o.check = !args->no_check;
    o.dtype = args->dtype;
    o.op = args->op;
    int rc = bench_gpu(o);
    if (rc != 77) {
      set_exit(rc);
      return;
    }
#endif
    std::fprintf(stderr, "weft bench: no GPU found; the simulated sweep is `weft simulate`\n");
    set_exit(2);
  });
}

}  // namespace weft::cli
