// `weft topology`: print topologies (presets or files) as JSON, validated; the way to write
// one's own topology file from a preset, and to regenerate the files under topologies/.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "ir/topology_detect.hpp"
#include "ir/topology_io.hpp"
#include "util/error.hpp"

namespace weft::cli {

void register_topology(CLI::App& app) {
  auto specs = std::make_shared<std::vector<std::string>>();
  auto list = std::make_shared<bool>(false);
  auto det = std::make_shared<bool>(false);
  auto summary = std::make_shared<bool>(false);
  auto sysfs = std::make_shared<std::string>("/sys");
  auto* cmd = app.add_subcommand("topology",
                                 "Print topologies (preset names such as a100-4x8, or JSON files) as validated JSON; "
                                 "--list names the presets; --detect prints this machine's detected topology");
  cmd->add_option("topologies", *specs, "Preset names or topology files");
  cmd->add_flag("--list", *list, "List the preset names");
  cmd->add_flag("--detect", *det,
                "Detect this machine's GPUs (CUDA driver), NVLink (NVML, else CUDA peer access) and NICs (sysfs) and print "
                "the topology weft derives (WEFT_TOPOLOGY=detect uses it)");
  cmd->add_flag("--summary", *summary,
                "With --detect: print a table of what was detected, what was not and which figures are estimates");
  cmd->add_option("--sysfs-root", *sysfs, "With --detect: the sysfs tree to read (default /sys)");
  cmd->callback([specs, list, det, summary, sysfs] {
    if (*det) {
      detect::MachineInfo m = detect::detect_this_machine(*sysfs);
      try {
        const Topology t = detect::machine_topology(m);
        if (!*summary) std::fputs(topology_to_json(t).c_str(), stdout);
      } catch (const Error& e) {
        if (*summary) std::fputs(detect::machine_summary(m).c_str(), stdout);
        std::fflush(stdout);
        std::fprintf(stderr, "weft topology --detect: %s\n", e.what());
        set_exit(1);
        return;
      }
      if (*summary) std::fputs(detect::machine_summary(m).c_str(), stdout);
      return;
    }
    if (*summary) {
      std::fprintf(stderr, "weft topology: --summary goes with --detect\n");
      set_exit(2);
      return;
    }
    if (*list) {
      for (const std::string& n : topology_preset_names()) std::printf("%s\n", n.c_str());
      return;
    }
    if (specs->empty()) {
      std::fprintf(stderr, "weft topology: give preset names or topology files, --list or --detect\n");
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
