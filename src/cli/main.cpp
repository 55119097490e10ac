// weft: verify, compile, simulate and benchmark collective algorithms.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/huge_pages.hpp"
#include "util/text.hpp"

namespace weft::cli {
static int g_exit = 0;
void set_exit(int status) { if (status > g_exit) g_exit = status; }
int exit_status() { return g_exit; }

void add_memory_budget_option(CLI::App* cmd, std::string& value) {
  cmd->add_option("--memory-budget", value,
                  "Memory the compiler and the simulator may take, in bytes (e.g. 64G; default: WEFT_MEMORY_BUDGET, else "
                  "three quarters of this machine's memory, or less under ulimit -v); a larger input is refused before it "
                  "is allocated");
}

uint64_t memory_budget_bytes(const std::string& value) {
  if (value.empty()) return 0;
  const uint64_t bytes = parse_option("--memory-budget", [&] { return text::parse_bytes(value); });
  if (bytes == 0) fail(ErrorCode::InvalidArgument, "--memory-budget: the budget must be at least 1 byte");
  return bytes;
}
}  // namespace weft::cli

namespace {

/// Flushes the standard output; false (after saying so on stderr) when what was printed did
/// not reach its file (a full disk, /dev/full, a closed pipe). `earlier`: the errno of a
/// write that failed before (0: none known).
bool stdout_written(int earlier = 0) {
  errno = 0;
  std::cout.flush();
  const bool written = std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout.good();
  const int err = errno != 0 ? errno : earlier != 0 ? earlier : EIO;
  if (!written) std::fprintf(stderr, "weft: cannot write the standard output: %s\n", std::strerror(err));
  return written;
}

}  // namespace

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
  weft::cli::register_tune(app);
  weft::cli::register_env(app);
  weft::cli::register_topology(app);
  // The first word that is not an option names the command: an unknown one is said so,
  // rather than CLI11's "A subcommand is required".
  if (argc == 1) {
    std::fprintf(stderr, "weft: give a command (verify, compile, simulate, bench, tune, env or topology); see weft --help\n");
    return 2;
  }
  if (argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "weft: unknown command '%s'; see weft --help\n", argv[1]);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    errno = 0;
    if (app.exit(e) != 0) return 2;
    return stdout_written(errno) ? 0 : 2;  // --help or --version, printed on the standard output
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft: internal error: %s\n", e.what());
    return 3;
  }
  // Output that did not reach its file (a full disk, /dev/full, a closed pipe) is an error.
  if (!stdout_written()) return 2;
  return weft::cli::exit_status();
}
