#include "tune/net_selection.hpp"

#include "util/config.hpp"

namespace weft {

const SelectionTable& multi_node_selection_table() {
  static const SelectionTable t = parse_selection_table(multi_node_selection_text(), "(built-in selection/multi-node.json)");
  return t;
}

std::shared_ptr<const SelectionTable> multi_node_table_for_environment() {
  if (!config::get_string("WEFT_SELECTION").empty()) return selection_table_for_environment();
  return std::shared_ptr<const SelectionTable>(std::shared_ptr<void>(), &multi_node_selection_table());
}

}  // namespace weft
