// The registry of weft's environment variables.
//
// Each WEFT_* variable is declared once, in config.cpp, with its type, default and one
// sentence; `weft env` prints the table. Code reads a value through the typed getters,
// which parse the environment on every call (cheap, and tests can change it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::config {

enum class Type { String, Int, Bool, Seconds };

struct Variable {
  std::string_view name;         ///< e.g. "WEFT_TIMEOUT"
  Type type;
  std::string_view default_value;
  std::string_view description;  ///< one sentence
};

/// Every variable weft reads, in the order `weft env` prints them.
const std::vector<Variable>& registry();

/// The registry entry of `name`; throws weft::Error(Internal) for an undeclared name,
/// so a typo in code is caught by the first test that reads it.
const Variable& lookup(std::string_view name);

/// The value set in the environment, else the declared default.
std::string get_string(std::string_view name);
/// Integer value; a malformed value is an InvalidArgument error naming the variable.
int64_t get_int(std::string_view name);
/// "1", "true", "yes", "on" (any case) are true; "0", "false", "no", "off", "" are false.
bool get_bool(std::string_view name);
/// Seconds as a double (accepts "30", "2.5").
double get_seconds(std::string_view name);

/// The table that `weft env` prints: name, type, default, current value, description.
std::string format_table();

}  // namespace weft::config
