#include "util/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "util/error.hpp"

namespace weft::text {

std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) vsnprintf(out.data(), out.size() + 1, fmt, ap2);
  va_end(ap2);
  return out;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

std::map<std::string, std::string> parse_kv_list(std::string_view s) {
  std::map<std::string, std::string> out;
  if (trim(s).empty()) return out;
  for (const std::string& item : split(s, ',')) {
    size_t eq = item.find('=');
    std::string key(trim(std::string_view(item).substr(0, eq == std::string::npos ? item.size() : eq)));
    if (eq == std::string::npos || key.empty())
      fail(ErrorCode::InvalidArgument, "parameter '" + item + "' is not of the form name=value");
    out[key] = std::string(trim(std::string_view(item).substr(eq + 1)));
  }
  return out;
}

uint64_t parse_bytes(std::string_view s) {
  std::string_view t = trim(s);
  size_t i = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i == 0) fail(ErrorCode::InvalidArgument, "'" + std::string(s) + "' is not a byte size (e.g. 1024, 64K, 1M, 2G)");
  uint64_t v = 0;
  auto too_large = [&] {
    fail(ErrorCode::InvalidArgument, "byte size '" + std::string(s) + "' is too large (at most 2^64 - 1 bytes)");
  };
  for (size_t k = 0; k < i; ++k) {
    const uint64_t digit = static_cast<uint64_t>(t[k] - '0');
    if (v > (UINT64_MAX - digit) / 10) too_large();
    v = v * 10 + digit;
  }
  std::string unit(trim(t.substr(i)));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::toupper(c); });
  uint64_t mul = 1;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") mul = 1ull << 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") mul = 1ull << 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") mul = 1ull << 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") mul = 1ull << 40;
  else fail(ErrorCode::InvalidArgument, "'" + std::string(s) + "' has an unknown unit '" + unit + "' (use B, K, M, G)");
  if (v > UINT64_MAX / mul) too_large();
  return v * mul;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  uint64_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) { v /= 1024; ++u; }
  if (v < 1024 || u == 4) return std::to_string(v) + " " + units[u];
  double d = static_cast<double>(bytes);
  u = 0;
  while (u < 4 && d >= 1024) { d /= 1024; ++u; }
  return format("%.1f %s", d, units[u]);
}

std::string Table::str() const {
  std::vector<size_t> width(header_.size(), 0);
  for (size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      out += std::string(width[c] - std::min(width[c], cell.size()) + (c ? 2 : 0), ' ') + cell;
    }
    out += '\n';
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return text.str();
}

}  // namespace weft::text
