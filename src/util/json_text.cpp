#include "util/json_text.hpp"

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

namespace {

/// "file:line:column" of a byte offset (1-based line and column).
std::string position(std::string_view text, size_t byte, const std::string& origin) {
  int line = 1, column = 1;
  for (size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return text::format("%s:%d:%d", origin.c_str(), line, column);
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& origin, const std::string& what) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message names the byte; ours names line and column.
    std::string why = e.what();
    size_t colon = why.rfind(": ");
    fail(ErrorCode::Parse, position(text, e.byte, origin) + ": " + what + " is not valid JSON (" +
                               (colon == std::string::npos ? why : why.substr(colon + 2)) + ")");
  } catch (const nlohmann::json::exception& e) {
    // A number beyond double's range raises out_of_range, not parse_error, and names no byte.
    fail(ErrorCode::Parse, origin + ": " + what + " is not valid JSON (" + e.what() + ")");
  }
}

}  // namespace weft
