// MSCCL XML import: recovering transfers and steps from sends, receives and dependencies;
// the as-given plan; the errors that need the whole file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <tuple>

#include "ir/plan_json.hpp"
#include "lang/msccl_import.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

using test::algo;
using test::column_after;
using test::edit;
using test::expect_error_at;
using test::Gpu;
using test::head;
using test::St;
using test::Tb;

Transfer T(int sr, Buffer sb, int si, int dr, Buffer db, int di, TransferOp op, int step, int count = 1) {
  Transfer t;
  t.src_rank = sr;
  t.src_buffer = sb;
  t.src_index = si;
  t.dst_rank = dr;
  t.dst_buffer = db;
  t.dst_index = di;
  t.op = op;
  t.step = step;
  t.count = count;
  return t;
}

constexpr Buffer I = Buffer::Input, O = Buffer::Output, S = Buffer::Scratch;
constexpr TransferOp CP = TransferOp::Copy, RE = TransferOp::Reduce;

void expect_transfers(const Algorithm& a, const std::vector<Transfer>& want) {
  ASSERT_EQ(a.transfers.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Transfer& g = a.transfers[i];
    const Transfer& w = want[i];
    EXPECT_EQ(g, w) << "transfer " << i << ": got " << g.src_rank << "/" << to_string(g.src_buffer) << "[" << g.src_index
                    << "] -> " << g.dst_rank << "/" << to_string(g.dst_buffer) << "[" << g.dst_index << "] x" << g.count << " "
                    << to_string(g.op) << " step " << g.step;
  }
}

// Ring AllGather on 3 gpus in place: gpu r sends its chunk, forwards the one it receives
// (rcs), and keeps the last one.
std::string ring_allgather() {
  auto tb = [](int r) {
    return Tb{(r + 1) % 3, (r + 2) % 3, 0,
              {St{"s", "o", r, "o", r}, St{"rcs", "o", (r + 2) % 3, "o", (r + 2) % 3}, St{"r", "o", (r + 1) % 3, "o", (r + 1) % 3}}};
  };
  return algo(head("allgather", 3, 3, 1, 1, "LL"), {Gpu{0, 3, 0, {tb(0)}}, Gpu{0, 3, 0, {tb(1)}}, Gpu{0, 3, 0, {tb(2)}}});
}

TEST(MscclImport, RingAllGatherTransfersAndSteps) {
  MscclImport imp = import_msccl(ring_allgather(), "ring.xml");
  const Algorithm& a = imp.algorithm;
  EXPECT_EQ(a.name, "t");
  EXPECT_EQ(a.collective, Collective::AllGather);
  EXPECT_EQ(a.ranks, 3);
  EXPECT_EQ(a.input_chunks, 1);
  EXPECT_EQ(a.output_chunks, 3);
  EXPECT_EQ(a.scratch_chunks, 0);
  EXPECT_TRUE(a.in_place);
  EXPECT_EQ(a.protocol, "LL");
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.source_file, "ring.xml");
  expect_transfers(a, {T(0, O, 0, 1, O, 0, CP, 0), T(1, O, 1, 2, O, 1, CP, 0), T(2, O, 2, 0, O, 2, CP, 0),
                       T(0, O, 2, 1, O, 2, CP, 1), T(1, O, 0, 2, O, 0, CP, 1), T(2, O, 1, 0, O, 1, CP, 1)});
  // Each transfer points at the step that completes it (the receive).
  ASSERT_EQ(a.transfer_locations.size(), 6u);
  EXPECT_EQ(a.file_of(a.transfer_locations[0]), "ring.xml");
  EXPECT_EQ(a.location_of(0), "ring.xml:12:7");
  EXPECT_EQ(a.transfer_locations[0].line, 12);  // gpu 1's rcs
  EXPECT_EQ(a.transfer_locations[0].column, 7);
  EXPECT_EQ(a.transfer_locations[3].line, 13);  // gpu 1's final r
  check_shape(a);
}

TEST(MscclImport, AsGivenPlanKeepsTheFilesSchedule) {
  MscclImport imp = import_msccl(ring_allgather(), "ring.xml");
  const Plan& p = imp.as_given;
  EXPECT_EQ(p.algorithm, "t");
  EXPECT_EQ(p.collective, Collective::AllGather);
  EXPECT_EQ(p.num_ranks, 3);
  EXPECT_EQ(p.input_chunks, 1);
  EXPECT_EQ(p.output_chunks, 3);
  EXPECT_TRUE(p.in_place);
  EXPECT_EQ(p.protocol, "LL");
  EXPECT_EQ(p.execution, ExecutionModel::Algorithm);
  EXPECT_EQ(p.scheduler, "as-given");
  EXPECT_EQ(p.allocator, "as-given");
  ASSERT_EQ(p.ranks.size(), 3u);
  const RankPlan& r1 = p.ranks[1];
  EXPECT_EQ(r1.rank, 1);
  ASSERT_EQ(r1.tbs.size(), 1u);
  ASSERT_EQ(r1.tbs[0].slots.size(), 3u);
  const Slot& s0 = r1.tbs[0].slots[0];
  EXPECT_EQ(s0.primitive, Primitive::Send);
  EXPECT_EQ(s0.send_peer, 2);
  EXPECT_EQ(s0.recv_peer, -1);
  EXPECT_EQ(s0.src, (BufferRange{O, 1}));
  EXPECT_EQ(s0.count, 1);
  EXPECT_EQ(s0.tasks, std::vector<int32_t>{1});  // (1,o1) -> (2,o1)
  const Slot& s1 = r1.tbs[0].slots[1];
  EXPECT_EQ(s1.primitive, Primitive::RecvCopySend);
  EXPECT_EQ(s1.send_peer, 2);
  EXPECT_EQ(s1.recv_peer, 0);
  EXPECT_EQ(s1.dst, (BufferRange{O, 0}));
  EXPECT_EQ(s1.tasks, (std::vector<int32_t>{0, 4}));  // receives transfer 0, forwards transfer 4
  EXPECT_EQ(r1.tbs[0].slots[2].primitive, Primitive::Recv);
  EXPECT_TRUE(s1.deps.empty());
}

// A ring AllReduce of one chunk over 3 gpus with every fused step: gpu 1's rrs adds its
// chunk and forwards without storing, gpu 2's rrcs completes the sum, gpu 0's rcs stores and
// forwards it, gpu 1's r stores it.
std::string ring_allreduce() {
  return algo(head("allreduce", 3, 1),
              {Gpu{1, 0, 0, {Tb{1, 2, 0, {St{"s", "i", 0, "i", 0}, St{"rcs", "i", 0, "i", 0}}}}},
               Gpu{1, 0, 0, {Tb{2, 0, 0, {St{"rrs", "i", 0, "i", 0}, St{"r", "i", 0, "i", 0}}}}},
               Gpu{1, 0, 0, {Tb{0, 1, 0, {St{"rrcs", "i", 0, "i", 0}}}}}});
}

TEST(MscclImport, FusedStepsChainTransfers) {
  MscclImport imp = import_msccl(ring_allreduce(), "ar.xml");
  const Algorithm& a = imp.algorithm;
  EXPECT_EQ(a.collective, Collective::AllReduce);
  EXPECT_EQ(a.input_chunks, 1);
  EXPECT_EQ(a.output_chunks, 1);
  // gpu 1's chunk is overwritten by the final r, so its rrs reduces in place.
  EXPECT_EQ(imp.rrs_scratch_chunks, 0);
  expect_transfers(a, {T(0, I, 0, 1, I, 0, RE, 0), T(1, I, 0, 2, I, 0, RE, 1), T(2, I, 0, 0, I, 0, CP, 2),
                       T(0, I, 0, 1, I, 0, CP, 3)});
}

TEST(MscclImport, RrsWhoseSourceStaysLiveGetsScratch) {
  // gpu 1 adds its chunk to gpu 0's and sends the sum back; its own chunk is never
  // overwritten, so reducing into it would change what MSCCL leaves there.
  std::string text = algo(head("allreduce", 2, 1),
                          {Gpu{1, 0, 2, {Tb{1, 1, 0, {St{"s", "i", 0, "i", 0}, St{"r", "i", 0, "i", 0}}}}},
                           Gpu{1, 0, 0, {Tb{0, 0, 0, {St{"rrs", "i", 0, "i", 0}}}}}});
  MscclImport imp = import_msccl(text, "t.xml");
  EXPECT_EQ(imp.rrs_scratch_chunks, 1);
  EXPECT_EQ(imp.algorithm.scratch_chunks, 3);  // the file's 2, then one for the rrs
  expect_transfers(imp.algorithm, {T(1, I, 0, 1, S, 2, CP, 0), T(0, I, 0, 1, S, 2, RE, 1), T(1, S, 2, 0, I, 0, CP, 2)});
  EXPECT_EQ(imp.as_given.scratch_chunks, 2);  // the file's own schedule needs no extra chunk
}

TEST(MscclImport, RrcAndRrcsWithSeparateSourceCopyFirst) {
  // gpu 1: rrc  s0 := i0 + incoming; gpu 0 receives the sum in its own scratch.
  std::string text = algo(head("allreduce", 2, 1, 0),
                          {Gpu{1, 1, 1, {Tb{1, 1, 0, {St{"s", "i", 0, "o", 0}, St{"r", "i", 0, "s", 0}}}}},
                           Gpu{1, 1, 1, {Tb{0, 0, 0, {St{"rrcs", "i", 0, "s", 0}}}}}});
  MscclImport imp = import_msccl(text, "t.xml");
  EXPECT_FALSE(imp.algorithm.in_place);
  expect_transfers(imp.algorithm,
                   {T(1, I, 0, 1, S, 0, CP, 0), T(0, I, 0, 1, S, 0, RE, 1), T(1, S, 0, 0, S, 0, CP, 2)});
  // In place, i0 and o0 are one chunk: an rrc from i0 into o0 reduces in place.
  std::string inplace = algo(head("allreduce", 2, 1),
                             {Gpu{1, 1, 0, {Tb{1, -1, 0, {St{"s", "i", 0, "o", 0}}}}},
                              Gpu{1, 1, 0, {Tb{-1, 0, 0, {St{"rrc", "i", 0, "o", 0}}}}}});
  expect_transfers(import_msccl(inplace, "t.xml").algorithm, {T(0, I, 0, 1, O, 0, RE, 0)});
}

TEST(MscclImport, LocalCopiesAndReductions) {
  // One gpu: copy input into scratch twice, reduce them into the output; a copy onto the
  // same chunk (in place, i0 is o0) moves nothing and is dropped.
  std::string text = algo(head("allreduce", 1, 1, 0),
                          {Gpu{1, 1, 2, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "s", 0}, St{"cpy", "i", 0, "s", 1},
                                                         St{"cpy", "s", 0, "o", 0}, St{"re", "s", 1, "o", 0}}}}}});
  MscclImport imp = import_msccl(text, "t.xml");
  expect_transfers(imp.algorithm, {T(0, I, 0, 0, S, 0, CP, 0), T(0, I, 0, 0, S, 1, CP, 0), T(0, S, 0, 0, O, 0, CP, 1),
                                   T(0, S, 1, 0, O, 0, RE, 2)});
  std::string self = algo(head("allreduce", 1, 1), {Gpu{1, 1, 0, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "o", 0}}}}}});
  EXPECT_TRUE(import_msccl(self, "t.xml").algorithm.transfers.empty());
  EXPECT_EQ(import_msccl(self, "t.xml").as_given.ranks[0].tbs[0].slots[0].primitive, Primitive::Copy);
}

TEST(MscclImport, DependenciesOrderAndResolveToTheSignallingStep) {
  // tb 1 waits for step 0 of tb 0, which does not signal: the wait ends when step 1 does.
  std::string text = algo(head("allreduce", 1, 2, 0),
                          {Gpu{2, 2, 1, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "s", 0}, St{"cpy", "i", 1, "o", 1, 1, -1, -1, 1}}},
                                         Tb{-1, -1, 0, {St{"nop", "i", -1, "o", -1, 0, 0, 0}, St{"re", "s", 0, "o", 1, 1, 0, 1}}}}}});
  MscclImport imp = import_msccl(text, "t.xml");
  expect_transfers(imp.algorithm, {T(0, I, 0, 0, S, 0, CP, 0), T(0, I, 1, 0, O, 1, CP, 0), T(0, S, 0, 0, O, 1, RE, 1)});
  const ThreadBlock& tb1 = imp.as_given.ranks[0].tbs[1];
  ASSERT_EQ(tb1.slots.size(), 2u);
  EXPECT_EQ(tb1.slots[0].primitive, Primitive::Nop);
  EXPECT_EQ(tb1.slots[0].deps, (std::vector<SlotDep>{{0, 1}}));
  EXPECT_EQ(tb1.slots[1].deps, (std::vector<SlotDep>{{0, 1}}));
  EXPECT_EQ(tb1.slots[1].tasks, std::vector<int32_t>{2});
  // Without the signal the wait would never end.
  std::string silent = edit(text, 5, "hasdep=\"1\"", "hasdep=\"0\"");
  expect_error_at([&] { import_msccl(silent, "t.xml"); }, "t.xml", 8, column_after(silent, 8, "deps=\""),
                  "waits for step 0 of thread block 0, but neither that step nor a later one of that thread block signals");
}

TEST(MscclImport, UnorderedAccessesAreARace) {
  // gpu 0 receives gpu 1's chunk twice, on two channels, into the same chunk, unordered.
  std::string text = algo(head("allgather", 2, 2, 1, 2),
                          {Gpu{0, 2, 0, {Tb{-1, 1, 0, {St{"r", "o", 1, "o", 1}}}, Tb{-1, 1, 1, {St{"r", "o", 1, "o", 1}}}}},
                           Gpu{0, 2, 0, {Tb{0, -1, 0, {St{"s", "o", 1, "o", 1}}}, Tb{0, -1, 1, {St{"s", "o", 1, "o", 1}}}}}});
  expect_error_at([&] { import_msccl(text, "t.xml"); }, "t.xml", 7, 7,
                  "this step writes output chunk 1 of gpu 0, which gpu 0, thread block 0, step 0 (line 4) writes, and no "
                  "thread-block order, dependency or connection orders the two: a race");
  // A dependency orders them.
  std::string ordered = edit(edit(text, 7, "depid=\"-1\" deps=\"-1\"", "depid=\"0\" deps=\"0\""), 4, "hasdep=\"0\"", "hasdep=\"1\"");
  EXPECT_EQ(import_msccl(ordered, "t.xml").algorithm.transfers.size(), 2u);
}

TEST(MscclImport, WaitsInACycleAreAnError) {
  std::string deps = algo(head("allreduce", 1, 1, 0),
                          {Gpu{1, 1, 1, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "s", 0, 1, 1, 0, 1}}},
                                         Tb{-1, -1, 0, {St{"cpy", "s", 0, "o", 0, 1, 0, 0, 1}}}}}});
  expect_error_at([&] { import_msccl(deps, "t.xml"); }, "t.xml", 4, 7,
                  "these steps wait for each other in a cycle, so MSCCL would hang: gpu 0, thread block 0, step 0 (line 4) "
                  "waits (depid/deps) for gpu 0, thread block 1, step 0 (line 7)");
  // Each gpu receives before it sends.
  std::string comm = algo(head("allgather", 2, 2),
                          {Gpu{0, 2, 0, {Tb{1, 1, 0, {St{"r", "o", 1, "o", 1}, St{"s", "o", 0, "o", 0}}}}},
                           Gpu{0, 2, 0, {Tb{0, 0, 0, {St{"r", "o", 0, "o", 0}, St{"s", "o", 1, "o", 1}}}}}});
  expect_error_at([&] { import_msccl(comm, "t.xml"); }, "t.xml", 4, 7, "receives the send of gpu 1, thread block 0, step 1");
}

TEST(MscclImport, SendsAndReceivesMustMatch) {
  std::string text = algo(head("allgather", 2, 2),
                          {Gpu{0, 2, 0, {Tb{1, 1, 0, {St{"s", "o", 0, "o", 0}, St{"r", "o", 1, "o", 1}}}}},
                           Gpu{0, 2, 0, {Tb{0, 0, 0, {St{"s", "o", 1, "o", 1}, St{"r", "o", 0, "o", 0}}}}}});
  EXPECT_NO_THROW(import_msccl(text, "t.xml"));
  // gpu 1 stops receiving: gpu 0's send has no partner.
  std::string extra_send = edit(text, 11, "type=\"r\"", "type=\"nop\"");
  extra_send = edit(extra_send, 11, "depid=\"-1\" deps=\"-1\"", "depid=\"0\" deps=\"0\"");
  extra_send = edit(extra_send, 10, "hasdep=\"0\"", "hasdep=\"1\"");
  expect_error_at([&] { import_msccl(extra_send, "t.xml"); }, "t.xml", 4, column_after(extra_send, 4, "type=\""),
                  "this 's' step is send number 1 from gpu 0 to gpu 1 on channel 0, but gpu 1 receives only 0 times on it "
                  "(thread block 0)");
  // Nobody on gpu 1 listens to gpu 0 on channel 0.
  std::string deaf = edit(edit(text, 9, "recv=\"0\"", "recv=\"-1\""), 11, "type=\"r\"", "type=\"cpy\"");
  deaf = edit(deaf, 11, "srcoff=\"0\"", "srcoff=\"1\"");
  expect_error_at([&] { import_msccl(deaf, "t.xml"); }, "t.xml", 4, column_after(deaf, 4, "type=\""),
                  "but no thread block of gpu 1 receives on that connection");
  // A receive with no send.
  std::string extra_recv = edit(edit(text, 4, "type=\"s\"", "type=\"r\""), 4, "srcoff=\"0\"", "srcoff=\"1\"");
  extra_recv = edit(extra_recv, 4, "dstoff=\"0\"", "dstoff=\"1\"");
  expect_error_at([&] { import_msccl(extra_recv, "t.xml"); }, "t.xml", 11, column_after(extra_recv, 11, "type=\""),
                  "this 'r' step is receive number 1 from gpu 0 to gpu 1 on channel 0, but gpu 0 sends only 0 times on it");
  std::string mute = edit(edit(text, 3, "send=\"1\"", "send=\"-1\""), 4, "type=\"s\"", "type=\"cpy\"");
  mute = edit(mute, 4, "dstoff=\"0\"", "dstoff=\"1\"");
  expect_error_at([&] { import_msccl(mute, "t.xml"); }, "t.xml", 11, column_after(mute, 11, "type=\""),
                  "but no thread block of gpu 0 sends on that connection");
  // Counts differ.
  std::string cnt = algo(head("allgather", 2, 4),
                         {Gpu{0, 4, 0, {Tb{1, 1, 0, {St{"s", "o", 0, "o", 0, 2}, St{"r", "o", 2, "o", 2, 2}}}}},
                          Gpu{0, 4, 0, {Tb{0, 0, 0, {St{"s", "o", 2, "o", 2, 2}, St{"r", "o", 0, "o", 0, 1}}}}}});
  expect_error_at([&] { import_msccl(cnt, "t.xml"); }, "t.xml", 11, column_after(cnt, 11, "cnt=\""),
                  "this step receives cnt=1 chunks, but the send it meets (gpu 0, thread block 0, step 0 (line 4)) sends cnt=2");
}

TEST(MscclImport, SwapThroughTheConnectionBufferIsRefused) {
  // Both gpus send their chunk and overwrite it with the other's: fine for MSCCL's FIFOs,
  // not expressible with atomic transfers.
  std::string text = algo(head("allreduce", 2, 1),
                          {Gpu{1, 0, 0, {Tb{1, 1, 0, {St{"s", "i", 0, "i", 0}, St{"r", "i", 0, "i", 0}}}}},
                           Gpu{1, 0, 0, {Tb{0, 0, 0, {St{"s", "i", 0, "i", 0}, St{"r", "i", 0, "i", 0}}}}}});
  expect_error_at([&] { import_msccl(text, "t.xml"); }, "t.xml", 5, 7, "(a swap), which weft's atomic transfers cannot express");
}

TEST(MscclImport, CollectivesAndTheirChunkCounts) {
  auto one_gpu = [](const std::string& coll, int nchunks, int in, int out, const std::string& extra = "") {
    return algo(head(coll, 1, nchunks) + extra, {Gpu{in, out, 0, {}}});
  };
  struct Want {
    std::string coll;
    Collective c;
    int in, out;
  };
  for (const Want& w : {Want{"allreduce", Collective::AllReduce, 4, 4}, Want{"allgather", Collective::AllGather, 4, 4},
                        Want{"reducescatter", Collective::ReduceScatter, 4, 4}, Want{"alltoall", Collective::AllToAll, 4, 4},
                        Want{"broadcast", Collective::Broadcast, 4, 4}, Want{"reduce", Collective::Reduce, 4, 4},
                        Want{"reduce_scatter", Collective::ReduceScatter, 4, 4}, Want{"custom", Collective::Custom, 4, 4}}) {
    Algorithm a = import_msccl(one_gpu(w.coll, 4, w.in, w.out), "t.xml").algorithm;
    EXPECT_EQ(a.collective, w.c) << w.coll;
    EXPECT_EQ(a.input_chunks, w.in) << w.coll;
    EXPECT_EQ(a.output_chunks, w.out) << w.coll;
  }
  auto four = [](const std::string& coll) {
    return algo(head(coll, 4, 8), {Gpu{}, Gpu{}, Gpu{}, Gpu{}});
  };
  Algorithm ag = import_msccl(four("allgather"), "t.xml").algorithm;
  EXPECT_EQ(ag.input_chunks, 2);
  EXPECT_EQ(ag.output_chunks, 8);
  Algorithm rs = import_msccl(four("reducescatter"), "t.xml").algorithm;
  EXPECT_EQ(rs.input_chunks, 8);
  EXPECT_EQ(rs.output_chunks, 2);
  Algorithm rs2 = import_msccl(four("reduce_scatter"), "t.xml").algorithm;  // msccl-tools' older spelling
  EXPECT_EQ(rs2.collective, Collective::ReduceScatter);
  EXPECT_EQ(rs2.input_chunks, 8);
  EXPECT_EQ(rs2.output_chunks, 2);
  // custom: both buffers hold nchunksperloop chunks; no postcondition beyond races and double counts.
  Algorithm cu = import_msccl(four("custom"), "t.xml").algorithm;
  EXPECT_EQ(cu.collective, Collective::Custom);
  EXPECT_EQ(cu.input_chunks, 8);
  EXPECT_EQ(cu.output_chunks, 8);
  EXPECT_TRUE(cu.custom_postcondition.empty());
  std::string too_many = algo(head("custom", 1, 2), {Gpu{3, 0, 0, {}}});
  expect_error_at([&] { import_msccl(too_many, "t.xml"); }, "t.xml", 2, column_after(too_many, 2, "i_chunks=\""),
                  "gpu 0 declares 3 input chunks, but coll=custom with nchunksperloop=2 and ngpus=1 gives each gpu 2");
  Algorithm a2a = import_msccl(four("alltoall"), "t.xml").algorithm;
  EXPECT_EQ(a2a.input_chunks, 8);
  EXPECT_EQ(a2a.output_chunks, 8);
  // broadcast and reduce name their root with weft's optional root attribute.
  std::string bc = algo(head("broadcast", 4, 8) + " root=\"2\"", {Gpu{}, Gpu{}, Gpu{}, Gpu{}});
  EXPECT_EQ(import_msccl(bc, "t.xml").algorithm.root, 2);
  std::string bad_root = algo(head("reduce", 4, 8) + " root=\"4\"", {Gpu{}, Gpu{}, Gpu{}, Gpu{}});
  expect_error_at([&] { import_msccl(bad_root, "t.xml"); }, "t.xml", 1, column_after(bad_root, 1, "root=\""),
                  "<algo> attribute root: 4 is out of range [0, 3]");
  for (const char* coll : {"send", "recv", "gather", "scatter"}) {
    std::string t = four(coll);
    expect_error_at([&] { import_msccl(t, "t.xml"); }, "t.xml", 1, column_after(t, 1, "coll=\""),
                    std::string("coll=") + coll + " is an MSCCL operation weft does not import");
  }
}

// MSCCL lets a step wait for an earlier step of its own thread block; program order already
// implies it, so the as-given plan (whose dependencies name other thread blocks) drops it.
TEST(MscclImport, DependencyOnTheSameThreadBlock) {
  std::string text = algo(head("allreduce", 1, 2), {Gpu{2, 0, 0, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "i", 1, 1, -1, -1, 1},
                                                                                   St{"re", "i", 1, "i", 0, 1, 0, 0},
                                                                                   St{"nop", "i", -1, "i", -1, 0, 0, 0},
                                                                                   St{"cpy", "i", 0, "i", 1, 1, 0, 0}}},
                                                                          Tb{-1, -1, 0, {St{"nop", "i", -1, "i", -1, 0, 0, 0}}}}}});
  MscclImport imp = import_msccl(text, "t.xml");
  const ThreadBlock& tb0 = imp.as_given.ranks[0].tbs[0];
  ASSERT_EQ(tb0.slots.size(), 4u);
  for (const Slot& s : tb0.slots) EXPECT_TRUE(s.deps.empty());
  // Another thread block's wait on the same step stays.
  ASSERT_EQ(imp.as_given.ranks[0].tbs[1].slots.size(), 1u);
  EXPECT_EQ(imp.as_given.ranks[0].tbs[1].slots[0].deps.size(), 1u);
  EXPECT_NO_THROW(validate_plan(imp.as_given));
  // A wait that resolves to the step itself or a later one of its own thread block never ends.
  std::string self = algo(head("allreduce", 1, 2), {Gpu{2, 0, 0, {Tb{-1, -1, 0, {St{"cpy", "i", 0, "i", 1, 1, 0, 0, 1}}}}}});
  expect_error_at([&] { import_msccl(self, "t.xml"); }, "t.xml", 4, 7,
                  "these steps wait for each other in a cycle, so MSCCL would hang: gpu 0, thread block 0, step 0 (line 4) "
                  "waits (depid/deps) for gpu 0, thread block 0, step 0 (line 4)");
}

TEST(MscclImport, LayoutOptions) {
  std::string both = algo(head("allreduce", 1, 1) + " outofplace=\"1\"", {Gpu{1, 1, 0, {}}});
  EXPECT_TRUE(import_msccl(both, "t.xml").algorithm.in_place);
  EXPECT_FALSE(import_msccl(both, "t.xml", {false}).algorithm.in_place);
  EXPECT_FALSE(import_msccl(both, "t.xml", {false}).as_given.in_place);
  std::string only_in = algo(head("allreduce", 1, 1) + " outofplace=\"0\"", {Gpu{1, 1, 0, {}}});
  expect_error_at([&] { import_msccl(only_in, "t.xml", {false}); }, "t.xml", 1, column_after(only_in, 1, "outofplace=\""),
                  "an out-of-place import was asked for, but the file runs in place only");
  std::string only_in_implicit = algo(head("allreduce", 1, 1), {Gpu{1, 1, 0, {}}});
  expect_error_at([&] { import_msccl(only_in_implicit, "t.xml", {false}); }, "t.xml", 1,
                  column_after(only_in_implicit, 1, "inplace=\""), "runs in place only");
  std::string only_out = algo(head("allreduce", 1, 1, 0), {Gpu{1, 1, 0, {}}});
  EXPECT_FALSE(import_msccl(only_out, "t.xml").algorithm.in_place);
  expect_error_at([&] { import_msccl(only_out, "t.xml", {true}); }, "t.xml", 1, column_after(only_out, 1, "inplace=\""),
                  "an in-place import was asked for, but the file says inplace=0");
}

TEST(MscclImport, ReadsFilesAndReportsUnreadableOnes) {
  std::string path = ::testing::TempDir() + "/weft_msccl_import_test_" + std::to_string(getpid()) + ".xml";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::string text = ring_allgather();
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  MscclImport imp = import_msccl_file(path);
  EXPECT_EQ(imp.algorithm.transfers.size(), 6u);
  EXPECT_EQ(imp.algorithm.source_file, path);
  std::remove(path.c_str());
  try {
    import_msccl_file("/nonexistent/dir/file.xml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::System);
    EXPECT_NE(std::string(e.what()).find("cannot read /nonexistent/dir/file.xml"), std::string::npos);
  }
}

TEST(MscclImport, OptionsFromCommandLineParameters) {
  EXPECT_FALSE(msccl_options_from_params({}, "f.xml").in_place.has_value());
  EXPECT_EQ(msccl_options_from_params({{"InPlace", "0"}}, "f.xml").in_place, std::optional<bool>(false));
  EXPECT_EQ(msccl_options_from_params({{"InPlace", "1"}}, "f.xml").in_place, std::optional<bool>(true));
  // The shape a topology gives: nRanks must match the file, the others are hints.
  MscclImportOptions shaped = msccl_options_from_params({{"nRanks", "8"}, {"GPUPerNode", "4"}, {"NICPerNode", "2"}}, "f.xml");
  EXPECT_EQ(shaped.ranks, std::optional<int32_t>(8));
  EXPECT_EQ(shaped.gpus_per_node, 4);
  EXPECT_EQ(shaped.nics_per_node, 2);
  for (auto [k, v, words] : {std::tuple{"nChannels", "2", "MSCCL XML files take no parameter 'nChannels'"},
                             std::tuple{"InPlace", "2", "InPlace must be 0 or 1, not '2'"},
                             std::tuple{"nRanks", "0", "nRanks must be an integer of at least 1, not '0'"},
                             std::tuple{"GPUPerNode", "x", "GPUPerNode must be an integer of at least 1, not 'x'"},
                             std::tuple{"NICPerNode", "-1", "NICPerNode must be an integer of at least 0, not '-1'"}}) {
    try {
      msccl_options_from_params({{k, v}}, "f.xml");
      ADD_FAILURE() << k;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("f.xml: ") + words), std::string::npos) << e.what();
    }
  }
  std::string text = ring_allgather();
  MscclImportOptions three;
  three.ranks = 3;
  three.gpus_per_node = 3;
  EXPECT_EQ(import_msccl(text, "t.xml", three).algorithm.gpus_per_node, 3);
  MscclImportOptions four;
  four.ranks = 4;
  expect_error_at([&] { import_msccl(text, "t.xml", four); }, "t.xml", 1, column_after(text, 1, "ngpus=\""),
                  "<algo> attribute ngpus: the file is for ngpus=3 gpus, not the 4 asked for");
  EXPECT_TRUE(is_msccl_xml_path("dir/a.xml"));
  EXPECT_FALSE(is_msccl_xml_path("dir/a.rccl"));
  EXPECT_FALSE(is_msccl_xml_path("xml"));
}

TEST(MscclImport, KeepsTheSizeRange) {
  std::string text = algo(head("allreduce", 1, 1) + " minBytes=\"1024\" maxBytes=\"65536\"", {Gpu{1, 0, 0, {}}});
  MscclImport imp = import_msccl(text, "t.xml");
  EXPECT_EQ(imp.nchunksperloop, 1);
  EXPECT_EQ(imp.min_bytes, 1024);
  EXPECT_EQ(imp.max_bytes, 65536);
}

}  // namespace
}  // namespace weft
