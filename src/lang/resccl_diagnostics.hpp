// Diagnostics of the ResCCLang front-end: the program text with its file name, and the
// one error format every stage of the front-end uses:
//
//   file:line:column: one sentence
//   <the offending source line>
//   <spaces>^
//
// Lines and columns are 1-based; a column counts bytes.
#pragma once

#include <string>
#include <string_view>

namespace weft::resccl {

/// One ResCCLang program's text and the name errors give it. Holds a view: the text must
/// outlive the SourceText.
class SourceText {
 public:
  SourceText(std::string_view text, std::string filename) : text_(text), filename_(std::move(filename)) {}

  std::string_view text() const { return text_; }
  const std::string& filename() const { return filename_; }

  /// Line `line` (1-based) without its line break; empty past the end of the text.
  std::string_view line(int line) const;

  /// The whole error message for a problem at (line, column): see the file comment.
  /// Non-printable bytes of the echoed line are shown as '?' so that the caret stays aligned.
  std::string format(int line, int column, std::string_view sentence) const;

  /// Throws weft::Error(ErrorCode::Parse) with format(line, column, sentence).
  [[noreturn]] void fail_at(int line, int column, std::string_view sentence) const;

 private:
  std::string_view text_;
  std::string filename_;
};

/// `s` quoted for an error message, with non-printable bytes written as \xNN and the
/// length capped so that a message stays one readable sentence.
std::string quote(std::string_view s);

}  // namespace weft::resccl
