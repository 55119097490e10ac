// `weft compile`: placeholder until its stage lands; replaced by the real command.
#include <cstdio>

#include "cli/commands.hpp"

namespace weft::cli {

void register_compile(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] {
    std::fprintf(stderr, "weft compile: not built yet\n");
    set_exit(2);
  });
}

}  // namespace weft::cli
