// The selection table of communicators whose ranks span nodes (hosts, or emulated nodes):
// selection/multi-node.json, built into the library. Their links between nodes carry Simple
// messages through the proxy and UCX, so the table picks among allpairs, the ring and the
// hierarchical algorithms (hm_allreduce, hm_allgather, compiled with GPUPerNode = the node
// size) per collective, rank count and size, with fewer and larger messages than within a
// node. WEFT_SELECTION, when set, replaces it as it replaces the default table.
#pragma once

#include <memory>
#include <string_view>

#include "tune/selection_table.hpp"

namespace weft {

/// The text of selection/multi-node.json as built into the library.
std::string_view multi_node_selection_text();

/// That table, parsed once.
const SelectionTable& multi_node_selection_table();

/// The table a communicator spanning nodes uses: WEFT_SELECTION's file when set, else the
/// multi-node table.
std::shared_ptr<const SelectionTable> multi_node_table_for_environment();

}  // namespace weft
