// MSCCL files, the project's own (tests/data/msccl: written by weft's exporter from the
// built-ins, and hand-written) and the published ones (../shared/msccl-xml, outside the
// project; those tests skip when it is absent): each imports, its recovered algorithm has
// the expected shape, its own schedule survives export and re-import exactly, and
// load_algorithm() reads it as it reads ResCCLang.
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

struct MscclFile {
  const char* dir;       ///< "": the published folder; else a folder of tests/data/msccl
  const char* file;
  const char* topology;  ///< as many gpus as the file
  Collective collective;
  const char* protocol;
  bool in_place;         ///< the layout the file imports with by default
  int in, out, scratch;
  int rrs_scratch;       ///< scratch chunks the import adds for rrs steps
  size_t transfers;
  int steps;
  int max_tbs;
  bool needs_buffering;  ///< the file's own schedule has a cycle at FIFO depth 0
};

void PrintTo(const MscclFile& p, std::ostream* os) { *os << (*p.dir ? p.dir : "published") << "/" << p.file; }

// Numbers pinned from the files: transfers recovered, steps of the dependency order, and
// the most thread blocks a gpu uses in the file's own schedule.
constexpr auto AR = Collective::AllReduce, AG = Collective::AllGather, RS = Collective::ReduceScatter,
               A2A = Collective::AllToAll, BC = Collective::Broadcast, RE = Collective::Reduce, CU = Collective::Custom;
const MscclFile kPublished[] = {
    {"", "ap2ll.xml", "h200-1x8", AR, "LL", true, 128, 128, 112, 0, 1120, 9, 16, true},
    {"", "ap4ll.xml", "h200-1x8", AR, "LL", true, 256, 256, 224, 0, 2240, 9, 32, true},
    {"", "ndv5-ag-16m.xml", "h200-1x8", AG, "Simple", true, 4, 32, 0, 0, 224, 1, 56, false},
    {"", "ndv5-ag-1k-512k.xml", "h200-1x8", AG, "LL", true, 2, 16, 0, 0, 112, 1, 28, false},
    {"", "ndv5-ag-1m.xml", "h200-1x8", AG, "LL", true, 4, 32, 0, 0, 224, 1, 56, false},
    {"", "ndv5-ag-2m.xml", "h200-1x8", AG, "LL128", true, 4, 32, 0, 0, 224, 1, 56, false},
    {"", "ndv5-ag-4m.xml", "h200-1x8", AG, "Simple", true, 4, 32, 0, 0, 224, 1, 56, false},
    {"", "ndv5-ag-8m.xml", "h200-1x8", AG, "Simple", true, 4, 32, 0, 0, 224, 1, 56, false},
    {"", "ndv5-ar-1k-512k.xml", "h200-1x8", AR, "LL", true, 16, 16, 0, 0, 224, 8, 56, false},
    {"", "ndv5-ar-1m.xml", "h200-1x8", AR, "Simple", true, 16, 16, 0, 0, 224, 8, 56, false},
    {"", "ndv5-ar-2m.xml", "h200-1x8", AR, "Simple", true, 16, 16, 0, 0, 224, 8, 56, false},
    {"", "ndv5-ar-4m.xml", "h200-1x8", AR, "Simple", true, 16, 16, 0, 0, 224, 7, 44, false},
    {"", "r48ll.xml", "h200-1x8", AR, "LL", true, 64, 64, 0, 0, 896, 14, 32, true},
    {"", "r48ll128.xml", "h200-1x8", AR, "LL128", true, 64, 64, 0, 0, 896, 14, 32, true},
};

// The project's own files (tests/data/msccl/README.md).
const MscclFile kOwn[] = {
    {"hand", "ring_allreduce_2ch.xml", "h200-1x4", AR, "LL128", true, 8, 8, 0, 0, 48, 6, 2, true},
    {"hand", "allgather_direct.xml", "h200-1x4", AG, "LL", false, 1, 4, 0, 0, 16, 1, 4, true},
    {"hand", "reduce_scatter_scratch.xml", "h200-1x4", RS, "Simple", false, 4, 1, 1, 0, 20, 4, 4, true},
    {"hand", "alltoall_threestep.xml", "h200-1x4", A2A, "Simple", false, 4, 4, 8, 0, 32, 3, 4, true},
    {"hand", "broadcast_chain.xml", "h200-1x4", BC, "LL", true, 2, 2, 0, 0, 3, 3, 1, false},
    {"hand", "reduce_chain.xml", "h200-1x4", RE, "Simple", true, 1, 1, 2, 1, 5, 4, 1, false},
    {"hand", "custom_alltonext.xml", "h200-1x4", CU, "Simple", false, 1, 1, 0, 0, 4, 1, 1, true},
    {"hand", "same_tb_dependency.xml", "h200-1x2", AG, "Simple", false, 1, 2, 0, 0, 4, 2, 1, true},
    {"exported", "ring_allreduce_8_ll.xml", "h200-1x8", AR, "LL", true, 152, 152, 0, 0, 2128, 14, 38, false},
    {"exported", "ring_allgather_4.xml", "h200-1x4", AG, "Simple", true, 19, 76, 0, 0, 228, 3, 38, false},
    {"exported", "ring_reducescatter_4_ll128.xml", "h200-1x4", RS, "LL128", true, 76, 19, 0, 0, 228, 3, 38, false},
    {"exported", "alltoall_direct_4.xml", "h200-1x4", A2A, "Simple", true, 224, 224, 168, 0, 174, 2, 50, false},
    {"exported", "chain_broadcast_4.xml", "h200-1x4", BC, "Simple", true, 76, 76, 0, 0, 228, 3, 19, false},
    {"exported", "allpairs_allreduce_4_ll.xml", "h200-1x4", AR, "LL", true, 140, 140, 140, 0, 228, 5, 47, false},
    {"exported", "allpairs_allreduce_2_oop.xml", "h200-1x2", AR, "Simple", false, 32, 32, 32, 0, 96, 3, 40, false},
    {"exported", "ring_allgather_2_oop.xml", "h200-1x2", AG, "Simple", false, 16, 32, 0, 0, 48, 1, 40, false},
};

int gpus_of(const char* topology) {
  Topology t = topology_preset(topology);
  return t.nodes * t.gpus_per_node;
}

class MscclFiles : public ::testing::TestWithParam<MscclFile> {};

// Declares `std::string path`, the parameter's file; a published file skips when the
// published folder is absent.
#define MSCCL_FILE_OR_SKIP(path)                                                                     \
  std::string path;                                                                                   \
  if (*GetParam().dir) {                                                                              \
    path = test::own_msccl_dir() + "/" + GetParam().dir + "/" + GetParam().file;                      \
  } else {                                                                                            \
    WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(published_dir);                                                  \
    path = published_dir + "/" + GetParam().file;                                                     \
  }

TEST_P(MscclFiles, ImportWithTheExpectedShape) {
  MSCCL_FILE_OR_SKIP(path);
  const MscclFile& want = GetParam();
  MscclImport imp = import_msccl_file(path);
  const Algorithm& a = imp.algorithm;
  EXPECT_EQ(a.collective, want.collective);
  EXPECT_EQ(a.ranks, gpus_of(want.topology));
  EXPECT_EQ(a.protocol, want.protocol);
  EXPECT_EQ(a.in_place, want.in_place);
  EXPECT_EQ(a.input_chunks, want.in);
  EXPECT_EQ(a.output_chunks, want.out);
  EXPECT_EQ(a.scratch_chunks, want.scratch);
  EXPECT_EQ(imp.rrs_scratch_chunks, want.rrs_scratch);  // the published files' rrs all reduce into a dead chunk
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
TEST_P(MscclFiles, Verify) {
  MSCCL_FILE_OR_SKIP(path);
  VerifyResult v = verify(import_msccl_file(path).algorithm);
  EXPECT_TRUE(v.ok) << GetParam().file << ": " << (v.errors.empty() ? "" : v.errors[0]);
  EXPECT_EQ(v.error_count, 0u);
}

// The file's own schedule cannot deadlock on the runtime's FIFOs (4 messages per connection),
// which its rings and all-pairs exchanges rely on; under rendezvous (depth 0) those files have
// a cycle.
TEST_P(MscclFiles, DeadlockFreeWithTheRuntimesFifoDepth) {
  MSCCL_FILE_OR_SKIP(path);
  const Plan plan = import_msccl_file(path).as_given;
  DeadlockReport buffered = check_deadlock(plan, kDefaultFifoDepth);
  EXPECT_TRUE(buffered.ok) << GetParam().file << ": " << buffered.message;
  EXPECT_EQ(check_deadlock(plan, 0).ok, !GetParam().needs_buffering) << GetParam().file;
}

// The file's own schedule runs on the simulator (H200s), with its invariant checks on,
// at the smallest size the file is meant for.
TEST_P(MscclFiles, SimulateTheirOwnSchedule) {
  MSCCL_FILE_OR_SKIP(path);
  MscclImport imp = import_msccl_file(path);
  sim::SimOptions options;
  options.bytes = std::max<uint64_t>(static_cast<uint64_t>(imp.min_bytes), uint64_t{64} << 10);
  options.check = true;
  sim::SimReport r = sim::simulate(imp.as_given, topology_preset(GetParam().topology), options);
  EXPECT_EQ(r.ranks, gpus_of(GetParam().topology));
  EXPECT_EQ(r.scheduler, "as-given");
  EXPECT_EQ(r.execution, "algorithm");
  EXPECT_EQ(r.tbs_per_rank_max, GetParam().max_tbs);
  EXPECT_GT(r.time_us, 0);
  EXPECT_GT(r.invocations, 0);
}

// weft schedules the recovered algorithm afresh: the plan replays to a correct algorithm,
// runs on the simulator, and exported to MSCCL XML it is a correct MSCCL file again.
TEST_P(MscclFiles, WeftsScheduleCompilesVerifiesSimulatesAndExports) {
  MSCCL_FILE_OR_SKIP(path);
  MscclImport imp = import_msccl_file(path);
  Topology topo = topology_preset(GetParam().topology);
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
// the same transfers at the same steps, up to buffer names in place. Where the compiler
// staged data through scratch chunks of its own, or MSCCL's one peer per direction made the
// export split an rrs (which stores nothing) through one, the algorithm gains those copies;
// it must still verify.
TEST_P(MscclFiles, CompiledPlanRoundTrips) {
  MSCCL_FILE_OR_SKIP(path);
  MscclImport imp = import_msccl_file(path);
  CompileOptions options;
  options.instances = 1;
  options.aggregate = false;
  options.in_place = imp.algorithm.in_place;
  options.protocol = imp.algorithm.protocol;
  Plan plan = compile(imp.algorithm, topology_preset(GetParam().topology), options).plan;
  MscclProgram m = plan_to_msccl(plan);
  // Scratch chunks of weft's own: the compiler's (a reduction chain staged through scratch)
  // or the export's (an rrs split through scratch).
  bool split_rrs = plan.scratch_chunks > imp.algorithm.scratch_chunks;
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

TEST_P(MscclFiles, ExportOfTheirOwnScheduleRoundTrips) {
  MSCCL_FILE_OR_SKIP(path);
  MscclImport first = import_msccl_file(path);
  std::string text = export_msccl(first.as_given, {"", first.min_bytes, first.max_bytes});
  MscclImport second = import_msccl(text, "exported.xml");
  test::expect_same_algorithm(first.algorithm, second.algorithm);
  EXPECT_TRUE(first.as_given == second.as_given) << "the file's own schedule changed on the way";
  EXPECT_EQ(second.min_bytes, first.min_bytes);
  EXPECT_EQ(second.max_bytes, first.max_bytes);
  EXPECT_EQ(second.nchunksperloop, first.nchunksperloop);
}

TEST_P(MscclFiles, LoadAlgorithmReadsThem) {
  MSCCL_FILE_OR_SKIP(path);
  Algorithm a = load_algorithm(path);
  test::expect_same_algorithm(a, import_msccl_file(path).algorithm);
  EXPECT_EQ(load_algorithm(path, {{"InPlace", GetParam().in_place ? "1" : "0"}}).in_place, GetParam().in_place);
}

INSTANTIATE_TEST_SUITE_P(Published, MscclFiles, ::testing::ValuesIn(kPublished));
INSTANTIATE_TEST_SUITE_P(Own, MscclFiles, ::testing::ValuesIn(kOwn));

// Every .xml file of `dir` has a row in `rows` (with `sub` as its dir), and every row a file.
template <size_t N>
void expect_covered(const std::string& dir, const char* sub, const MscclFile (&rows)[N]) {
  size_t xml = 0, listed = 0;
  for (const MscclFile& p : rows) listed += std::string(p.dir) == sub;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".xml") continue;
    ++xml;
    bool known = false;
    for (const MscclFile& p : rows) known = known || (std::string(p.dir) == sub && e.path().filename() == p.file);
    EXPECT_TRUE(known) << e.path() << " has no expectations";
  }
  EXPECT_EQ(xml, listed) << dir;
}

TEST(PublishedMscclFiles, EveryFileInTheFolderIsCovered) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
  expect_covered(dir, "", kPublished);
}

TEST(OwnMscclFiles, EveryFileInTheFoldersIsCovered) {
  for (const char* sub : {"hand", "exported"}) expect_covered(test::own_msccl_dir() + "/" + sub, sub, kOwn);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Damaged copies of a published file fail, each with the reason pinned.
TEST(PublishedMscclFiles, DamagedCopiesFailAndSayWhy) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
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

// load_algorithm()'s parameters on an 8-gpu file that runs in place only.
void expect_load_parameters(const std::string& path) {
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

TEST(PublishedMscclFiles, LoadAlgorithmParameters) {
  WEFT_PUBLISHED_MSCCL_DIR_OR_SKIP(dir);
  expect_load_parameters(dir + "/r48ll.xml");
}

TEST(OwnMscclFiles, LoadAlgorithmParameters) {
  expect_load_parameters(test::own_msccl_dir() + "/exported/ring_allreduce_8_ll.xml");
}

}  // namespace
}  // namespace weft
