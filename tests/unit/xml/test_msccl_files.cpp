// The published MSCCL algorithms (../shared/msccl-xml, see its README): each imports, its
// recovered algorithm has the expected shape, its own schedule survives export and
// re-import exactly, and load_algorithm() reads it as it reads ResCCLang.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compile/compiler.hpp"
#include "compile/deadlock.hpp"
#include "compile/replay.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "lang/load.hpp"
#include "lang/msccl_export.hpp"
#include "lang/msccl_program.hpp"
#include "lang/msccl_import.hpp"
#include "sim/simulator.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

struct Published {
  const char* file;
  Collective collective;
  const char* protocol;
  int in, out, scratch;
  size_t transfers;
  int steps;
  int max_tbs;
};

void PrintTo(const Published& p, std::ostream* os) { *os << p.file; }

// Numbers pinned from the files: transfers recovered, steps of the dependency order, and
// the most thread blocks a gpu uses in the file's own schedule.
const Published kPublished[] = {
    {"ap2ll.xml", Collective::AllReduce, "LL", 128, 128, 112, 1120, 9, 16},
    {"ap4ll.xml", Collective::AllReduce, "LL", 256, 256, 224, 2240, 9, 32},
    {"ndv5-ag-16m.xml", Collective::AllGather, "Simple", 4, 32, 0, 224, 1, 56},
    {"ndv5-ag-1k-512k.xml", Collective::AllGather, "LL", 2, 16, 0, 112, 1, 28},
    {"ndv5-ag-1m.xml", Collective::AllGather, "LL", 4, 32, 0, 224, 1, 56},
    {"ndv5-ag-2m.xml", Collective::AllGather, "LL128", 4, 32, 0, 224, 1, 56},
    {"ndv5-ag-4m.xml", Collective::AllGather, "Simple", 4, 32, 0, 224, 1, 56},
    {"ndv5-ag-8m.xml", Collective::AllGather, "Simple", 4, 32, 0, 224, 1, 56},
    {"ndv5-ar-1k-512k.xml", Collective::AllReduce, "LL", 16, 16, 0, 224, 8, 56},
    {"ndv5-ar-1m.xml", Collective::AllReduce, "Simple", 16, 16, 0, 224, 8, 56},
    {"ndv5-ar-2m.xml", Collective::AllReduce, "Simple", 16, 16, 0, 224, 8, 56},
    {"ndv5-ar-4m.xml", Collective::AllReduce, "Simple", 16, 16, 0, 224, 7, 44},
    {"r48ll.xml", Collective::AllReduce, "LL", 64, 64, 0, 896, 14, 32},
    {"r48ll128.xml", Collective::AllReduce, "LL128", 64, 64, 0, 896, 14, 32},
};

class PublishedMscclFiles : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedMscclFiles, ImportWithTheExpectedShape) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  const Published& want = GetParam();
  std::string path = dir + "/" + want.file;
  MscclImport imp = import_msccl_file(path);
  const Algorithm& a = imp.algorithm;
  EXPECT_EQ(a.collective, want.collective);
  EXPECT_EQ(a.ranks, 8);
  EXPECT_EQ(a.protocol, want.protocol);
  EXPECT_TRUE(a.in_place);
  EXPECT_EQ(a.input_chunks, want.in);
  EXPECT_EQ(a.output_chunks, want.out);
  EXPECT_EQ(a.scratch_chunks, want.scratch);
  EXPECT_EQ(imp.rrs_scratch_chunks, 0);  // every rrs in these files reduces into a dead chunk
  EXPECT_EQ(a.transfers.size(), want.transfers);
  EXPECT_EQ(a.num_steps(), want.steps);
  EXPECT_EQ(imp.as_given.max_tbs_per_rank(), want.max_tbs);
  ASSERT_EQ(a.transfer_locations.size(), a.transfers.size());
  for (const SourceLocation& loc : a.transfer_locations) {
    EXPECT_EQ(a.file_of(loc), path);
    EXPECT_GT(loc.line, 0);
  }
  EXPECT_NO_THROW(check_shape(a));
  // Every transfer is carried by the slots at both of its ends.
  std::vector<int> ends(a.transfers.size(), 0);
  for (const RankPlan& rp : imp.as_given.ranks)
    for (const ThreadBlock& tb : rp.tbs)
      for (const Slot& s : tb.slots)
        for (int32_t t : s.tasks) ++ends[static_cast<size_t>(t)];
  for (size_t t = 0; t < ends.size(); ++t)
    EXPECT_EQ(ends[t], a.transfers[t].src_rank == a.transfers[t].dst_rank ? 1 : 2) << "transfer " << t;
}

// Every published file verifies: no race, no empty read, no double count, and each rank
// ends with the collective's result. (Were one to fail, its reason would be pinned here.)
TEST_P(PublishedMscclFiles, Verify) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  VerifyResult v = verify(import_msccl_file(dir + "/" + GetParam().file).algorithm);
  EXPECT_TRUE(v.ok) << GetParam().file << ": " << (v.errors.empty() ? "" : v.errors[0]);
  EXPECT_EQ(v.error_count, 0u);
}

// The file's own schedule cannot deadlock on the runtime's FIFOs (4 messages per connection),
// which its rings and all-pairs exchanges rely on; under rendezvous (depth 0) those files have
// a cycle.
TEST_P(PublishedMscclFiles, DeadlockFreeWithTheRuntimesFifoDepth) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  const Plan plan = import_msccl_file(dir + "/" + GetParam().file).as_given;
  DeadlockReport buffered = check_deadlock(plan, kDefaultFifoDepth);
  EXPECT_TRUE(buffered.ok) << GetParam().file << ": " << buffered.message;
  const std::string f = GetParam().file;
  const bool needs_buffering = f == "ap2ll.xml" || f == "ap4ll.xml" || f == "r48ll.xml" || f == "r48ll128.xml";
  EXPECT_EQ(check_deadlock(plan, 0).ok, !needs_buffering) << f;
}

// The file's own schedule runs on the simulator (8 x H200), with its invariant checks on,
// at the smallest size the file is meant for.
TEST_P(PublishedMscclFiles, SimulateTheirOwnSchedule) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  MscclImport imp = import_msccl_file(dir + "/" + GetParam().file);
  sim::SimOptions options;
  options.bytes = std::max<uint64_t>(static_cast<uint64_t>(imp.min_bytes), uint64_t{64} << 10);
  options.check = true;
  sim::SimReport r = sim::simulate(imp.as_given, topology_preset("h200-1x8"), options);
  EXPECT_EQ(r.ranks, 8);
  EXPECT_EQ(r.scheduler, "as-given");
  EXPECT_EQ(r.execution, "algorithm");
  EXPECT_EQ(r.tbs_per_rank_max, GetParam().max_tbs);
  EXPECT_GT(r.time_us, 0);
  EXPECT_GT(r.invocations, 0);
}

// weft schedules the recovered algorithm afresh: the plan replays to a correct algorithm,
// runs on the simulator, and exported to MSCCL XML it is a correct MSCCL file again.
TEST_P(PublishedMscclFiles, WeftsScheduleCompilesVerifiesSimulatesAndExports) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  MscclImport imp = import_msccl_file(dir + "/" + GetParam().file);
  Topology topo = topology_preset("h200-1x8");
  CompileOptions options;
  options.protocol = imp.algorithm.protocol;
  CompileResult r = compile(imp.algorithm, topo, options);
  EXPECT_EQ(r.plan.scheduler, "hpds");
  for (int32_t lane = 0; lane < plan_lanes(r.plan); ++lane) {
    VerifyResult v = verify(replay_plan(r.plan, lane));
    EXPECT_TRUE(v.ok) << "lane " << lane << ": " << (v.errors.empty() ? "" : v.errors[0]);
  }
  sim::SimOptions so;
  so.bytes = std::max<uint64_t>(static_cast<uint64_t>(imp.min_bytes), uint64_t{1} << 20);
  EXPECT_GT(sim::simulate(r.plan, topo, so).time_us, 0);
  MscclImport back = import_msccl(export_msccl(r.plan), "weft.xml");
  VerifyResult v = verify(back.algorithm);
  EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
}

// The same algorithm as every chunk's canonical slot (in place, the file's i and a plan's o
// name one chunk), transfers sorted.
std::vector<Transfer> canonical_transfers(const Algorithm& a) {
  std::vector<Transfer> out = a.transfers;
  for (Transfer& t : out) {
    SlotRef s = canonical_slot(a, t.src()), d = canonical_slot(a, t.dst());
    t.src_buffer = s.buffer;
    t.src_index = s.index;
    t.dst_buffer = d.buffer;
    t.dst_index = d.index;
  }
  auto key = [](const Transfer& t) {
    return std::tie(t.step, t.src_rank, t.src_buffer, t.src_index, t.dst_rank, t.dst_buffer, t.dst_index, t.count, t.op);
  };
  std::sort(out.begin(), out.end(), [&](const Transfer& x, const Transfer& y) { return key(x) < key(y); });
  return out;
}

// XML -> Algorithm -> weft plan (one instance per link, no aggregation) -> XML -> Algorithm:
// the same transfers at the same steps, up to buffer names in place. Where MSCCL's one peer
// per direction made the export split an rrs (which stores nothing) through a scratch chunk,
// the algorithm gains that copy; it must still verify.
TEST_P(PublishedMscclFiles, CompiledPlanRoundTrips) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  MscclImport imp = import_msccl_file(dir + "/" + GetParam().file);
  CompileOptions options;
  options.instances = 1;
  options.aggregate = false;
  options.protocol = imp.algorithm.protocol;
  Plan plan = compile(imp.algorithm, topology_preset("h200-1x8"), options).plan;
  MscclProgram m = plan_to_msccl(plan);
  bool split_rrs = false;
  for (const MscclGpu& g : m.gpus) split_rrs = split_rrs || g.s_chunks > plan.scratch_chunks;
  MscclImport back = import_msccl(write_msccl_program(m), "weft.xml");
  EXPECT_EQ(back.algorithm.name, imp.algorithm.name);
  EXPECT_EQ(back.algorithm.collective, imp.algorithm.collective);
  EXPECT_EQ(back.algorithm.input_chunks, imp.algorithm.input_chunks);
  EXPECT_EQ(back.algorithm.output_chunks, imp.algorithm.output_chunks);
  EXPECT_EQ(back.algorithm.protocol, imp.algorithm.protocol);
  if (!split_rrs) {
    EXPECT_EQ(back.algorithm.scratch_chunks, imp.algorithm.scratch_chunks);
    EXPECT_EQ(canonical_transfers(back.algorithm), canonical_transfers(imp.algorithm));
  } else {
    EXPECT_GT(back.algorithm.transfers.size(), imp.algorithm.transfers.size());
    VerifyResult v = verify(back.algorithm);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
  }
}

TEST_P(PublishedMscclFiles, ExportOfTheirOwnScheduleRoundTrips) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  MscclImport first = import_msccl_file(dir + "/" + GetParam().file);
  std::string text = export_msccl(first.as_given, {"", first.min_bytes, first.max_bytes});
  MscclImport second = import_msccl(text, "exported.xml");
  test::expect_same_algorithm(first.algorithm, second.algorithm);
  EXPECT_TRUE(first.as_given == second.as_given) << "the file's own schedule changed on the way";
  EXPECT_EQ(second.min_bytes, first.min_bytes);
  EXPECT_EQ(second.max_bytes, first.max_bytes);
  EXPECT_EQ(second.nchunksperloop, first.nchunksperloop);
}

TEST_P(PublishedMscclFiles, LoadAlgorithmReadsThem) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  std::string path = dir + "/" + GetParam().file;
  Algorithm a = load_algorithm(path);
  test::expect_same_algorithm(a, import_msccl_file(path).algorithm);
  EXPECT_TRUE(load_algorithm(path, {{"InPlace", "1"}}).in_place);
}

INSTANTIATE_TEST_SUITE_P(All, PublishedMscclFiles, ::testing::ValuesIn(kPublished));

TEST(PublishedMscclFiles, EveryFileInTheFolderIsCovered) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  size_t xml = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".xml") continue;
    ++xml;
    bool known = false;
    for (const Published& p : kPublished) known = known || e.path().filename() == p.file;
    EXPECT_TRUE(known) << e.path() << " has no expectations in kPublished";
  }
  EXPECT_EQ(xml, std::size(kPublished));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Damaged copies of a published file fail, each with the reason pinned.
TEST(PublishedMscclFiles, DamagedCopiesFailAndSayWhy) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  std::string text = read_text(dir + "/ndv5-ar-1m.xml");
  // Line 4, gpu 0's first step: reduces chunk 1 coming from gpu 1 after thread block 4.
  const std::string step4 =
      "<step s=\"0\" type=\"rrc\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"4\" deps=\"0\" hasdep=\"1\"/>";
  ASSERT_NE(text.find(step4), std::string::npos);
  // A receive instead of the reduction: gpu 0's chunk 1 loses every other contribution,
  // and the verifier names the step that last wrote it.
  std::string copy = test::edit(text, 4, "type=\"rrc\"", "type=\"r\"");
  VerifyResult v = verify(import_msccl(copy, "ndv5-ar-1m.xml").algorithm);
  ASSERT_FALSE(v.ok);
  EXPECT_EQ(v.error_count, 8u);  // chunk 1 is wrong on all 8 ranks
  EXPECT_EQ(v.errors[0],
            "at the end, rank 0's output chunk 1 holds 1 contribution, 1 of the 8 expected; missing rank 0's input chunk 1, "
            "rank 2's input chunk 1, rank 3's input chunk 1, rank 4's input chunk 1 and 3 more (last written at step 6 by "
            "transfer 111 at ndv5-ar-1m.xml:4:7)");
  // Without its dependency the step races with thread block 4's reduction into the same chunk.
  std::string race = test::edit(text, 4, "depid=\"4\" deps=\"0\"", "depid=\"-1\" deps=\"-1\"");
  test::expect_error_at([&] { import_msccl(race, "ndv5-ar-1m.xml"); }, "ndv5-ar-1m.xml", 76, 7,
                        "<step>: this step writes input chunk 1 of gpu 0, which gpu 0, thread block 0, step 0 (line 4) writes, "
                        "and no thread-block order, dependency or connection orders the two: a race");
}

TEST(PublishedMscclFiles, LoadAlgorithmParameters) {
  std::string dir = test::msccl_xml_dir();
  ASSERT_FALSE(dir.empty());
  std::string path = dir + "/r48ll.xml";
  try {
    load_algorithm(path, {{"InPlace", "0"}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Parse);
    EXPECT_NE(std::string(e.what()).find("an out-of-place import was asked for, but the file runs in place only"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(load_algorithm(path, {{"nRanks", "8"}, {"GPUPerNode", "8"}}).gpus_per_node, 8);
  try {
    load_algorithm(path, {{"nRanks", "16"}});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the file is for ngpus=8 gpus, not the 16 asked for"), std::string::npos) << e.what();
  }
  for (auto [k, v, words] : {std::tuple{"nChunks", "8",
                                        "MSCCL XML files take no parameter 'nChunks' (only InPlace=0|1, and nRanks, GPUPerNode, "
                                        "NICPerNode as a topology gives them)"},
                             std::tuple{"InPlace", "yes", "InPlace must be 0 or 1, not 'yes'"}}) {
    try {
      load_algorithm(path, {{k, v}});
      ADD_FAILURE() << "no error for " << k;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_EQ(std::string(e.what()), path + ": " + words);
    }
  }
}

}  // namespace
}  // namespace weft
