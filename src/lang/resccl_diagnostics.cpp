#include "lang/resccl_diagnostics.hpp"

#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::resccl {

std::string_view SourceText::line(int line) const {
  if (line < 1) return {};
  size_t start = 0;
  for (int l = 1; l < line; ++l) {
    size_t nl = text_.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  size_t end = text_.find('\n', start);
  if (end == std::string_view::npos) end = text_.size();
  std::string_view s = text_.substr(start, end - start);
  if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
  return s;
}

std::string SourceText::format(int line_no, int column, std::string_view sentence) const {
  std::string out = filename_ + ":" + std::to_string(line_no) + ":" + std::to_string(column) + ": ";
  out.append(sentence);
  out += '\n';
  for (unsigned char c : line(line_no)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  out += '\n';
  out.append(static_cast<size_t>(column > 1 ? column - 1 : 0), ' ');
  out += '^';
  return out;
}

void SourceText::fail_at(int line_no, int column, std::string_view sentence) const {
  fail(ErrorCode::Parse, format(line_no, column, sentence));
}

std::string quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += text::format("\\x%02x", c);
  }
  if (s.size() > kMax) out += "...";
  out += "'";
  return out;
}

}  // namespace weft::resccl
