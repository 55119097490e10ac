// Reading MSCCL XML: every attribute, its checks, and where each error points.
#include <gtest/gtest.h>

#include "lang/msccl_import.hpp"
#include "lang/msccl_program.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

using test::algo;
using test::column_after;
using test::column_at;
using test::edit;
using test::expect_error_at;
using test::Gpu;
using test::St;
using test::Tb;

// AllGather in place on 2 gpus, one chunk each: gpu r sends output chunk r to the other.
//  1 <algo ...>
//  2   <gpu id="0" ...>          8   <gpu id="1" ...>
//  3     <tb id="0" ...>         9     <tb id="0" ...>
//  4       <step s="0" send/>   10       <step s="0" send/>
//  5       <step s="1" recv/>   11       <step s="1" recv/>
std::string base() {
  return algo(test::head("allgather", 2, 2) + " outofplace=\"0\" minBytes=\"16\" maxBytes=\"4096\"",
              {Gpu{0, 2, 0, {Tb{1, 1, 0, {St{"s", "o", 0, "o", 0}, St{"r", "o", 1, "o", 1}}}}},
               Gpu{0, 2, 0, {Tb{0, 0, 0, {St{"s", "o", 1, "o", 1}, St{"r", "o", 0, "o", 0}}}}}});
}

MscclProgram read(const std::string& text, const std::string& file = "t.xml") {
  static xml::Document doc;  // the program points into it
  doc = xml::parse(text, file);
  return read_msccl_program(doc);
}

TEST(MscclProgram, ReadsEveryAttribute) {
  MscclProgram p = read(base());
  EXPECT_EQ(p.name, "t");
  EXPECT_EQ(p.proto, "Simple");
  EXPECT_EQ(p.nchannels, 1);
  EXPECT_EQ(p.nchunksperloop, 2);
  EXPECT_EQ(p.ngpus, 2);
  EXPECT_EQ(p.coll, "allgather");
  EXPECT_TRUE(p.inplace);
  EXPECT_FALSE(p.outofplace);
  EXPECT_EQ(p.min_bytes, 16);
  EXPECT_EQ(p.max_bytes, 4096);
  EXPECT_EQ(p.root, -1);
  ASSERT_EQ(p.gpus.size(), 2u);
  const MscclGpu& g = p.gpus[1];
  EXPECT_EQ(g.id, 1);
  EXPECT_EQ(g.i_chunks, 0);
  EXPECT_EQ(g.o_chunks, 2);
  EXPECT_EQ(g.s_chunks, 0);
  ASSERT_EQ(g.tbs.size(), 1u);
  EXPECT_EQ(g.tbs[0].send, 0);
  EXPECT_EQ(g.tbs[0].recv, 0);
  EXPECT_EQ(g.tbs[0].chan, 0);
  ASSERT_EQ(g.tbs[0].steps.size(), 2u);
  const MscclStep& st = g.tbs[0].steps[1];
  EXPECT_EQ(st.s, 1);
  EXPECT_EQ(st.type, MscclStepType::Recv);
  EXPECT_EQ(st.srcbuf, Buffer::Output);
  EXPECT_EQ(st.srcoff, 0);
  EXPECT_EQ(st.dstbuf, Buffer::Output);
  EXPECT_EQ(st.dstoff, 0);
  EXPECT_EQ(st.cnt, 1);
  EXPECT_EQ(st.depid, -1);
  EXPECT_EQ(st.deps, -1);
  EXPECT_FALSE(st.hasdep);
  ASSERT_NE(st.elem, nullptr);
  EXPECT_EQ(st.elem->pos.line, 11);
}

TEST(MscclProgram, DefaultsForOptionalAttributes) {
  // name defaults to the file's stem; outofplace to !inplace; minBytes 0; maxBytes unbounded.
  std::string text = edit(base(), 1, "name=\"t\" ", "");
  text = edit(text, 1, " outofplace=\"0\" minBytes=\"16\" maxBytes=\"4096\"", "");
  MscclProgram p = read(text, "dir/ring8.xml");
  EXPECT_EQ(p.name, "ring8");
  EXPECT_FALSE(p.outofplace);
  EXPECT_EQ(p.min_bytes, 0);
  EXPECT_EQ(p.max_bytes, INT64_MAX);
  p = read(edit(text, 1, "inplace=\"1\"", "inplace=\"0\""), "x");
  EXPECT_TRUE(p.outofplace);
}

TEST(MscclProgram, StepTypesAndTheirEffects) {
  for (auto [name, t] : {std::pair{"s", MscclStepType::Send}, {"r", MscclStepType::Recv}, {"rcs", MscclStepType::RecvCopySend},
                         {"rrs", MscclStepType::RecvReduceSend}, {"rrc", MscclStepType::RecvReduceCopy},
                         {"rrcs", MscclStepType::RecvReduceCopySend}, {"cpy", MscclStepType::Copy},
                         {"re", MscclStepType::Reduce}, {"nop", MscclStepType::Nop}})
    EXPECT_EQ(msccl_step_type_name(t), name);
  EXPECT_TRUE(msccl_step_sends(MscclStepType::RecvReduceSend));
  EXPECT_FALSE(msccl_step_sends(MscclStepType::RecvReduceCopy));
  EXPECT_TRUE(msccl_step_receives(MscclStepType::RecvCopySend));
  EXPECT_FALSE(msccl_step_receives(MscclStepType::Copy));
  EXPECT_FALSE(msccl_step_reads_src(MscclStepType::RecvCopySend));  // rcs forwards what it stored
  EXPECT_TRUE(msccl_step_reads_src(MscclStepType::RecvReduceSend));
  EXPECT_FALSE(msccl_step_writes_dst(MscclStepType::RecvReduceSend));  // rrs stores nothing
  EXPECT_TRUE(msccl_step_writes_dst(MscclStepType::RecvCopySend));
}

// One edit of the base file and the error it must cause.
struct Fault {
  int line;              ///< line edited
  std::string from, to;  ///< replacement on that line
  int err_line;          ///< line the error points at
  std::string needle;    ///< the error's column: just after needle (attribute value), or at it if `at`
  bool at;
  std::string words;
};

void PrintTo(const Fault& f, std::ostream* os) { *os << "line " << f.line << ": " << f.words; }

class MscclProgramFaults : public ::testing::TestWithParam<Fault> {};

TEST_P(MscclProgramFaults, PointAtElementAndAttribute) {
  const Fault& f = GetParam();
  std::string text = edit(base(), f.line, f.from, f.to);
  int col = f.at ? column_at(text, f.err_line, f.needle) : column_after(text, f.err_line, f.needle);
  expect_error_at([&] { import_msccl(text, "t.xml"); }, "t.xml", f.err_line, col, f.words);
}

std::vector<Fault> faults() {
  return {
      // <algo>
      {1, "proto=\"Simple\" ", "", 1, "<algo", true, "<algo> lacks the required attribute proto"},
      {1, "proto=\"Simple\"", "proto=\"simple\"", 1, "proto=\"", false, "<algo> attribute proto: \"simple\" is not a protocol"},
      {1, "nchannels=\"1\" ", "", 1, "<algo", true, "lacks the required attribute nchannels"},
      {1, "nchannels=\"1\"", "nchannels=\"0\"", 1, "nchannels=\"", false, "attribute nchannels: 0 is out of range [1, 1024]"},
      {1, "nchannels=\"1\"", "nchannels=\"one\"", 1, "nchannels=\"", false, "\"one\" is not an integer"},
      {1, "nchannels=\"1\"", "nchannels=\"1.5\"", 1, "nchannels=\"", false, "\"1.5\" is not an integer"},
      {1, "nchannels=\"1\"", "nchannels=\"\"", 1, "nchannels=\"", false, "\"\" is not an integer"},
      {1, "nchannels=\"1\"", "nchannels=\"-\"", 1, "nchannels=\"", false, "\"-\" is not an integer"},
      {1, "nchannels=\"1\"", "nchannels=\"99999999999999999999\"", 1, "nchannels=\"", false, "is too large"},
      {1, "nchunksperloop=\"2\" ", "", 1, "<algo", true, "lacks the required attribute nchunksperloop"},
      {1, "nchunksperloop=\"2\"", "nchunksperloop=\"0\"", 1, "nchunksperloop=\"", false, "out of range"},
      {1, "nchunksperloop=\"2\"", "nchunksperloop=\"3\"", 1, "nchunksperloop=\"", false, "multiple of ngpus=2"},
      {1, "ngpus=\"2\" ", "", 1, "<algo", true, "lacks the required attribute ngpus"},
      {1, "ngpus=\"2\"", "ngpus=\"0\"", 1, "ngpus=\"", false, "attribute ngpus: 0 is out of range"},
      {1, "ngpus=\"2\"", "ngpus=\"3\"", 1, "<algo", true, "ngpus=3 but gpu 2 has no <gpu> element"},
      {1, "coll=\"allgather\" ", "", 1, "<algo", true, "lacks the required attribute coll"},
      {1, "coll=\"allgather\"", "coll=\"allgahter\"", 1, "coll=\"", false, "\"allgahter\" is not a collective"},
      {1, "coll=\"allgather\"", "coll=\"alltoallv\"", 1, "coll=\"", false, "coll=alltoallv is an MSCCL operation weft does not import"},
      {1, "inplace=\"1\" ", "", 1, "<algo", true, "lacks the required attribute inplace"},
      {1, "inplace=\"1\"", "inplace=\"2\"", 1, "inplace=\"", false, "attribute inplace: 2 is out of range [0, 1]"},
      {1, "inplace=\"1\"", "inplace=\"0\"", 1, "outofplace=\"", false, "inplace=0 and outofplace=0"},
      {1, "outofplace=\"0\"", "outofplace=\"yes\"", 1, "outofplace=\"", false, "\"yes\" is not an integer"},
      {1, "minBytes=\"16\"", "minBytes=\"-1\"", 1, "minBytes=\"", false, "attribute minBytes: -1 is out of range"},
      {1, "maxBytes=\"4096\"", "maxBytes=\"8\"", 1, "maxBytes=\"", false, "maxBytes=8 is below minBytes=16"},
      {1, "maxBytes=\"4096\"", "maxBytes=\"big\"", 1, "maxBytes=\"", false, "\"big\" is not an integer"},
      {1, ">", ">stray", 1, "stray", true, "unexpected text inside <algo>"},
      {1, ">", " root=\"2\">", 1, "root=\"", false, "attribute root: 2 is out of range [0, 1]"},
      {1, ">", " root=\"r\">", 1, "root=\"", false, "\"r\" is not an integer"},
      {1, ">", "><op/>", 1, "<op", true, "unexpected element <op> inside <algo>; expected <gpu>"},
      // <gpu>
      {2, "id=\"0\" ", "", 2, "<gpu", true, "<gpu> lacks the required attribute id"},
      {2, "id=\"0\"", "id=\"2\"", 2, "id=\"", false, "gpu 2 does not exist: ngpus=2"},
      {2, "id=\"0\"", "id=\"-1\"", 2, "id=\"", false, "attribute id: -1 is out of range"},
      {8, "id=\"1\"", "id=\"0\"", 8, "id=\"", false, "gpu 0 is described twice (first at line 2)"},
      {2, "i_chunks=\"0\" ", "", 2, "<gpu", true, "lacks the required attribute i_chunks"},
      {2, "i_chunks=\"0\"", "i_chunks=\"-1\"", 2, "i_chunks=\"", false, "attribute i_chunks: -1 is out of range"},
      {2, "i_chunks=\"0\"", "i_chunks=\"2\"", 2, "i_chunks=\"", false, "declares 2 input chunks, but coll=allgather with nchunksperloop=2 and ngpus=2 gives each gpu 1"},
      {2, "o_chunks=\"2\" ", "", 2, "<gpu", true, "lacks the required attribute o_chunks"},
      {2, "o_chunks=\"2\"", "o_chunks=\"3\"", 2, "o_chunks=\"", false, "declares 3 output chunks"},
      {2, " s_chunks=\"0\"", "", 2, "<gpu", true, "lacks the required attribute s_chunks"},
      {2, "s_chunks=\"0\"", "s_chunks=\"x\"", 2, "s_chunks=\"", false, "\"x\" is not an integer"},
      {2, ">", ">text", 2, "text", true, "unexpected text inside <gpu>"},
      {2, ">", "><step/>", 2, "<step", true, "unexpected element <step> inside <gpu>; expected <tb>"},
      // <tb>
      {3, "id=\"0\" ", "", 3, "<tb", true, "<tb> lacks the required attribute id"},
      {3, "id=\"0\"", "id=\"1\"", 3, "id=\"", false, "gpu 0 has 1 thread blocks, so their ids must be 0 to 0, not 1"},
      {3, "send=\"1\" ", "", 3, "<tb", true, "lacks the required attribute send"},
      {3, "send=\"1\"", "send=\"2\"", 3, "send=\"", false, "attribute send: 2 is out of range [-1, 1]"},
      {3, "send=\"1\"", "send=\"0\"", 3, "send=\"", false, "sends to its own gpu"},
      {3, "recv=\"1\" ", "", 3, "<tb", true, "lacks the required attribute recv"},
      {3, "recv=\"1\"", "recv=\"-2\"", 3, "recv=\"", false, "attribute recv: -2 is out of range"},
      {3, "recv=\"1\"", "recv=\"0\"", 3, "recv=\"", false, "receives from its own gpu"},
      {3, " chan=\"0\"", "", 3, "<tb", true, "lacks the required attribute chan"},
      {3, "chan=\"0\"", "chan=\"1\"", 3, "chan=\"", false, "attribute chan: 1 is out of range [0, 0]"},
      {3, ">", ">words", 3, "words", true, "unexpected text inside <tb>"},
      {3, ">", "><tb/>", 3, "<tb/", true, "unexpected element <tb> inside <tb>; expected <step>"},
      // <step>
      {4, "s=\"0\"", "s=\"1\"", 4, " s=\"", false, "this is step 0 of its thread block, but s=1"},
      {4, " s=\"0\" ", " ", 4, "<step", true, "lacks the required attribute s"},
      {4, "type=\"s\"", "type=\"send\"", 4, "type=\"", false, "\"send\" is not a step type"},
      {4, "type=\"s\" ", "", 4, "<step", true, "lacks the required attribute type"},
      {4, "srcbuf=\"o\"", "srcbuf=\"output\"", 4, "srcbuf=\"", false, "\"output\" is not a buffer"},
      {4, "srcbuf=\"o\" ", "", 4, "<step", true, "lacks the required attribute srcbuf"},
      {4, "srcoff=\"0\"", "srcoff=\"-2\"", 4, "srcoff=\"", false, "attribute srcoff: -2 is out of range"},
      {4, "srcoff=\"0\"", "srcoff=\"-1\"", 4, "srcoff=\"", false, "the offset must not be -1"},
      {4, "srcoff=\"0\"", "srcoff=\"2\"", 4, "srcoff=\"", false, "chunks [2, 3) (offset 2, cnt 1) of the output buffer lie beyond the 2 chunks that gpu 0 declares (o_chunks)"},
      {4, "srcoff=\"0\" ", "", 4, "<step", true, "lacks the required attribute srcoff"},
      {5, "dstbuf=\"o\"", "dstbuf=\"x\"", 5, "dstbuf=\"", false, "\"x\" is not a buffer"},
      {5, "dstbuf=\"o\" ", "", 5, "<step", true, "lacks the required attribute dstbuf"},
      {5, "dstoff=\"1\"", "dstoff=\"-1\"", 5, "dstoff=\"", false, "the offset must not be -1"},
      {5, "dstbuf=\"o\"", "dstbuf=\"s\"", 5, "dstoff=\"", false, "of the scratch buffer lie beyond the 0 chunks that gpu 0 declares (s_chunks)"},
      {5, "dstbuf=\"o\"", "dstbuf=\"i\"", 5, "dstoff=\"", false, "declares (i_chunks)"},
      {5, "dstoff=\"1\" ", "", 5, "<step", true, "lacks the required attribute dstoff"},
      {4, "cnt=\"1\"", "cnt=\"0\"", 4, "cnt=\"", false, "attribute cnt: 0 is out of range [1,"},
      {5, "cnt=\"1\"", "cnt=\"2\"", 5, "dstoff=\"", false, "chunks [1, 3) (offset 1, cnt 2)"},
      {4, "cnt=\"1\" ", "", 4, "<step", true, "lacks the required attribute cnt"},
      {4, "depid=\"-1\"", "depid=\"-2\"", 4, "depid=\"", false, "attribute depid: -2 is out of range"},
      {4, "depid=\"-1\"", "depid=\"1\"", 4, "deps=\"", false, "depid=1 names a thread block to wait for, so deps must name one of its steps"},
      {4, "depid=\"-1\" deps=\"-1\"", "depid=\"1\" deps=\"0\"", 4, "depid=\"", false, "gpu 0 has no thread block 1"},
      {4, "depid=\"-1\" deps=\"-1\"", "depid=\"0\" deps=\"2\"", 4, "deps=\"", false, "thread block 0 of gpu 0 has 2 steps, so it has no step 2"},
      {4, "depid=\"-1\" ", "", 4, "<step", true, "lacks the required attribute depid"},
      {4, "deps=\"-1\"", "deps=\"0\"", 4, "deps=\"", false, "deps=0 names a step, but depid=-1 names no thread block"},
      {4, "deps=\"-1\"", "deps=\"-5\"", 4, "deps=\"", false, "attribute deps: -5 is out of range"},
      {4, "deps=\"-1\" ", "", 4, "<step", true, "lacks the required attribute deps"},
      {4, "hasdep=\"0\"", "hasdep=\"2\"", 4, "hasdep=\"", false, "attribute hasdep: 2 is out of range [0, 1]"},
      {4, "hasdep=\"0\"", "hasdep=\"no\"", 4, "hasdep=\"", false, "\"no\" is not an integer"},
      {4, "hasdep=\"0\"", "", 4, "<step", true, "lacks the required attribute hasdep"},
      {4, "/>", "><x/></step>", 4, "<x/>", true, "<step> holds no elements"},
      {4, "/>", ">t</step>", 4, ">", false, "unexpected text inside <step>"},
      {3, "send=\"1\"", "send=\"-1\"", 4, "type=\"", false, "a 's' step sends, but its thread block 0 has send=-1"},
      {3, "recv=\"1\"", "recv=\"-1\"", 5, "type=\"", false, "a 'r' step receives, but its thread block 0 has recv=-1"},
      {4, "type=\"s\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\"",
       "type=\"nop\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"0\" depid=\"-1\"", 4, "depid=\"", false,
       "a nop step must wait for something"},
      {4, "type=\"s\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\"",
       "type=\"nop\" srcbuf=\"o\" srcoff=\"-1\" dstbuf=\"o\" dstoff=\"-1\" cnt=\"0\" depid=\"0\" deps=\"1\"", 5, "depid=\"", false,
       "follows nop steps that carry dependencies, so MSCCL requires it to carry one too"},
  };
}

INSTANTIATE_TEST_SUITE_P(All, MscclProgramFaults, ::testing::ValuesIn(faults()));

TEST(MscclProgram, RootMustBeAlgo) {
  expect_error_at([&] { import_msccl("<!-- x -->\n  <algorithm ngpus=\"1\"/>", "t.xml"); }, "t.xml", 2, 3,
                  "the root element is <algorithm>; an MSCCL algorithm file starts with <algo>");
}

TEST(MscclProgram, DuplicateThreadBlocksAndConnections) {
  // Two thread blocks of gpu 0 on one connection, then a duplicated thread block id.
  std::string text = algo(test::head("allgather", 2, 2),
                          {Gpu{0, 2, 0, {Tb{1, -1, 0, {St{"s", "o", 0, "o", 0}}}, Tb{1, 1, 0, {St{"r", "o", 1, "o", 1}}}}},
                           Gpu{0, 2, 0, {Tb{0, 0, 0, {St{"s", "o", 1, "o", 1}, St{"r", "o", 0, "o", 0}}}}}});
  // line 3: tb 0 (send 1); line 6: tb 1 (send 1, recv 1)
  expect_error_at([&] { import_msccl(text, "t.xml"); }, "t.xml", 6, column_after(text, 6, "chan=\""),
                  "thread blocks 0 and 1 of gpu 0 both send to gpu 1 on channel 0");
  std::string recv_twice = edit(edit(text, 3, "send=\"1\" recv=\"-1\"", "send=\"-1\" recv=\"1\""), 4, "type=\"s\"", "type=\"r\"");
  recv_twice = edit(recv_twice, 6, "send=\"1\"", "send=\"-1\"");
  expect_error_at([&] { import_msccl(recv_twice, "t.xml"); }, "t.xml", 6, column_after(recv_twice, 6, "chan=\""),
                  "both receive from gpu 1 on channel 0");
  std::string dup = edit(text, 6, "id=\"1\"", "id=\"0\"");
  expect_error_at([&] { import_msccl(dup, "t.xml"); }, "t.xml", 6, column_after(dup, 6, "id=\""),
                  "thread block 0 of gpu 0 is described twice (first at line 3)");
}

TEST(MscclProgram, WriteThenReadGivesTheSameProgram) {
  MscclProgram p = read(base());
  std::string text = write_msccl_program(p);
  MscclProgram q = read(text);
  EXPECT_EQ(q.name, p.name);
  EXPECT_EQ(q.proto, p.proto);
  EXPECT_EQ(q.nchannels, p.nchannels);
  EXPECT_EQ(q.nchunksperloop, p.nchunksperloop);
  EXPECT_EQ(q.ngpus, p.ngpus);
  EXPECT_EQ(q.coll, p.coll);
  EXPECT_EQ(q.inplace, p.inplace);
  EXPECT_EQ(q.outofplace, p.outofplace);
  EXPECT_EQ(q.min_bytes, p.min_bytes);
  EXPECT_EQ(q.max_bytes, p.max_bytes);
  ASSERT_EQ(q.gpus.size(), p.gpus.size());
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    ASSERT_EQ(q.gpus[g].tbs.size(), p.gpus[g].tbs.size());
    for (size_t t = 0; t < p.gpus[g].tbs.size(); ++t) {
      const auto& a = p.gpus[g].tbs[t];
      const auto& b = q.gpus[g].tbs[t];
      EXPECT_EQ(std::tie(a.id, a.send, a.recv, a.chan), std::tie(b.id, b.send, b.recv, b.chan));
      ASSERT_EQ(a.steps.size(), b.steps.size());
      for (size_t s = 0; s < a.steps.size(); ++s) {
        const MscclStep& x = a.steps[s];
        const MscclStep& y = b.steps[s];
        EXPECT_EQ(std::tie(x.s, x.type, x.srcbuf, x.srcoff, x.dstbuf, x.dstoff, x.cnt, x.depid, x.deps, x.hasdep),
                  std::tie(y.s, y.type, y.srcbuf, y.srcoff, y.dstbuf, y.dstoff, y.cnt, y.depid, y.deps, y.hasdep));
      }
    }
  }
  // Names with XML's special characters survive.
  p.name = "a<b>&\"c\"";
  EXPECT_EQ(read(write_msccl_program(p)).name, p.name);
}

}  // namespace
}  // namespace weft
