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
void register_tune(CLI::App& app);
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

/// Adds --memory-budget BYTES to `cmd`: the compiler's and the simulator's memory budget
/// (util/memory_budget.hpp). `value` stays empty when the option is not given.
void add_memory_budget_option(CLI::App* cmd, std::string& value);
/// The budget in bytes of --memory-budget's value (0, the default budget, when empty);
/// throws InvalidArgument naming the option for a bad or zero size.
uint64_t memory_budget_bytes(const std::string& value);

}  // namespace weft::cli
