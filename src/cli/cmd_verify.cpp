// `weft verify`: load algorithms (ResCCLang files, built-in names, Python programs) and run the symbolic
// verifier on each, printing one line per algorithm. docs/verify.md describes it.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "compile/verify.hpp"
#include "lang/load.hpp"
#include "lang/python_frontend.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::cli {

namespace {

struct VerifyArgs {
  std::vector<std::string> files;
  std::vector<std::string> params;
  bool all = false;
  bool stats = false;
  size_t max_errors = 10;
};

/// Loads and verifies one algorithm; prints its line (and its reasons). Returns whether it passed.
bool verify_one(const std::string& spec, const ParamMap& params, const VerifyArgs& args) {
  using clock = std::chrono::steady_clock;
  Algorithm algo;
  auto t0 = clock::now();
  try {
    algo = is_python_path(spec) ? load_python_program(spec, params) : load_algorithm(spec, params);
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "weft verify: %s\n", e.what());
    return false;
  }
  auto t1 = clock::now();
  VerifyOptions options;
  options.max_errors = args.max_errors;
  VerifyResult r = verify(algo, options);
  auto t2 = clock::now();

  std::string line = text::format("%-24s %-14s ranks %-5d transfers %-9zu steps %-6d", algo.name.c_str(),
                                  std::string(to_string(algo.collective)).c_str(), algo.ranks, algo.transfers.size(),
                                  algo.num_steps());
  if (args.stats)
    line +=
        text::format("load %7.3f s  verify %7.3f s  state %7.1f MiB  ", std::chrono::duration<double>(t1 - t0).count(),
                     std::chrono::duration<double>(t2 - t1).count(), r.peak_state_bytes / 1048576.0);
  if (r.ok) {
    std::printf("%sok\n", line.c_str());
    return true;
  }
  std::printf("%sFAILED (%zu error%s)\n", line.c_str(), r.error_count, r.error_count == 1 ? "" : "s");
  for (const std::string& e : r.errors) std::printf("    %s\n", e.c_str());
  if (r.error_count > r.errors.size()) std::printf("    ... and %zu more\n", r.error_count - r.errors.size());
  return false;
}

}  // namespace

void register_verify(CLI::App& app) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify",
                                 "Verify algorithms symbolically: every output chunk ends with exactly the right "
                                 "contributions, with no race, empty read or double-counted reduction");
  cmd->add_option("files", args->files, "ResCCLang files (.rccl), names of built-in algorithms, or Python programs (.py)");
  cmd->add_option(
      "--param,-p", args->params,
      "Override header parameters of the FILE arguments, as name=value,... (e.g. nRanks=1024,GPUPerNode=8); "
      "may repeat");
  cmd->add_flag("--all", args->all, "Verify every built-in algorithm (algorithms/*.rccl) at its default sizes");
  cmd->add_flag("--stats", args->stats, "Also print load and verification time and the verifier's memory");
  cmd->add_option("--max-errors", args->max_errors, "Reasons printed per failing algorithm (default 10)")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->callback([args] {
    ParamMap params;
    try {
      for (const std::string& p : args->params)
        for (auto& [k, v] : text::parse_kv_list(p)) params[k] = v;
    } catch (const Error& e) {
      std::fprintf(stderr, "weft verify: --param: %s\n", e.what());
      set_exit(2);
      return;
    }
    if (args->files.empty() && !args->all) {
      std::fprintf(stderr, "weft verify: give algorithm files or built-in names, or --all\n");
      set_exit(2);
      return;
    }
    if (args->all && !args->params.empty()) {
      std::fprintf(stderr,
                   "weft verify: --param applies to FILE arguments; --all verifies the built-ins at their "
                   "default sizes\n");
      set_exit(2);
      return;
    }
    std::vector<std::string> specs = args->files;
    if (args->all) {
      std::vector<std::string> names = builtin_algorithm_names();
      if (names.empty()) {
        std::fprintf(stderr, "weft verify: no built-in algorithms found under %s/algorithms\n", data_dir().c_str());
        set_exit(1);
      }
      specs.insert(specs.end(), names.begin(), names.end());
    }
    size_t failed = 0;
    for (const std::string& spec : specs)
      if (!verify_one(spec, params, *args)) ++failed;
    if (failed > 0) {
      std::fflush(stdout);
      std::fprintf(stderr, "weft verify: %zu of %zu algorithm%s failed\n", failed, specs.size(),
                   specs.size() == 1 ? "" : "s");
      set_exit(1);
    }
  });
}

}  // namespace weft::cli
