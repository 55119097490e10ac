// Topology files and presets (format: docs/topology.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/topology.hpp"

namespace weft {

/// A preset by name: "h200-1x2", "h200-1x4", "h200-1x8", and "a100-NxG" for any N >= 1
/// nodes and G in {1, 2, 4, 8} (200 Gb/s RoCE NICs, one per two GPUs; the paper's cluster).
/// Throws InvalidArgument listing the known presets for an unknown name.
Topology topology_preset(const std::string& name);
/// Loads a preset name or a JSON topology file path.
Topology load_topology(const std::string& spec);
/// JSON text of a topology; topology_from_json(topology_to_json(t)) == t field by field.
std::string topology_to_json(const Topology& t);
/// Parses JSON text; `origin` names the file in error messages. Throws Parse on bad JSON or
/// missing / mistyped fields (naming the field), InvalidArgument on inconsistent values.
Topology topology_from_json(std::string_view text, const std::string& origin);
/// Names of the fixed presets (the a100-NxG family is listed as its pattern).
std::vector<std::string> topology_preset_names();

}  // namespace weft
