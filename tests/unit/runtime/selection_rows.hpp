// The default table's rows for mid sizes on 3 to 8 ranks (issue 32, docs/runtime.md "Mid
// sizes on 3 to 8 ranks"), told apart by their note, and the table without them: the table
// the tests of the hand-built replacement (test_selection_table.cpp,
// test_selection_compiled.cpp) are about.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tune/selection_table.hpp"

namespace weft::test {

inline constexpr const char* kMidSizeNote = "mid sizes on 3 to 8 ranks";

inline bool is_mid_size_row(const nlohmann::json& row) {
  return row.contains("note") && row["note"].get<std::string>().rfind(kMidSizeNote, 0) == 0;
}

/// selection/default.json's rows (as built in) for mid sizes on 3 to 8 ranks, as JSON.
inline nlohmann::json mid_size_rows() {
  const nlohmann::json table = nlohmann::json::parse(default_selection_text());
  nlohmann::json rows = nlohmann::json::array();
  for (const nlohmann::json& r : table["rows"])
    if (is_mid_size_row(r)) rows.push_back(r);
  return rows;
}

/// selection/default.json as built in, alone: without the tables per rank count
/// (selection/ranks-N.json) that default_selection_table() puts before it.
inline const SelectionTable& default_json_table() {
  static const SelectionTable t = parse_selection_table(default_selection_text(), "(built-in selection/default.json)");
  return t;
}

/// selection/default.json (as built in) without its rows for mid sizes on 3 to 8 ranks.
inline const SelectionTable& default_without_mid_size_rows() {
  static const SelectionTable t = [] {
    nlohmann::json j = nlohmann::json::parse(default_selection_text());
    nlohmann::json rows = nlohmann::json::array();
    for (const nlohmann::json& r : j["rows"])
      if (!is_mid_size_row(r)) rows.push_back(r);
    j["rows"] = rows;
    return parse_selection_table(j.dump(), "(default.json without the mid-size rows)");
  }();
  return t;
}

}  // namespace weft::test
