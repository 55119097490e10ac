// Helpers shared by the XML and MSCCL tests: building small MSCCL files, editing one line
// of a file, and checking that an error points at the right place.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "ir/algorithm.hpp"
#include "util/error.hpp"

namespace weft::test {

/// One <step>; `s` is filled in from its position.
struct St {
  std::string type;
  std::string srcbuf = "i";
  int srcoff = -1;
  std::string dstbuf = "o";
  int dstoff = -1;
  int cnt = 1;
  int depid = -1;
  int deps = -1;
  int hasdep = 0;
};
struct Tb {
  int send = -1, recv = -1, chan = 0;
  std::vector<St> steps;
};
struct Gpu {
  int i_chunks = 0, o_chunks = 0, s_chunks = 0;
  std::vector<Tb> tbs;
};

/// An MSCCL file: `<algo head>` then the gpus (ids 0..n-1, tbs 0..m-1), one element a line.
inline std::string algo(const std::string& head, const std::vector<Gpu>& gpus) {
  std::string out = "<algo " + head + ">\n";
  for (size_t g = 0; g < gpus.size(); ++g) {
    const Gpu& gpu = gpus[g];
    out += "  <gpu id=\"" + std::to_string(g) + "\" i_chunks=\"" + std::to_string(gpu.i_chunks) + "\" o_chunks=\"" +
           std::to_string(gpu.o_chunks) + "\" s_chunks=\"" + std::to_string(gpu.s_chunks) + "\">\n";
    for (size_t t = 0; t < gpu.tbs.size(); ++t) {
      const Tb& tb = gpu.tbs[t];
      out += "    <tb id=\"" + std::to_string(t) + "\" send=\"" + std::to_string(tb.send) + "\" recv=\"" +
             std::to_string(tb.recv) + "\" chan=\"" + std::to_string(tb.chan) + "\">\n";
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const St& st = tb.steps[s];
        out += "      <step s=\"" + std::to_string(s) + "\" type=\"" + st.type + "\" srcbuf=\"" + st.srcbuf +
               "\" srcoff=\"" + std::to_string(st.srcoff) + "\" dstbuf=\"" + st.dstbuf + "\" dstoff=\"" +
               std::to_string(st.dstoff) + "\" cnt=\"" + std::to_string(st.cnt) + "\" depid=\"" +
               std::to_string(st.depid) + "\" deps=\"" + std::to_string(st.deps) + "\" hasdep=\"" +
               std::to_string(st.hasdep) + "\"/>\n";
      }
      out += "    </tb>\n";
    }
    out += "  </gpu>\n";
  }
  out += "</algo>\n";
  return out;
}

/// The usual header: name, proto, nchannels, nchunksperloop, ngpus, coll, inplace.
inline std::string head(const std::string& coll, int ngpus, int nchunks, int inplace = 1, int nchannels = 1,
                        const std::string& proto = "Simple") {
  return "name=\"t\" proto=\"" + proto + "\" nchannels=\"" + std::to_string(nchannels) + "\" nchunksperloop=\"" +
         std::to_string(nchunks) + "\" ngpus=\"" + std::to_string(ngpus) + "\" coll=\"" + coll + "\" inplace=\"" +
         std::to_string(inplace) + "\"";
}

/// Replaces the first `from` on 1-based line `line` of `text` by `to`; fails the test if absent.
inline std::string edit(const std::string& text, int line, const std::string& from, const std::string& to) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) start = text.find('\n', start) + 1;
  size_t end = text.find('\n', start);
  size_t at = text.find(from, start);
  if (at == std::string::npos || at >= end) {
    ADD_FAILURE() << "'" << from << "' is not on line " << line;
    return text;
  }
  return text.substr(0, at) + to + text.substr(at + from.size());
}

/// 1-based column just after `needle` on line `line` (where an attribute's value starts
/// when needle is `name="`).
inline int column_after(const std::string& text, int line, const std::string& needle) {
  size_t start = 0;
  for (int l = 1; l < line; ++l) start = text.find('\n', start) + 1;
  size_t at = text.find(needle, start);
  return static_cast<int>(at - start + needle.size() + 1);
}

/// 1-based column where `needle` starts on line `line`.
inline int column_at(const std::string& text, int line, const std::string& needle) {
  return column_after(text, line, needle) - static_cast<int>(needle.size());
}

/// Runs `f`, expects weft::Error with `code` whose message starts with "file:line:col:" and
/// contains `words`.
template <class F>
void expect_error_at(F&& f, const std::string& file, int line, int col, const std::string& words,
                     ErrorCode code = ErrorCode::Parse) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one at " << line << ":" << col << " saying '" << words << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.code(), code) << msg;
    std::string prefix = file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": ";
    EXPECT_EQ(msg.substr(0, prefix.size()), prefix) << msg;
    EXPECT_NE(msg.find(words), std::string::npos) << "message lacks '" << words << "': " << msg;
  }
}

/// Where msccl_xml_dir() looks, in order: $WEFT_SHARED_DIR/msccl-xml, then
/// <source root>/../shared/msccl-xml. WEFT_NO_SHARED=1 hides both (CI's fresh-clone pass).
inline std::vector<std::string> msccl_xml_places() {
  if (const char* off = std::getenv("WEFT_NO_SHARED"); off && std::string(off) == "1") return {};
  std::vector<std::string> places;
  if (const char* env = std::getenv("WEFT_SHARED_DIR")) places.push_back(std::string(env) + "/msccl-xml");
  places.push_back(std::string(WEFT_TEST_DATA_DIR) + "/../shared/msccl-xml");
  return places;
}

/// Folder of the published MSCCL files (../shared/msccl-xml, outside the project), or ""
/// when it is absent: the tests that read them skip (WEFT_SKIP_WITHOUT_PUBLISHED_MSCCL).
inline std::string msccl_xml_dir() {
  for (const std::string& d : msccl_xml_places())
    if (std::filesystem::is_directory(d)) return d;
  return "";
}

/// The skip message: the folders looked in, or that WEFT_NO_SHARED hid them.
inline std::string msccl_xml_missing() {
  std::vector<std::string> places = msccl_xml_places();
  if (places.empty()) return "the published MSCCL XML files are hidden (WEFT_NO_SHARED=1); tests/data/msccl covers the importer";
  std::string where;
  for (const std::string& d : places) where += (where.empty() ? "" : ", ") + d;
  return "the published MSCCL XML files are absent (looked for " + where + "); tests/data/msccl covers the importer";
}

/// Declares `std::string var`, the published files' folder, or skips the test naming the
/// folders it looked for.
#define WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(var)        \
  const std::string var = ::weft::test::msccl_xml_dir(); \
  if (var.empty()) GTEST_SKIP() << ::weft::test::msccl_xml_missing()

/// The project's own MSCCL files (tests/data/msccl, see its README).
inline std::string own_msccl_dir() { return std::string(WEFT_TEST_DATA_DIR) + "/tests/data/msccl"; }

/// Algorithms equal in what they do (ignores where transfers came from).
inline void expect_same_algorithm(const Algorithm& a, const Algorithm& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.collective, b.collective);
  EXPECT_EQ(a.ranks, b.ranks);
  EXPECT_EQ(a.input_chunks, b.input_chunks);
  EXPECT_EQ(a.output_chunks, b.output_chunks);
  EXPECT_EQ(a.scratch_chunks, b.scratch_chunks);
  EXPECT_EQ(a.in_place, b.in_place);
  EXPECT_EQ(a.root, b.root);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.protocol, b.protocol);
  ASSERT_EQ(a.transfers.size(), b.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) EXPECT_EQ(a.transfers[i], b.transfers[i]) << "transfer " << i;
}

}  // namespace weft::test
