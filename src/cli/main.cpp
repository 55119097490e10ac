// weft: verify, compile, simulate and benchmark collective algorithms.
#include <cstdio>
#include <exception>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/huge_pages.hpp"

namespace weft::cli {
static int g_exit = 0;
void set_exit(int status) { if (status > g_exit) g_exit = status; }
int exit_status() { return g_exit; }
}  // namespace weft::cli

int main(int argc, char** argv) {
  weft::reexec_with_huge_pages(argv);  // large plans: half the time with huge pages
  CLI::App app{"weft: a collective communication library for GPUs.\n"
               "Verify, compile, simulate and benchmark collective algorithms."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("weft ") + WEFT_VERSION_STRING);
  weft::cli::register_verify(app);
  weft::cli::register_compile(app);
  weft::cli::register_simulate(app);
  weft::cli::register_bench(app);
  weft::cli::register_env(app);
  weft::cli::register_topology(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: internal error: %s\n", e.what());
    return 3;
  }
  return weft::cli::exit_status();
}
