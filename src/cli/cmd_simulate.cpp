// `weft simulate`: placeholder until its stage lands; replaced by the real command.
#include <cstdio>

#include "cli/commands.hpp"

namespace weft::cli {

void register_simulate(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] {
    std::fprintf(stderr, "weft simulate: not built yet\n");
    set_exit(2);
  });
}

}  // namespace weft::cli
