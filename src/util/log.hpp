// Logging: levels and subsystems chosen by WEFT_LOG_LEVEL / WEFT_LOG_SUBSYS, output to
// stderr or WEFT_LOG_FILE. Each line carries host, pid, level and subsystem, so logs of
// several ranks can be merged and grepped.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace weft::log {

enum class Level { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4, None = 5 };

/// True when a message of this level and subsystem would be printed.
bool enabled(Level level, std::string_view subsys);
/// Prints one line (thread-safe). Prefer the WEFT_LOG macro, which skips formatting when disabled.
void write(Level level, std::string_view subsys, const std::string& message);
/// Re-reads the WEFT_LOG_* variables (tests call it after changing the environment).
void reload();

}  // namespace weft::log

/// WEFT_LOG(Info, "INIT", "rank " << r << " ready"): stream-style, formatted only when enabled.
#define WEFT_LOG(level, subsys, expr)                                            \
  do {                                                                           \
    if (::weft::log::enabled(::weft::log::Level::level, subsys)) {               \
      std::ostringstream weft_log_stream_;                                       \
      weft_log_stream_ << expr;                                                  \
      ::weft::log::write(::weft::log::Level::level, subsys, weft_log_stream_.str()); \
    }                                                                            \
  } while (0)
