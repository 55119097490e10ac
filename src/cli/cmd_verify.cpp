// `weft verify`: placeholder until its stage lands; replaced by the real command.
#include <cstdio>

#include "cli/commands.hpp"

namespace weft::cli {

void register_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] {
    std::fprintf(stderr, "weft verify: not built yet\n");
    set_exit(2);
  });
}

}  // namespace weft::cli
