// JSON text parsed with errors that say where: nlohmann names a byte, weft names the file,
// line and column.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace weft {

/// Parses `text`. Throws weft::Error (Parse): "<origin>:<line>:<column>: <what> is not valid
/// JSON (<reason>)", or without a position for a number beyond double's range.
nlohmann::json parse_json(std::string_view text, const std::string& origin, const std::string& what);

}  // namespace weft
