// The chunk DSL: references, copy and reduce, steps by dependency, single-writer
// semantics and its errors, and the algorithms written in it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "compile/compiler.hpp"
#include "compile/verify.hpp"
#include "ir/topology_io.hpp"
#include "lang/chunk_dsl.hpp"
#include "lang/chunk_dsl_algorithms.hpp"
#include "lang/load.hpp"
#include "util/error.hpp"

namespace weft {
namespace {

using dsl::ChunkRef;
using dsl::Program;
constexpr Buffer I = Buffer::Input, O = Buffer::Output, S = Buffer::Scratch;

Transfer T(int sr, Buffer sb, int si, int dr, Buffer db, int di, TransferOp op, int step, int count = 1) {
  return Transfer{sr, sb, si, dr, db, di, count, op, step};
}

template <class F>
std::string error_of(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

std::string here(int line) { return std::string(__FILE__) + ":" + std::to_string(line) + ":"; }

TEST(ChunkDsl, CopyAndReduceTraceTransfersWithStepsAndPlaces) {
  Program p({.name = "t", .collective = Collective::AllReduce, .ranks = 2, .input_chunks = 2, .in_place = false});
  ChunkRef a = p.chunk(0, I, 0);
  ChunkRef s = a.copy(1, S, 0);  const int copy_line = __LINE__;
  ChunkRef sum = p.chunk(1, I, 0).copy(1, O, 0).reduce(s);
  sum.copy(0, O, 0);
  p.chunk(1, I, 1).copy(0, O, 1);
  Algorithm alg = p.algorithm();
  EXPECT_EQ(alg.name, "t");
  EXPECT_EQ(alg.collective, Collective::AllReduce);
  EXPECT_EQ(alg.ranks, 2);
  EXPECT_EQ(alg.input_chunks, 2);
  EXPECT_EQ(alg.output_chunks, 2);
  EXPECT_EQ(alg.scratch_chunks, 1);  // as many as the program touched
  EXPECT_FALSE(alg.in_place);
  EXPECT_EQ(alg.source_file, __FILE__);
  EXPECT_EQ(alg.transfers, (std::vector<Transfer>{T(0, I, 0, 1, S, 0, TransferOp::Copy, 0), T(1, I, 0, 1, O, 0, TransferOp::Copy, 0),
                                                  T(1, S, 0, 1, O, 0, TransferOp::Reduce, 1), T(1, O, 0, 0, O, 0, TransferOp::Copy, 2),
                                                  T(1, I, 1, 0, O, 1, TransferOp::Copy, 0)}));
  ASSERT_EQ(alg.transfer_locations.size(), 5u);
  EXPECT_EQ(alg.file_of(alg.transfer_locations[0]), __FILE__);
  EXPECT_EQ(alg.transfer_locations[0].line, copy_line);
  EXPECT_GT(alg.transfer_locations[0].column, 0);
  EXPECT_EQ(s.rank(), 1);
  EXPECT_EQ(s.buffer(), S);
  EXPECT_EQ(s.index(), 0);
  EXPECT_EQ(s.count(), 1);
}

TEST(ChunkDsl, StepsFollowReadsAndWrites) {
  // One rank, out of place: a copy reads input 0; the write after that read (WAR), the
  // write after a write (WAW) and the read after a write (RAW) each wait a step.
  Program p({.name = "t", .collective = Collective::Custom, .ranks = 1, .input_chunks = 2, .output_chunks = 2, .in_place = false});
  p.chunk(0, I, 0).copy(0, O, 0);                  // step 0: reads i0, writes o0
  p.chunk(0, I, 1).copy(0, S, 0);                  // step 0: independent
  p.chunk(0, S, 0).copy(0, I, 0);                  // step 1: writes i0 after step 0 read it
  p.chunk(0, I, 1).copy(0, O, 0);                  // step 1: writes o0 again
  p.chunk(0, O, 0).copy(0, O, 1);                  // step 2: reads o0 after its write
  p.expect(0, 1, {{0, 1}});
  Algorithm a = p.algorithm();
  std::vector<int> steps;
  for (const Transfer& t : a.transfers) steps.push_back(t.step);
  EXPECT_EQ(steps, (std::vector<int>{0, 0, 1, 1, 2}));
  ASSERT_EQ(a.custom_postcondition.size(), 1u);
  EXPECT_EQ(a.custom_postcondition[0].slot, (SlotRef{0, O, 1}));
}

TEST(ChunkDsl, UsingAStaleReferenceNamesTheCallThatOverwroteIt) {
  Program p({.name = "t", .collective = Collective::AllReduce, .ranks = 2, .input_chunks = 1});
  ChunkRef mine = p.chunk(0, O, 0);  const int taken = __LINE__;
  p.chunk(1, O, 0).copy(0, O, 0);  const int overwrite = __LINE__;
  std::string msg = error_of([&] { mine.copy(1, O, 0); }, ErrorCode::InvalidUsage);
  EXPECT_NE(msg.find("copy() uses a stale reference: chunk 0 of the output buffer of rank 0, taken at " + here(taken)),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("was overwritten since by the copy at " + here(overwrite)), std::string::npos) << msg;
  EXPECT_NE(msg.find("(chunk 0 of the output buffer of rank 1 to chunk 0 of the output buffer of rank 0, step 0)"),
            std::string::npos) << msg;
  // reduce() leaves the reference it was called on stale and returns the fresh one.
  ChunkRef acc = p.chunk(0, O, 0);
  ChunkRef fresh = acc.reduce(p.chunk(1, O, 0));  const int reduced = __LINE__;
  msg = error_of([&] { acc.copy(1, O, 0); }, ErrorCode::InvalidUsage);
  EXPECT_NE(msg.find("overwritten since by the reduce at " + here(reduced)), std::string::npos) << msg;
  EXPECT_NO_THROW(fresh.copy(1, O, 0));
  msg = error_of([&] { p.chunk(1, O, 0).reduce(acc); }, ErrorCode::InvalidUsage);
  EXPECT_NE(msg.find("reduce() uses a stale reference"), std::string::npos) << msg;
  msg = error_of([&] { acc.reduce(p.chunk(1, O, 0)); }, ErrorCode::InvalidUsage);
  EXPECT_NE(msg.find("reduce() into a stale reference"), std::string::npos) << msg;
}

TEST(ChunkDsl, InPlaceAliasesInputAndOutput) {
  // AllGather in place: rank 1's input chunk 0 is its output chunk 1.
  Program p({.name = "ag", .collective = Collective::AllGather, .ranks = 2, .input_chunks = 1});
  ChunkRef in = p.chunk(1, I, 0);
  EXPECT_NO_THROW(p.chunk(1, O, 1));  // holds rank 1's data already
  std::string msg = error_of([&] { p.chunk(1, O, 0); }, ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("chunk(): chunk 0 of the output buffer of rank 1 holds no data yet"), std::string::npos) << msg;
  p.chunk(0, O, 0).copy(1, O, 1);  // overwrites rank 1's input through the alias
  msg = error_of([&] { in.copy(0, O, 1); }, ErrorCode::InvalidUsage);
  EXPECT_NE(msg.find("stale reference: chunk 0 of the input buffer of rank 1"), std::string::npos) << msg;
  // A copy onto the very same chunk moves nothing.
  size_t before = p.algorithm().transfers.size();
  ChunkRef same = p.chunk(0, I, 0).copy(0, O, 0);
  EXPECT_EQ(p.algorithm().transfers.size(), before);
  EXPECT_EQ(same.buffer(), O);
}

TEST(ChunkDsl, SplitAndGroup) {
  Program p({.name = "t", .collective = Collective::AllToAll, .ranks = 2, .input_chunks = 4, .in_place = false});
  ChunkRef all = p.chunk(0, I, 0, 4);
  std::vector<ChunkRef> halves = all.split(2);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[1].index(), 2);
  EXPECT_EQ(halves[1].count(), 2);
  ChunkRef back = halves[1].group(halves[0]);
  EXPECT_EQ(back.index(), 0);
  EXPECT_EQ(back.count(), 4);
  back.copy(1, O, 0);
  EXPECT_EQ(p.algorithm().transfers, (std::vector<Transfer>{T(0, I, 0, 1, O, 0, TransferOp::Copy, 0, 4)}));
  EXPECT_NE(error_of([&] { all.split(3); }, ErrorCode::InvalidArgument).find("4 chunks cannot be cut into 3"), std::string::npos);
  std::string msg = error_of([&] { p.chunk(0, I, 0).group(p.chunk(0, I, 2)); }, ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("are not adjacent"), std::string::npos) << msg;
  msg = error_of([&] { p.chunk(0, I, 0).group(p.chunk(1, I, 1)); }, ErrorCode::InvalidArgument);
  EXPECT_NE(msg.find("are not on one rank and buffer"), std::string::npos) << msg;
  // A part of a reference that went stale is stale too.
  ChunkRef out = p.chunk(1, O, 0, 2);
  p.chunk(0, I, 3).copy(1, O, 1);
  EXPECT_NO_THROW(out.split(2)[0].copy(0, O, 0));
  EXPECT_NE(error_of([&] { out.split(2)[1].copy(0, O, 1); }, ErrorCode::InvalidUsage).find("stale"), std::string::npos);
}

TEST(ChunkDsl, ArgumentErrorsSayWhere) {
  Program p({.name = "t", .collective = Collective::AllReduce, .ranks = 2, .input_chunks = 2, .in_place = false,
             .scratch_chunks = 1});
  const int line = __LINE__ + 1;
  std::string msg = error_of([&] { p.chunk(2, I, 0); }, ErrorCode::InvalidArgument);
  EXPECT_EQ(msg.substr(0, here(line).size()), here(line)) << msg;
  EXPECT_NE(msg.find("chunk(): rank 2 is out of range [0, 2)"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { p.chunk(0, I, 1, 2); }, ErrorCode::InvalidArgument)
                .find("chunk(): chunks [1, 3) of the input buffer of rank 0 are out of range (the buffer holds 2 chunks)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { p.chunk(0, I, 0, 0); }, ErrorCode::InvalidArgument).find("count must be at least 1"), std::string::npos);
  EXPECT_NE(error_of([&] { p.chunk(0, I, 0).copy(1, S, 1); }, ErrorCode::InvalidArgument)
                .find("copy(): chunk 1 of the scratch buffer of rank 1 is out of range (the buffer holds 1 chunks)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { p.chunk(0, O, 0); }, ErrorCode::InvalidArgument).find("holds no data yet"), std::string::npos);
  EXPECT_NE(error_of([&] { p.chunk(0, I, 0).reduce(p.chunk(0, I, 0, 2)); }, ErrorCode::InvalidArgument)
                .find("2 chunks cannot be reduced into 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { p.chunk(0, I, 0).reduce(p.chunk(0, I, 0)); }, ErrorCode::InvalidArgument)
                .find("a chunk cannot be reduced into itself"),
            std::string::npos);
  Program q({.name = "t", .collective = Collective::AllToAll, .ranks = 1, .input_chunks = 4});
  EXPECT_NE(error_of([&] { q.chunk(0, O, 0, 2).copy(0, O, 1); }, ErrorCode::InvalidArgument).find("overlap"), std::string::npos);
  EXPECT_NE(error_of([&] { q.expect(0, 0, {}); }, ErrorCode::InvalidUsage).find("only Custom programs"), std::string::npos);
  EXPECT_NE(error_of([&] { ChunkRef().copy(0, O, 0); }, ErrorCode::InvalidUsage).find("no program made"), std::string::npos);
  EXPECT_NE(error_of([&] { q.chunk(0, O, 0).group(p.chunk(0, I, 1)); }, ErrorCode::InvalidUsage).find("one program only"),
            std::string::npos);
}

TEST(ChunkDsl, SpecErrors) {
  auto bad = [](dsl::ProgramSpec s, const std::string& words) {
    std::string msg = error_of([&] { Program p(std::move(s)); }, ErrorCode::InvalidArgument);
    EXPECT_NE(msg.find(words), std::string::npos) << msg;
  };
  bad({.name = "t", .ranks = 0, .input_chunks = 1}, "at least one rank, not 0");
  bad({.name = "t", .ranks = 2, .input_chunks = -1}, "input_chunks must be in");
  bad({.name = "t", .collective = Collective::ReduceScatter, .ranks = 4, .input_chunks = 6},
      "ReduceScatter with 4 ranks cannot have 6 input chunks per rank");
  bad({.name = "t", .collective = Collective::Custom, .ranks = 1, .input_chunks = 1}, "a Custom program names its output_chunks");
  bad({.name = "t", .collective = Collective::Broadcast, .ranks = 2, .input_chunks = 1, .root = 2}, "root 2 is not a rank");
  bad({.name = "t", .ranks = 1, .input_chunks = 1, .scratch_chunks = 1 << 25}, "scratch_chunks is larger");
}

// Transfer and step counts the algorithms' comments promise.
TEST(ChunkDslAlgorithms, ShapesFollowTheirFormulas) {
  for (int n : {1, 2, 3, 8}) {
    Algorithm ring = dsl::ring_allreduce(n);
    EXPECT_EQ(ring.transfers.size(), static_cast<size_t>(2 * n * (n - 1))) << n;
    EXPECT_EQ(ring.num_steps(), 2 * (n - 1)) << n;
    EXPECT_NO_THROW(check_shape(ring));
    Algorithm ap = dsl::allpairs_allreduce(n);
    EXPECT_EQ(ap.transfers.size(), static_cast<size_t>(3 * n * (n - 1))) << n;
    EXPECT_EQ(ap.num_steps(), n == 1 ? 0 : n + 1) << n;
    EXPECT_EQ(ap.scratch_chunks, n);
    EXPECT_NO_THROW(check_shape(ap));
  }
  for (auto [n, g] : {std::pair{8, 4}, {16, 4}, {8, 8}, {8, 1}, {6, 2}}) {
    int nodes = n / g;
    Algorithm hm = dsl::hierarchical_allreduce(n, g);
    EXPECT_EQ(hm.transfers.size(), static_cast<size_t>(2 * n * nodes * (g - 1) + 2 * n * (nodes - 1))) << n << "/" << g;
    EXPECT_EQ(hm.num_steps(), g == 1 ? 2 * (nodes - 1) : (g - 1) + (nodes - 1) + nodes) << n << "/" << g;
    EXPECT_EQ(hm.gpus_per_node, g);
    EXPECT_NO_THROW(check_shape(hm));
    Algorithm a2a = dsl::alltoall_twostep(n, g);
    EXPECT_EQ(a2a.transfers.size(), static_cast<size_t>(n * n + n * (nodes - 1))) << n << "/" << g;
    EXPECT_EQ(a2a.num_steps(), nodes == 1 ? 1 : 2);
    EXPECT_FALSE(a2a.in_place);
    EXPECT_NO_THROW(check_shape(a2a));
  }
  EXPECT_THROW(dsl::hierarchical_allreduce(6, 4), Error);
  EXPECT_THROW(dsl::alltoall_twostep(8, 0), Error);
}

}  // namespace
}  // namespace weft

namespace weft {
namespace {

// The DSL twins against the ResCCLang built-ins (algorithms/*.rccl): same header, same
// transfers at the same steps. Ring, all-pairs and two-step AllToAll list them in the same
// order too. hm_allreduce.rccl lists each rank's transfers of all steps together (rank-major),
// which is not an order a program can run in (rank 0 would read a chunk before rank 7 has
// written it); the DSL program walks steps outermost, so it equals the .rccl's transfers
// stably sorted by step.
Algorithm load_builtin(const std::string& name, const ParamMap& params) {
  return load_algorithm(std::string(WEFT_TEST_DATA_DIR) + "/algorithms/" + name + ".rccl", params);
}

void expect_twins(const Algorithm& dsl, Algorithm rccl, bool sort_rccl_by_step) {
  EXPECT_EQ(dsl.name, rccl.name);
  EXPECT_EQ(dsl.collective, rccl.collective);
  EXPECT_EQ(dsl.ranks, rccl.ranks);
  EXPECT_EQ(dsl.input_chunks, rccl.input_chunks);
  EXPECT_EQ(dsl.output_chunks, rccl.output_chunks);
  EXPECT_EQ(dsl.scratch_chunks, rccl.scratch_chunks);
  EXPECT_EQ(dsl.in_place, rccl.in_place);
  EXPECT_EQ(dsl.root, rccl.root);
  EXPECT_EQ(dsl.channels, rccl.channels);
  EXPECT_EQ(dsl.warps, rccl.warps);
  EXPECT_EQ(dsl.gpus_per_node, rccl.gpus_per_node);
  EXPECT_EQ(dsl.nics_per_node, rccl.nics_per_node);
  EXPECT_EQ(dsl.protocol, rccl.protocol);
  if (sort_rccl_by_step)
    std::stable_sort(rccl.transfers.begin(), rccl.transfers.end(),
                     [](const Transfer& a, const Transfer& b) { return a.step < b.step; });
  ASSERT_EQ(dsl.transfers.size(), rccl.transfers.size());
  for (size_t i = 0; i < dsl.transfers.size(); ++i) ASSERT_EQ(dsl.transfers[i], rccl.transfers[i]) << "transfer " << i;
}

TEST(ChunkDslAlgorithms, VerifyAndEqualTheirResCCLangTwins) {
  for (int n : {1, 2, 3, 8, 16}) {
    std::string nn = std::to_string(n);
    SCOPED_TRACE("ranks " + nn);
    Algorithm ring = dsl::ring_allreduce(n);
    VerifyResult v = verify(ring);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    expect_twins(ring, load_builtin("ring_allreduce", {{"nRanks", nn}}), false);
    Algorithm ap = dsl::allpairs_allreduce(n);
    v = verify(ap);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    expect_twins(ap, load_builtin("allpairs_allreduce", {{"nRanks", nn}, {"nScratch", nn}}), false);
  }
  for (auto [n, g] : {std::pair{8, 4}, {16, 4}, {8, 8}, {8, 1}, {6, 2}, {32, 8}}) {
    std::string nn = std::to_string(n), gg = std::to_string(g);
    SCOPED_TRACE("ranks " + nn + ", gpus per node " + gg);
    Algorithm hm = dsl::hierarchical_allreduce(n, g);
    VerifyResult v = verify(hm);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    expect_twins(hm, load_builtin("hm_allreduce", {{"nRanks", nn}, {"GPUPerNode", gg}}), true);
    Algorithm a2a = dsl::alltoall_twostep(n, g);
    v = verify(a2a);
    EXPECT_TRUE(v.ok) << (v.errors.empty() ? "" : v.errors[0]);
    expect_twins(a2a, load_builtin("alltoall_twostep", {{"nRanks", nn}, {"GPUPerNode", gg}, {"nScratch", nn}}), false);
  }
}

// `plan` with each slot's tasks renamed from `from`'s transfer numbers to `to`'s (the same
// transfers, numbered differently), and sorted.
Plan renumber_tasks(Plan plan, const Algorithm& from, const Algorithm& to) {
  auto key = [](const Transfer& t) {
    return std::make_tuple(t.src_rank, t.src_buffer, t.src_index, t.dst_rank, t.dst_buffer, t.dst_index, t.count, t.op, t.step);
  };
  std::map<decltype(key(Transfer{})), int32_t> index;
  for (size_t i = 0; i < to.transfers.size(); ++i) index[key(to.transfers[i])] = static_cast<int32_t>(i);
  for (RankPlan& rp : plan.ranks)
    for (ThreadBlock& tb : rp.tbs)
      for (Slot& s : tb.slots) {
        for (int32_t& t : s.tasks) t = index.at(key(from.transfers[static_cast<size_t>(t)]));
        std::sort(s.tasks.begin(), s.tasks.end());
      }
  return plan;
}

Plan sorted_tasks(Plan plan) {
  for (RankPlan& rp : plan.ranks)
    for (ThreadBlock& tb : rp.tbs)
      for (Slot& s : tb.slots) std::sort(s.tasks.begin(), s.tasks.end());
  return plan;
}

// Every scheduler makes the same plan of a DSL algorithm as of its ResCCLang twin: the same
// thread blocks, slots, primitives, peers, buffers and dependencies. For ring, all-pairs and
// two-step AllToAll the plans are equal as they are; for hm_allreduce, whose twins number
// the same transfers differently (see VerifyAndEqualTheirResCCLangTwins), once each slot's
// task numbers are translated.
TEST(ChunkDslAlgorithms, CompileToTheSamePlansAsTheirTwins) {
  struct Twin {
    const char* what;
    Algorithm dsl, rccl;
    const char* topology;
    bool renumber;
  };
  std::vector<Twin> twins;
  twins.push_back({"ring", dsl::ring_allreduce(8), load_builtin("ring_allreduce", {{"nRanks", "8"}}), "h200-1x8", false});
  twins.push_back({"all-pairs", dsl::allpairs_allreduce(8),
                   load_builtin("allpairs_allreduce", {{"nRanks", "8"}, {"nScratch", "8"}}), "h200-1x8", false});
  twins.push_back({"hierarchical", dsl::hierarchical_allreduce(8, 4),
                   load_builtin("hm_allreduce", {{"nRanks", "8"}, {"GPUPerNode", "4"}}), "a100-2x4", true});
  twins.push_back({"two-step", dsl::alltoall_twostep(8, 4),
                   load_builtin("alltoall_twostep", {{"nRanks", "8"}, {"GPUPerNode", "4"}, {"nScratch", "8"}}), "a100-2x4",
                   false});
  for (const Twin& t : twins) {
    Topology topo = topology_preset(t.topology);
    for (const char* scheduler : {"hpds", "algo", "stage", "rr", "gc3"}) {
      SCOPED_TRACE(std::string(t.what) + ", " + scheduler);
      CompileOptions o;
      o.scheduler = scheduler;
      Plan from_dsl = compile(t.dsl, topo, o).plan;
      Plan from_rccl = compile(t.rccl, topo, o).plan;
      if (t.renumber) {
        EXPECT_TRUE(renumber_tasks(from_dsl, t.dsl, t.rccl) == sorted_tasks(from_rccl));
      } else {
        EXPECT_TRUE(from_dsl == from_rccl);
      }
      EXPECT_EQ(from_dsl.max_tbs_per_rank(), from_rccl.max_tbs_per_rank());
    }
  }
}

TEST(ChunkDslAlgorithms, AWrongProgramFailsItsPostcondition) {
  // A ring AllReduce that forgets the AllGather's last step.
  const int n = 4;
  Program p({.name = "short_ring", .collective = Collective::AllReduce, .ranks = n, .input_chunks = n});
  for (int step = 0; step + 1 < n; ++step)
    for (int r = 0; r < n; ++r) {
      int c = (r - step - 1 + n) % n;
      p.chunk((r + 1) % n, Buffer::Output, c).reduce(p.chunk(r, Buffer::Output, c));
    }
  for (int step = 0; step + 2 < n; ++step)
    for (int r = 0; r < n; ++r) {
      int c = (r - step + n) % n;
      p.chunk(r, Buffer::Output, c).copy((r + 1) % n, Buffer::Output, c);
    }
  VerifyResult v = verify(p.algorithm());
  EXPECT_FALSE(v.ok);
  ASSERT_FALSE(v.errors.empty());
  EXPECT_NE(v.errors[0].find("rank"), std::string::npos) << v.errors[0];
}

}  // namespace
}  // namespace weft
