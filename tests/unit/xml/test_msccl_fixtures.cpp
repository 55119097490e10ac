// The project's own MSCCL files (tests/data/msccl, see its README). The files in exported/
// are what weft's exporter writes for built-in algorithms: this test compiles and exports
// each again and compares, so they cannot drift from the exporter. After a deliberate change
// to the compiler or the exporter, regenerate them with
//   WEFT_REGEN_MSCCL_FIXTURES=1 build/bin/test_xml --gtest_filter='OwnMscclFixtures.*'
// and review the diff. The hand-written files in hand/ are checked by test_msccl_files.cpp
// and test_msccl_cli.cpp; the importer's changes from issue 19 are pinned here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "compile/compiler.hpp"
#include "compile/verify.hpp"
#include "ir/plan_json.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_export.hpp"
#include "lang/msccl_import.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

struct Exported {
  const char* file;      ///< in tests/data/msccl/exported
  const char* builtin;   ///< algorithm name (algorithms/*.rccl)
  const char* topology;  ///< its gpus are the ranks
  const char* protocol;
  bool in_place = true;  ///< false: compiled for distinct input and output buffers
};

const Exported kExported[] = {
    {"ring_allreduce_8_ll.xml", "ring_allreduce", "h200-1x8", "LL"},
    {"ring_allgather_4.xml", "ring_allgather", "h200-1x4", "Simple"},
    {"ring_reducescatter_4_ll128.xml", "ring_reducescatter", "h200-1x4", "LL128"},
    {"alltoall_direct_4.xml", "alltoall_direct", "h200-1x4", "Simple"},
    {"chain_broadcast_4.xml", "chain_broadcast", "h200-1x4", "Simple"},
    {"allpairs_allreduce_4_ll.xml", "allpairs_allreduce", "h200-1x4", "LL"},
    // 2 GPUs: the as-given side of a 2-GPU round (docs/scheduling.md, "On the GPU").
    // Out of place, as `weft bench` calls (nccl-tests' convention).
    {"allpairs_allreduce_2_oop.xml", "allpairs_allreduce", "h200-1x2", "Simple", false},
    {"ring_allgather_2_oop.xml", "ring_allgather", "h200-1x2", "Simple", false},
};

/// The built-in compiled for the topology (hpds, in place unless the entry says not, defaults
/// otherwise) and exported.
std::string export_builtin(const Exported& e) {
  Topology topo = topology_preset(e.topology);
  const int32_t ranks = topo.nodes * topo.gpus_per_node;
  Algorithm a = load_algorithm(e.builtin, {{"nRanks", std::to_string(ranks)}});
  CompileOptions o;
  o.protocol = e.protocol;
  o.in_place = e.in_place;
  o.keep_graph = false;
  return export_msccl(compile(a, topo, o).plan);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int first_different_line(const std::string& a, const std::string& b) {
  int line = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] != b[i]) return line;
    if (a[i] == '\n') ++line;
  }
  return line;
}

TEST(OwnMscclFixtures, ExportedFilesAreWhatTheExporterWrites) {
  const char* regen = std::getenv("WEFT_REGEN_MSCCL_FIXTURES");
  for (const Exported& e : kExported) {
    const std::string path = test::own_msccl_dir() + "/exported/" + e.file;
    const std::string text = export_builtin(e);
    if (regen && std::string(regen) == "1") {
      std::ofstream(path, std::ios::binary) << text;
      std::printf("wrote %s\n", path.c_str());
      continue;
    }
    const std::string stored = read_text(path);
    EXPECT_TRUE(stored == text) << path << " differs from what the exporter writes now (first at line "
                                << first_different_line(stored, text)
                                << "); if the change is intended, regenerate with WEFT_REGEN_MSCCL_FIXTURES=1 "
                                   "(tests/data/msccl/README.md)";
  }
}

MscclImport import_hand(const std::string& file) {
  return import_msccl_file(test::own_msccl_dir() + "/hand/" + file);
}

// msccl-tools writes coll="reduce_scatter" (older releases) or "reducescatter"; both import.
TEST(OwnMscclFixtures, ReduceScatterEitherSpelling) {
  MscclImport imp = import_hand("reduce_scatter_scratch.xml");
  EXPECT_EQ(imp.algorithm.collective, Collective::ReduceScatter);
  EXPECT_EQ(imp.algorithm.input_chunks, 4);
  EXPECT_EQ(imp.algorithm.output_chunks, 1);
  EXPECT_EQ(imp.min_bytes, 4096);
  EXPECT_EQ(imp.max_bytes, INT64_MAX);  // maxBytes="0": no upper bound, as MSCCL's scheduler reads it
  VerifyResult v = verify(imp.algorithm);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
}

// coll="custom": weft's Custom collective with no postcondition of its own; the verifier
// checks races and double counts only.
TEST(OwnMscclFixtures, CustomCollective) {
  MscclImport imp = import_hand("custom_alltonext.xml");
  EXPECT_EQ(imp.algorithm.collective, Collective::Custom);
  EXPECT_TRUE(imp.algorithm.custom_postcondition.empty());
  EXPECT_EQ(imp.algorithm.input_chunks, 1);
  EXPECT_EQ(imp.algorithm.output_chunks, 1);
  EXPECT_TRUE(verify(imp.algorithm).ok);
  // Exported again, it is coll="custom" and the same algorithm.
  MscclImport back = import_msccl(export_msccl(imp.as_given), "back.xml");
  EXPECT_EQ(back.algorithm.collective, Collective::Custom);
  test::expect_same_algorithm(imp.algorithm, back.algorithm);
}

// A wait for an earlier step of the same thread block is program order: the as-given plan
// drops it, so the plan is valid (weft compile -s as-given) and the simulator runs it.
TEST(OwnMscclFixtures, SameThreadBlockDependencyIsDropped) {
  MscclImport imp = import_hand("same_tb_dependency.xml");
  for (const RankPlan& rp : imp.as_given.ranks) {
    ASSERT_EQ(rp.tbs.size(), 1u);
    ASSERT_EQ(rp.tbs[0].slots.size(), 3u);
    for (const Slot& s : rp.tbs[0].slots) EXPECT_TRUE(s.deps.empty());
  }
  EXPECT_NO_THROW(validate_plan(imp.as_given));
  // Recovered as the file orders it: the copy (step 0) before the send of what it copied.
  EXPECT_EQ(imp.algorithm.num_steps(), 2);
}

// Every range of the as-given plan lies within its buffer: the side a step does not use
// names the side it does (a send's dst is its src, a receive's src its dst).
TEST(OwnMscclFixtures, UnusedSidesNameTheUsedOnes) {
  MscclImport imp = import_hand("alltoall_threestep.xml");
  EXPECT_NO_THROW(validate_plan(imp.as_given));
  for (const RankPlan& rp : imp.as_given.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots) {
        if (s.primitive == Primitive::Send || s.primitive == Primitive::Recv) {
          EXPECT_EQ(s.dst, s.src);
        }
      }
  // A send of more chunks than the output buffer holds (ReduceScatter: 4 in, 2 out).
  using test::Gpu, test::St, test::Tb;
  std::string text = test::algo(test::head("reducescatter", 2, 4, 0),
                                {Gpu{4, 2, 0, {Tb{1, -1, 0, {St{"s", "i", 0, "o", -1, 4}}}}},
                                 Gpu{4, 2, 4, {Tb{-1, 0, 0, {St{"r", "i", -1, "s", 0, 4}}}}}});
  MscclImport wide = import_msccl(text, "wide.xml");
  EXPECT_NO_THROW(validate_plan(wide.as_given));
  EXPECT_EQ(wide.as_given.ranks[0].tbs[0].slots[0].dst, (BufferRange{Buffer::Input, 0}));
  EXPECT_EQ(wide.as_given.ranks[1].tbs[0].slots[0].src, (BufferRange{Buffer::Scratch, 0}));
}

// Damaged copies of a hand-written file fail, each with the file, line and reason.
TEST(OwnMscclFixtures, DamagedCopiesFailAndSayWhy) {
  const std::string text = read_text(test::own_msccl_dir() + "/hand/reduce_scatter_scratch.xml");
  const std::string f = "rs.xml";
  // Line 11, gpu 0's rrc from gpu 2: a plain receive instead overwrites what the copy (line 18)
  // and the rrc of line 7 put into output chunk 0; the verifier names the last writer.
  VerifyResult v = verify(import_msccl(test::edit(text, 11, "type=\"rrc\"", "type=\"r\""), f).algorithm);
  ASSERT_FALSE(v.ok);
  EXPECT_EQ(v.errors[0],
            "at the end, rank 0's output chunk 0 holds 2 contributions, 2 of the 4 expected; missing rank 0's input chunk 0 "
            "and rank 1's input chunk 0 (last written at step 3 by transfer 16 at rs.xml:20:7)");
  // Line 20, the re after a nop: without a wait of its own MSCCL would attach none.
  std::string no_wait = test::edit(text, 20, "depid=\"2\" deps=\"0\"", "depid=\"-1\" deps=\"-1\"");
  test::expect_error_at([&] { import_msccl(no_wait, f); }, f, 20, test::column_after(no_wait, 20, "depid=\""),
                        "this step follows nop steps that carry dependencies, so MSCCL requires it to carry one too");
  // Line 18, the copy that line 7 waits for, no longer signals: the wait would never end.
  std::string silent = test::edit(text, 18, "hasdep=\"1\"", "hasdep=\"0\"");
  test::expect_error_at([&] { import_msccl(silent, f); }, f, 7, test::column_after(silent, 7, "deps=\""),
                        "this step waits for step 0 of thread block 3, but neither that step nor a later one of that thread "
                        "block signals");
}

}  // namespace
}  // namespace weft
