// `weft topology`: print topologies (presets or files) as JSON, validated; the way to write
// one's own topology file from a preset, and to regenerate the files under topologies/.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft::cli {

void register_topology(CLI::App& app) {
  auto specs = std::make_shared<std::vector<std::string>>();
  auto list = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("topology",
                                 "Print topologies (preset names such as a100-4x8, or JSON files) as validated JSON; "
                                 "--list names the presets");
  cmd->add_option("topologies", *specs, "Preset names or topology files");
  cmd->add_flag("--list", *list, "List the preset names");
  cmd->callback([specs, list] {
    if (*list) {
      for (const std::string& n : topology_preset_names()) std::printf("%s\n", n.c_str());
      return;
    }
    if (specs->empty()) {
      std::fprintf(stderr, "weft topology: give preset names or topology files, or --list\n");
      set_exit(2);
      return;
    }
    for (const std::string& spec : *specs) {
      try {
        std::fputs(topology_to_json(load_topology(spec)).c_str(), stdout);
      } catch (const Error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "weft topology: %s\n", e.what());
        set_exit(1);
      }
    }
  });
}

}  // namespace weft::cli
