// The `weft` command's subcommands. Each lives in its own file and registers itself
// with the CLI11 application; its callback returns the process exit status through
// weft::cli::set_exit().
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "util/error.hpp"

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

/// Runs `parse` (the reading of one option's value) and puts the option's name before the
/// message of an error it throws: "--size: byte size '...' is too large".
template <class F>
auto parse_option(const char* option, F&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const Error& e) {
    fail(e.code(), std::string(option) + ": " + e.what());
  }
}

}  // namespace weft::cli
