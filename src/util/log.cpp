#include "util/log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <mutex>

#include "util/config.hpp"

namespace weft::log {
namespace {

struct State {
  std::mutex mu;
  bool loaded = false;
  Level level = Level::Warn;
  std::string subsys = "ALL";
  FILE* out = stderr;
  std::string host;
};

State& state() {
  static State s;
  return s;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

Level parse_level(const std::string& s) {
  std::string u = upper(s);
  if (u == "TRACE") return Level::Trace;
  if (u == "DEBUG") return Level::Debug;
  if (u == "INFO") return Level::Info;
  if (u == "WARN" || u == "WARNING") return Level::Warn;
  if (u == "ERROR") return Level::Error;
  if (u == "NONE" || u == "OFF") return Level::None;
  return Level::Warn;
}

void load_locked(State& s) {
  std::string lvl = config::get_string("WEFT_DEBUG");
  if (lvl.empty()) lvl = config::get_string("WEFT_LOG_LEVEL");
  s.level = parse_level(lvl);
  s.subsys = upper(config::get_string("WEFT_LOG_SUBSYS"));
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  s.host = host;
  if (s.out != stderr && s.out != nullptr) fclose(s.out);
  s.out = stderr;
  std::string file = config::get_string("WEFT_LOG_FILE");
  if (!file.empty()) {
    std::string path;
    for (size_t i = 0; i < file.size(); ++i) {
      if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'h') { path += s.host; ++i; }
      else if (file[i] == '%' && i + 1 < file.size() && file[i + 1] == 'p') { path += std::to_string(getpid()); ++i; }
      else path += file[i];
    }
    if (FILE* f = fopen(path.c_str(), "a")) s.out = f;
  }
  s.loaded = true;
  detail::least_level.store(static_cast<int>(s.level), std::memory_order_relaxed);
}

const char* level_name(Level l) {
  switch (l) {
    case Level::Trace: return "TRACE";
    case Level::Debug: return "DEBUG";
    case Level::Info: return "INFO";
    case Level::Warn: return "WARN";
    case Level::Error: return "ERROR";
    case Level::None: return "NONE";
  }
  return "?";
}

}  // namespace

void reload() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  load_locked(s);
}

bool detail::enabled_locked(Level level, std::string_view subsys) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.loaded) load_locked(s);
  if (level < s.level || level == Level::None) return false;
  if (s.subsys == "ALL" || s.subsys.empty()) return true;
  std::string sub = upper(std::string(subsys));
  size_t start = 0;
  while (start <= s.subsys.size()) {
    size_t end = s.subsys.find(',', start);
    if (end == std::string::npos) end = s.subsys.size();
    if (s.subsys.compare(start, end - start, sub) == 0) return true;
    start = end + 1;
  }
  return false;
}

void write(Level level, std::string_view subsys, const std::string& message) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.loaded) load_locked(s);
  fprintf(s.out, "%s:%d weft %s %.*s %s\n", s.host.c_str(), static_cast<int>(getpid()), level_name(level),
          static_cast<int>(subsys.size()), subsys.data(), message.c_str());
  fflush(s.out);
}

}  // namespace weft::log
