#include "lang/xml_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "util/error.hpp"

namespace weft::xml {

const Attribute* Element::find(std::string_view attribute_name) const {
  for (const Attribute& a : attributes)
    if (a.name == attribute_name) return &a;
  return nullptr;
}

std::string where(const Document& doc, Position pos) {
  if (pos.line <= 0) return doc.file;
  return doc.file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

// The message, then the line it points into and a caret under the column, as the
// ResCCLang parser prints its errors.
static std::string located_message(std::string_view source, const std::string& file, Position pos,
                                   const std::string& message) {
  if (pos.line <= 0) return file + ": " + message;  // a place not read from text
  std::string out = file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column) + ": " + message;
  size_t start = 0;
  for (int l = 1; l < pos.line && start < source.size(); ++l) {
    size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return out;
    start = nl + 1;
  }
  size_t end = source.find('\n', start);
  std::string_view line = source.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Long lines (a whole file on one line) are cut around the column so the caret stays useful.
  size_t col = pos.column > 0 ? static_cast<size_t>(pos.column - 1) : 0;
  size_t from = line.size() <= 160 || col <= 60 ? 0 : col - 60;
  std::string shown(line.substr(std::min(from, line.size()), 160));
  for (char& c : shown)
    if (c == '\t') c = ' ';
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  out += "\n  " + shown + "\n  " + std::string(col - from, ' ') + "^";
  return out;
}

void fail_at(const Document& doc, Position pos, const std::string& message) {
  fail(ErrorCode::Parse, located_message(doc.source, doc.file, pos, message));
}

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_name_start(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u == '_' || u == ':' || u >= 0x80;
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, const Limits& limits)
      : s_(text), file_(file), limits_(limits) {}

  Element parse_document() {
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") advance(3);  // UTF-8 byte order mark
    skip_misc();
    if (at_end()) error(pos(), "the file holds no XML element");
    if (peek() != '<') error(pos(), "expected '<' to open the root element, found " + describe(peek()));
    Element root = parse_element(1);
    skip_misc();
    if (!at_end()) {
      if (peek() == '<')
        error(pos(), "a second top-level element follows the root element <" + root.name + ">; an XML file has exactly one");
      error(pos(), "unexpected text " + describe(peek()) + " after the root element <" + root.name + ">");
    }
    return root;
  }

 private:
  std::string_view s_;
  const std::string& file_;
  Limits limits_;
  size_t i_ = 0;
  int line_ = 1;
  int col_ = 1;
  size_t elements_ = 0;

  bool at_end() const { return i_ >= s_.size(); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool starts(std::string_view p) const { return s_.substr(i_, p.size()) == p; }
  Position pos() const { return {line_, col_}; }

  void advance(size_t n = 1) {
    for (size_t k = 0; k < n && i_ < s_.size(); ++k, ++i_) {
      if (s_[i_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }

  [[noreturn]] void error(Position p, const std::string& message) const {
    fail(ErrorCode::Parse, located_message(s_, file_, p, message));
  }

  static std::string describe(char c) {
    if (c == '\0') return "the end of the file";
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02x", u);
      return std::string("byte ") + buf;
    }
    return std::string("'") + c + "'";
  }

  void skip_space() {
    while (!at_end() && is_space(peek())) advance();
  }

  void expect(std::string_view what, const std::string& context) {
    if (!starts(what)) error(pos(), "expected '" + std::string(what) + "' " + context + ", found " + describe(peek()));
    advance(what.size());
  }

  // Skips "<!-- ... -->" (positioned at "<!--").
  void skip_comment() {
    Position start = pos();
    advance(4);
    size_t end = s_.find("-->", i_);
    if (end == std::string_view::npos) error(start, "this comment is never closed with '-->'");
    advance(end + 3 - i_);
  }

  // Skips "<? ... ?>" (positioned at "<?").
  void skip_pi() {
    Position start = pos();
    advance(2);
    size_t end = s_.find("?>", i_);
    if (end == std::string_view::npos) error(start, "this processing instruction is never closed with '?>'");
    advance(end + 2 - i_);
  }

  // Whitespace, comments and processing instructions around the root element.
  void skip_misc() {
    while (true) {
      skip_space();
      if (starts("<!--")) {
        skip_comment();
      } else if (starts("<?")) {
        skip_pi();
      } else if (starts("<!DOCTYPE") || starts("<!doctype")) {
        error(pos(), "document type declarations (<!DOCTYPE>) are not supported in algorithm files");
      } else {
        return;
      }
    }
  }

  std::string parse_name(const char* what) {
    if (!is_name_start(peek())) error(pos(), std::string("expected ") + what + ", found " + describe(peek()));
    size_t start = i_;
    while (!at_end() && is_name_char(peek())) advance();
    return std::string(s_.substr(start, i_ - start));
  }

  // Decodes one reference at '&' into `out`.
  void parse_reference(std::string& out) {
    Position start = pos();
    size_t semi = s_.find(';', i_);
    if (semi == std::string_view::npos || semi - i_ > 12)
      error(start, "'&' must start a character reference such as &amp; or &#60; (write & as &amp;)");
    std::string_view ref = s_.substr(i_ + 1, semi - i_ - 1);
    if (ref == "lt") out += '<';
    else if (ref == "gt") out += '>';
    else if (ref == "amp") out += '&';
    else if (ref == "quot") out += '"';
    else if (ref == "apos") out += '\'';
    else if (!ref.empty() && ref[0] == '#') {
      bool hex = ref.size() > 1 && (ref[1] == 'x' || ref[1] == 'X');
      std::string_view digits = ref.substr(hex ? 2 : 1);
      if (digits.empty()) error(start, "the character reference &" + std::string(ref) + "; has no digits");
      uint32_t cp = 0;
      for (char c : digits) {
        int d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else error(start, "the character reference &" + std::string(ref) + "; is not a number");
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
        if (cp > 0x10FFFF) error(start, "the character reference &" + std::string(ref) + "; is beyond Unicode");
      }
      if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF))
        error(start, "the character reference &" + std::string(ref) + "; names no valid character");
      append_utf8(out, cp);
    } else {
      error(start, "unknown entity &" + std::string(ref) + "; (only &lt; &gt; &amp; &quot; &apos; and &#N; are known)");
    }
    advance(semi + 1 - i_);
  }

  Attribute parse_attribute(const Element& e) {
    Attribute a;
    a.name_pos = pos();
    a.name = parse_name("an attribute name");
    skip_space();
    if (peek() != '=')
      error(pos(), "expected '=' after attribute " + a.name + " of <" + e.name + ">, found " + describe(peek()));
    advance();
    skip_space();
    char q = peek();
    if (q != '"' && q != '\'')
      error(pos(), "the value of attribute " + a.name + " must be quoted, found " + describe(q));
    Position open = pos();
    advance();
    a.value_pos = pos();
    while (true) {
      if (at_end()) error(open, "the value of attribute " + a.name + " is never closed with " + std::string(1, q));
      char c = peek();
      if (c == q) break;
      if (c == '<') error(pos(), "'<' is not allowed inside the value of attribute " + a.name + " (write &lt;)");
      if (c == '&') {
        parse_reference(a.value);
        continue;
      }
      a.value += c;
      advance();
    }
    advance();  // closing quote
    return a;
  }

  // `first` is where the first non-blank character of `chunk` is (line 0 if it has none).
  void add_text(Element& e, std::string_view chunk, Position first) {
    if (e.text_pos.line == 0 && first.line != 0) e.text_pos = first;
    e.text += chunk;
  }

  Element parse_element(int depth) {
    if (depth > limits_.max_depth)
      error(pos(), "elements are nested more than " + std::to_string(limits_.max_depth) + " deep");
    if (++elements_ > limits_.max_elements)
      error(pos(), "the file holds more than " + std::to_string(limits_.max_elements) + " elements");
    Element e;
    e.pos = pos();
    advance();  // '<'
    e.name = parse_name("an element name after '<'");
    // Attributes.
    while (true) {
      bool spaced = !at_end() && is_space(peek());
      skip_space();
      if (at_end()) error(e.pos, "the start tag of <" + e.name + "> is never closed with '>'");
      if (peek() == '>' || starts("/>")) break;
      if (!spaced) error(pos(), "expected whitespace, '>' or '/>' in the start tag of <" + e.name + ">, found " + describe(peek()));
      Attribute a = parse_attribute(e);
      if (e.find(a.name)) error(a.name_pos, "attribute " + a.name + " appears twice in <" + e.name + ">");
      if (e.attributes.size() >= limits_.max_attributes)
        error(a.name_pos, "<" + e.name + "> has more than " + std::to_string(limits_.max_attributes) + " attributes");
      e.attributes.push_back(std::move(a));
    }
    if (starts("/>")) {
      advance(2);
      return e;
    }
    advance();  // '>'
    // Content.
    while (true) {
      if (at_end()) error(e.pos, "<" + e.name + "> is never closed (expected </" + e.name + ">)");
      if (starts("</")) {
        Position close = pos();
        advance(2);
        std::string name = parse_name("an element name after '</'");
        skip_space();
        if (peek() != '>') error(pos(), "expected '>' to end </" + name + ">, found " + describe(peek()));
        advance();
        if (name != e.name)
          error(close, "</" + name + "> closes <" + e.name + "> opened at line " + std::to_string(e.pos.line) +
                           ", column " + std::to_string(e.pos.column));
        return e;
      }
      if (starts("<!--")) {
        skip_comment();
      } else if (starts("<![CDATA[")) {
        Position start = pos();
        advance(9);
        size_t end = s_.find("]]>", i_);
        if (end == std::string_view::npos) error(start, "this CDATA section is never closed with ']]>'");
        std::string_view body = s_.substr(i_, end - i_);
        bool blank = true;
        for (char c : body) blank = blank && is_space(c);
        add_text(e, body, blank ? Position{} : pos());
        advance(end + 3 - i_);
      } else if (starts("<?")) {
        skip_pi();
      } else if (starts("<!")) {
        error(pos(), "declarations (<!...>) are not allowed inside an element");
      } else if (peek() == '<') {
        e.children.push_back(parse_element(depth + 1));
      } else {
        Position first;
        std::string run;
        while (!at_end() && peek() != '<') {
          if (first.line == 0 && !is_space(peek())) first = pos();
          if (peek() == '&') {
            parse_reference(run);
          } else {
            run += peek();
            advance();
          }
        }
        add_text(e, run, first);
      }
    }
  }
};

}  // namespace

Document parse(std::string_view text, const std::string& file, const Limits& limits) {
  Document doc;
  doc.file = file;
  Parser p(text, file, limits);
  doc.root = p.parse_document();
  doc.source = std::string(text);
  return doc;
}

}  // namespace weft::xml
