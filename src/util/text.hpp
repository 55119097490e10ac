// Small text helpers shared by the front-ends, reports and the CLI.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::text {

/// printf-style formatting into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

std::vector<std::string> split(std::string_view s, char sep);
std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);

/// Parses "k=v,k2=v2" (as given to --param) into a map; throws InvalidArgument on a
/// malformed item, naming it.
std::map<std::string, std::string> parse_kv_list(std::string_view s);

/// Parses a byte size: "1024", "64K", "1M", "2G", "8KiB", "1MB" (binary multiples). A size of
/// 2^64 bytes or more is an InvalidArgument error naming it.
uint64_t parse_bytes(std::string_view s);
/// "1 KiB", "64 MiB", "8 B": the shortest exact binary unit, else a decimal with one digit.
std::string format_bytes(uint64_t bytes);

/// The whole file, or nothing when it cannot be opened or read (errno then says why); the
/// caller says what the file was in its own error.
std::optional<std::string> read_file(const std::string& path);

/// A plain text table with right-aligned columns, as nccl-tests prints.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace weft::text
