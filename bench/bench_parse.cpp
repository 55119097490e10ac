// Parse time of ResCCLang programs: the HM AllReduce of paper 001 Figure 16 at growing
// rank counts (8 GPUs per node). Prints a table; asserts nothing.
//
//   bench_parse [FILE] [--max-ranks N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "lang/load.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

int main(int argc, char** argv) {
  std::string file = std::string(WEFT_SOURCE_DIR) + "/tests/data/figure16_hm_allreduce.rccl";
  long max_ranks = 1024;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-ranks" && i + 1 < argc)
      max_ranks = std::strtol(argv[++i], nullptr, 10);
    else
      file = a;
  }
  std::ifstream in(file);
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.empty()) {
    std::fprintf(stderr, "bench_parse: cannot read %s\n", file.c_str());
    return 1;
  }
  weft::text::Table table({"nRanks", "transfers", "steps", "parse ms (best of 3)", "ns/transfer"});
  try {
    for (long ranks = 32; ranks <= max_ranks; ranks *= 2) {
      double best = 1e30;
      size_t transfers = 0;
      int steps = 0;
      for (int rep = 0; rep < 3; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        weft::Algorithm a = weft::parse_resccl(text, file, {{"nRanks", std::to_string(ranks)}});
        auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
        transfers = a.transfers.size();
        steps = a.num_steps();
      }
      table.add_row({std::to_string(ranks), std::to_string(transfers), std::to_string(steps),
                     weft::text::format("%.1f", best), weft::text::format("%.1f", best * 1e6 / transfers)});
    }
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "bench_parse: %s\n", e.what());
    return 1;
  }
  std::printf("%s", table.str().c_str());
  return 0;
}
