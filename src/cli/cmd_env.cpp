// `weft env`: every WEFT_* variable with its type, default, current value and meaning.
#include <cstdio>

#include "cli/commands.hpp"
#include "util/config.hpp"

namespace weft::cli {

void register_env(CLI::App& app) {
  auto* cmd = app.add_subcommand("env", "Print weft's environment variables: type, default, current value, meaning");
  cmd->callback([] { std::fputs(config::format_table().c_str(), stdout); });
}

}  // namespace weft::cli
