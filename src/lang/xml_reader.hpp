// A small XML reader for weft's front-ends (MSCCL XML import), with no library dependency.
//
// It reads the part of XML that algorithm files use: an optional declaration, comments,
// processing instructions, one root element with attributes (single or double quotes),
// nested elements, character data, CDATA sections and the predefined and numeric character
// references. A DOCTYPE is refused (no entity expansion, so no "billion laughs"). Every
// element, attribute name, attribute value and text run keeps its line and column, so
// that a later stage can point at the exact place in the file at fault.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace weft::xml {

/// 1-based line and column (in bytes) of a place in the input.
struct Position {
  int line = 0;
  int column = 0;
};

struct Attribute {
  std::string name;
  std::string value;       ///< with character references decoded
  Position name_pos;       ///< first character of the name
  Position value_pos;      ///< first character after the opening quote
};

struct Element {
  std::string name;
  Position pos;                     ///< the '<' that opens the element
  std::vector<Attribute> attributes;
  std::vector<Element> children;
  /// Character data directly inside this element (not its children), concatenated;
  /// `text_pos` is where the first non-blank character of it appears (line 0 if none).
  std::string text;
  Position text_pos;

  /// The attribute named `name`, or nullptr.
  const Attribute* find(std::string_view attribute_name) const;
};

/// Limits that keep hostile input from exhausting the stack or memory.
struct Limits {
  int max_depth = 64;                   ///< element nesting
  size_t max_attributes = 256;          ///< per element
  size_t max_elements = 10'000'000;     ///< in the whole document
};

/// A parsed document: the root element and the text it came from (kept for error messages).
struct Document {
  std::string file;
  std::string source;
  Element root;
};

/// Parses `text`. `file` names the input in error messages. Throws weft::Error(Parse) with
/// "file:line:column: sentence", followed by the offending line and a caret under the column.
/// Never returns a partial document.
Document parse(std::string_view text, const std::string& file, const Limits& limits = {});

/// Throws weft::Error(Parse) formatted as parse() does, pointing at `pos` of `doc`.
[[noreturn]] void fail_at(const Document& doc, Position pos, const std::string& message);

/// "file:line:column" of `pos` in `doc`.
std::string where(const Document& doc, Position pos);

/// Escapes a string for use inside a double-quoted attribute value or as text.
std::string escape(std::string_view s);

}  // namespace weft::xml
