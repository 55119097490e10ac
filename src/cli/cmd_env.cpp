// `weft env`: every WEFT_* variable with its type, default, current value and meaning, then
// what the network path between nodes would use here (UCX, direct GPU memory or staged).
#include <cstdio>

#include "cli/commands.hpp"
#include "net/ucx_transport.hpp"
#include "util/config.hpp"

namespace weft::cli {

void register_env(CLI::App& app) {
  auto* cmd = app.add_subcommand("env", "Print weft's environment variables: type, default, current value, meaning");
  cmd->callback([] {
    std::fputs(config::format_table().c_str(), stdout);
    std::printf("\nnetwork path between nodes: %s\n", net::ucx_describe().c_str());
  });
}

}  // namespace weft::cli
