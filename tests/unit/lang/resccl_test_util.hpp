// Helpers shared by the ResCCLang tests: parse a program given as lines, and capture the
// error it raises.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lang/load.hpp"
#include "lang/resccl_eval.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft::test {

/// Joins lines with '\n' (and a final one).
inline std::string lines(std::initializer_list<std::string> ls) {
  std::string s;
  for (const auto& l : ls) s += l + "\n";
  return s;
}

/// A program with the header `ResCCLAlgo(<header>):` and the given body lines, each
/// indented by four spaces.
inline std::string program(const std::string& header, std::initializer_list<std::string> body) {
  std::string s = "ResCCLAlgo(" + header + "):\n";
  for (const auto& l : body) s += "    " + l + "\n";
  return s;
}

inline Algorithm parse(const std::string& text, const ParamMap& overrides = {}) {
  return parse_resccl(text, "t.rccl", overrides);
}

/// The message of the weft::Error(Parse) that parsing `text` raises; fails the test when
/// it succeeds or raises anything else.
inline std::string parse_error(const std::string& text, const ParamMap& overrides = {},
                               const resccl::Limits& limits = {}) {
  try {
    resccl::run(text, "t.rccl", overrides, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "parsing succeeded, but an error was expected for:\n" << text;
  return {};
}

/// Checks that `message` has the form "t.rccl:line:column: <sentence containing
/// `sentence`>\n<line `line` of text>\n<column-1 spaces>^".
inline void expect_error_at(const std::string& text, const std::string& message, int line, int column,
                            const std::string& sentence) {
  std::vector<std::string> parts = text::split(message, '\n');
  ASSERT_EQ(parts.size(), 3u) << message;
  std::string prefix = "t.rccl:" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  EXPECT_EQ(parts[0].rfind(prefix, 0), 0u) << "want prefix " << prefix << " in:\n" << message;
  EXPECT_NE(parts[0].find(sentence), std::string::npos) << "want '" << sentence << "' in:\n" << message;
  std::vector<std::string> src = text::split(text, '\n');
  std::string want_line = line - 1 < static_cast<int>(src.size()) ? src[line - 1] : "";
  if (!want_line.empty() && want_line.back() == '\r') want_line.pop_back();
  for (char& c : want_line)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  EXPECT_EQ(parts[1], want_line) << message;
  EXPECT_EQ(parts[2], std::string(column - 1, ' ') + "^") << message;
}

}  // namespace weft::test
