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
  /// Accepted range of an Int or Seconds value (inclusive); a value outside is an error.
  double min = 0;
  double max = 0;
  /// A secret: `weft env` prints "set (hidden)" for its value, and get_string refuses to
  /// copy it (read it with getenv into auth::Secret's protected memory).
  bool secret = false;
};

/// Every variable weft reads, in the order `weft env` prints them.
const std::vector<Variable>& registry();

/// The registry entry of `name`; throws weft::Error(Internal) for an undeclared name,
/// so a typo in code is caught by the first test that reads it.
const Variable& lookup(std::string_view name);

/// The value set in the environment, else the declared default. Internal error for a
/// secret variable (no std::string copy of a secret is ever made here).
std::string get_string(std::string_view name);
/// Integer value, in decimal digits only: a sign other than a leading '-', a leading zero
/// ("010" is not octal here), a fraction, trailing characters, or a value outside the
/// variable's range is an InvalidArgument error naming the variable and the value.
int64_t get_int(std::string_view name);
/// "1", "true", "yes", "on" (any case) are true; "0", "false", "no", "off", "" are false.
bool get_bool(std::string_view name);
/// Seconds: decimal digits with an optional fraction ("30", "2.5"); "inf", "nan", signs,
/// exponents and values outside the variable's range are InvalidArgument errors.
double get_seconds(std::string_view name);

/// The rule of every wait bounded by WEFT_TIMEOUT, host and device alike: `timeout_s`
/// seconds, and 0 means no deadline (the device takes a timeout of 0 as none; a host wait
/// takes 1e9 seconds, and the bootstrap's socket waits cap any deadline at a day).
inline double wait_seconds(double timeout_s) { return timeout_s > 0 ? timeout_s : 1e9; }

/// Parses every Int, Bool and Seconds variable set in the environment, so that a bad value
/// is an error when a communicator is created rather than at the first use (or never).
/// Throws the first error found.
void validate_environment();

/// The strict parsers behind get_int and get_seconds, for a value `text` of variable `name`
/// (used in errors) and the range [min, max].
int64_t parse_int(std::string_view name, const std::string& text, int64_t min, int64_t max);
double parse_seconds(std::string_view name, const std::string& text, double min, double max);

/// The table that `weft env` prints: name, type, default, current value (for a secret
/// variable only "set (hidden)"), description.
std::string format_table();

}  // namespace weft::config
