// Logging: levels and subsystems chosen by WEFT_LOG_LEVEL / WEFT_LOG_SUBSYS, output to
// stderr or WEFT_LOG_FILE. Each line carries host, pid, level and subsystem, so logs of
// several ranks can be merged and grepped.
#pragma once

#include <atomic>
#include <sstream>
#include <string>
#include <string_view>

namespace weft::log {

enum class Level { Trace = 0, Debug = 1, Info = 2, Warn = 3, Error = 4, None = 5 };

namespace detail {
/// The least level printed once the WEFT_LOG_* variables are read (-1 before): enabled()
/// checks it first, without a lock, so that a message below the level costs one relaxed
/// load (a collective call's DEBUG lines run on every call).
inline std::atomic<int> least_level{-1};
/// The rest of enabled(): reads the variables at first use, then the level and the
/// subsystems, under the log's lock.
bool enabled_locked(Level level, std::string_view subsys);
}  // namespace detail

/// True when a message of this level and subsystem would be printed.
inline bool enabled(Level level, std::string_view subsys) {
  const int least = detail::least_level.load(std::memory_order_relaxed);
  if (least >= 0 && static_cast<int>(level) < least) return false;
  return detail::enabled_locked(level, subsys);
}
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
