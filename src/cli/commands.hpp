// The `weft` command's subcommands. Each lives in its own file and registers itself
// with the CLI11 application; its callback returns the process exit status through
// weft::cli::set_exit().
#pragma once

#include <CLI/CLI.hpp>

namespace weft::cli {

void register_verify(CLI::App& app);
void register_compile(CLI::App& app);
void register_simulate(CLI::App& app);
void register_bench(CLI::App& app);
void register_env(CLI::App& app);
void register_topology(CLI::App& app);

/// Sets the exit status main() returns (the largest value set wins).
void set_exit(int status);
int exit_status();

}  // namespace weft::cli
