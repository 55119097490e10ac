// The XML reader: structure, positions, references, and every error it reports.
#include <gtest/gtest.h>

#include "lang/xml_reader.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

using test::expect_error_at;

TEST(XmlReader, ReadsElementsAttributesAndPositions) {
  std::string text =
      "<?xml version=\"1.0\"?>\n"
      "<!-- a comment -->\n"
      "<algo name=\"ring\" n='8'>\n"
      "  <gpu id=\"0\">\n"
      "    <tb id=\"1\"/>\n"
      "  </gpu>\n"
      "</algo>\n";
  xml::Document doc = xml::parse(text, "f.xml");
  EXPECT_EQ(doc.file, "f.xml");
  const xml::Element& root = doc.root;
  EXPECT_EQ(root.name, "algo");
  EXPECT_EQ(root.pos.line, 3);
  EXPECT_EQ(root.pos.column, 1);
  ASSERT_EQ(root.attributes.size(), 2u);
  EXPECT_EQ(root.attributes[0].name, "name");
  EXPECT_EQ(root.attributes[0].value, "ring");
  EXPECT_EQ(root.attributes[0].name_pos.line, 3);
  EXPECT_EQ(root.attributes[0].name_pos.column, 7);
  EXPECT_EQ(root.attributes[0].value_pos.column, 13);
  ASSERT_NE(root.find("n"), nullptr);
  EXPECT_EQ(root.find("n")->value, "8");
  EXPECT_EQ(root.find("missing"), nullptr);
  ASSERT_EQ(root.children.size(), 1u);
  const xml::Element& gpu = root.children[0];
  EXPECT_EQ(gpu.pos.line, 4);
  EXPECT_EQ(gpu.pos.column, 3);
  ASSERT_EQ(gpu.children.size(), 1u);
  EXPECT_EQ(gpu.children[0].name, "tb");
  EXPECT_EQ(gpu.children[0].pos.line, 5);
  EXPECT_EQ(gpu.children[0].pos.column, 5);
  EXPECT_TRUE(gpu.children[0].children.empty());
  EXPECT_EQ(root.text_pos.line, 0);  // only blanks between elements
}

TEST(XmlReader, DecodesReferencesCdataAndKeepsText) {
  std::string text = "<a v=\"&lt;&gt;&amp;&quot;&apos;&#65;&#x42;&#xe9;\">x &amp; y<![CDATA[<raw>]]><!-- c --></a>";
  xml::Document doc = xml::parse(text, "f.xml");
  EXPECT_EQ(doc.root.find("v")->value, "<>&\"'AB\xC3\xA9");
  EXPECT_EQ(doc.root.text, "x & y<raw>");
  EXPECT_EQ(doc.root.text_pos.line, 1);
  EXPECT_EQ(doc.root.text_pos.column, 51);
}

TEST(XmlReader, AcceptsByteOrderMarkCrLfAndProcessingInstructions) {
  std::string text = "\xEF\xBB\xBF<?xml version='1.0'?>\r\n<a>\r\n<?pi stuff?><b k = \"1\" />\r\n</a >\r\n<!-- end -->\r\n";
  xml::Document doc = xml::parse(text, "f.xml");
  ASSERT_EQ(doc.root.children.size(), 1u);
  EXPECT_EQ(doc.root.children[0].find("k")->value, "1");
  EXPECT_EQ(doc.root.children[0].pos.line, 3);
}

TEST(XmlReader, EscapeRoundTrips) {
  std::string raw = "a<b>&\"c'";
  xml::Document doc = xml::parse("<x v=\"" + xml::escape(raw) + "\"/>", "f");
  EXPECT_EQ(doc.root.find("v")->value, raw);
}

struct BadXml {
  const char* text;
  int line, col;
  const char* words;
};

class XmlReaderErrors : public ::testing::TestWithParam<BadXml> {};

TEST_P(XmlReaderErrors, PointAtTheFault) {
  const BadXml& b = GetParam();
  expect_error_at([&] { xml::parse(b.text, "bad.xml"); }, "bad.xml", b.line, b.col, b.words);
}

INSTANTIATE_TEST_SUITE_P(
    All, XmlReaderErrors,
    ::testing::Values(
        BadXml{"", 1, 1, "holds no XML element"},
        BadXml{"  \n<!-- only -->\n", 3, 1, "holds no XML element"},
        BadXml{"hello", 1, 1, "expected '<' to open the root element"},
        BadXml{"<a>", 1, 1, "<a> is never closed"},
        BadXml{"<a", 1, 1, "start tag of <a> is never closed"},
        BadXml{"<a b=\"1\"", 1, 1, "start tag of <a> is never closed"},
        BadXml{"<a></b>", 1, 4, "</b> closes <a>"},
        BadXml{"<a>\n  <b>\n</a>", 3, 1, "</a> closes <b>"},
        BadXml{"<a></a><b/>", 1, 8, "a second top-level element"},
        BadXml{"<a></a>junk", 1, 8, "unexpected text"},
        BadXml{"<a b=1/>", 1, 6, "must be quoted"},
        BadXml{"<a b/>", 1, 5, "expected '=' after attribute b"},
        BadXml{"<a b=\"1\" b=\"2\"/>", 1, 10, "attribute b appears twice"},
        BadXml{"<a b=\"1\"c=\"2\"/>", 1, 9, "expected whitespace"},
        BadXml{"<a b=\"x<y\"/>", 1, 8, "'<' is not allowed"},
        BadXml{"<a b=\"open/>", 1, 6, "never closed with \""},
        BadXml{"<a b=\"&foo;\"/>", 1, 7, "unknown entity &foo;"},
        BadXml{"<a b=\"&amp\"/>", 1, 7, "must start a character reference"},
        BadXml{"<a b=\"&#;\"/>", 1, 7, "has no digits"},
        BadXml{"<a b=\"&#xZZ;\"/>", 1, 7, "is not a number"},
        BadXml{"<a b=\"&#0;\"/>", 1, 7, "names no valid character"},
        BadXml{"<a b=\"&#x110000;\"/>", 1, 7, "beyond Unicode"},
        BadXml{"<a>&bogus;</a>", 1, 4, "unknown entity"},
        BadXml{"<!-- open", 1, 1, "comment is never closed"},
        BadXml{"<?xml open", 1, 1, "processing instruction is never closed"},
        BadXml{"<!DOCTYPE a><a/>", 1, 1, "DOCTYPE"},
        BadXml{"<a><![CDATA[x</a>", 1, 4, "CDATA section is never closed"},
        BadXml{"<a><!ENTITY x></a>", 1, 4, "declarations"},
        BadXml{"<1a/>", 1, 2, "expected an element name"},
        BadXml{"<a></ a>", 1, 6, "expected an element name after '</'"},
        BadXml{"<a></a x>", 1, 8, "expected '>' to end </a>"}));

TEST(XmlReader, LimitsDepthAttributesAndElements) {
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += "<a>";
  expect_error_at([&] { xml::parse(deep, "d.xml"); }, "d.xml", 1, 193, "nested more than 64 deep");
  xml::Limits lim;
  lim.max_attributes = 2;
  expect_error_at([&] { xml::parse("<a x=\"1\" y=\"2\" z=\"3\"/>", "d.xml", lim); }, "d.xml", 1, 16,
                  "more than 2 attributes");
  lim = {};
  lim.max_elements = 2;
  expect_error_at([&] { xml::parse("<a><b/><c/></a>", "d.xml", lim); }, "d.xml", 1, 8, "more than 2 elements");
}

TEST(XmlReader, ErrorShowsTheLineAndACaret) {
  try {
    xml::parse("<a>\n  <b c=d/>\n</a>", "f.xml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "f.xml:2:8: the value of attribute c must be quoted, found 'd'\n    <b c=d/>\n         ^");
  }
}

TEST(XmlReader, FailAtAndWhereFormatPositions) {
  xml::Document doc = xml::parse("<a>\n <b/>\n</a>", "p.xml");
  EXPECT_EQ(xml::where(doc, doc.root.children[0].pos), "p.xml:2:2");
  EXPECT_EQ(xml::where(doc, {}), "p.xml");
  try {
    xml::fail_at(doc, doc.root.children[0].pos, "bad b");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse);
    EXPECT_EQ(std::string(e.what()), "p.xml:2:2: bad b\n   <b/>\n   ^");
  }
  try {
    xml::fail_at(doc, {}, "no place");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "p.xml: no place");
  }
}

}  // namespace
}  // namespace weft
