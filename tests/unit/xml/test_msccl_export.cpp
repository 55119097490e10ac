// MSCCL XML export of plans: MSCCL's one-peer-per-direction thread blocks, dependencies,
// instance refinement, step size limits, and round trips through the importer.
#include <gtest/gtest.h>

#include "lang/msccl_export.hpp"
#include "lang/msccl_import.hpp"
#include "xml_test_util.hpp"

namespace weft {
namespace {

constexpr Buffer I = Buffer::Input, O = Buffer::Output, S = Buffer::Scratch;

Slot slot(Primitive p, int send, int recv, int chan, BufferRange src, BufferRange dst, int count = 1,
          std::vector<SlotDep> deps = {}) {
  Slot s;
  s.primitive = p;
  s.send_peer = send;
  s.recv_peer = recv;
  s.channel = chan;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.deps = std::move(deps);
  return s;
}

Plan plan(Collective c, int ranks, int in, int out, std::vector<std::vector<std::vector<Slot>>> tbs) {
  Plan p;
  p.algorithm = "exported";
  p.collective = c;
  p.num_ranks = ranks;
  p.input_chunks = in;
  p.output_chunks = out;
  p.in_place = true;
  for (int r = 0; r < ranks; ++r) {
    RankPlan rp;
    rp.rank = r;
    for (auto& slots : tbs[static_cast<size_t>(r)]) rp.tbs.push_back(ThreadBlock{slots});
    p.ranks.push_back(rp);
  }
  return p;
}

Transfer T(int sr, Buffer sb, int si, int dr, Buffer db, int di, TransferOp op, int step, int count = 1) {
  Transfer t{sr, sb, si, dr, db, di, count, op, step};
  return t;
}

TEST(MscclExport, ThreadBlockWithSeveralPeersIsSplitInOrder) {
  // Direct AllGather on 3 ranks: one weft thread block sends to both peers, one receives
  // from both (state-based allocation); MSCCL needs a block per peer and direction.
  std::vector<std::vector<std::vector<Slot>>> tbs;
  for (int r = 0; r < 3; ++r) {
    int a = (r + 1) % 3, b = (r + 2) % 3;
    tbs.push_back({{slot(Primitive::Send, a, -1, 0, {O, r}, {}), slot(Primitive::Send, b, -1, 0, {O, r}, {})},
                   {slot(Primitive::Recv, -1, a, 0, {}, {O, a}), slot(Primitive::Recv, -1, b, 0, {}, {O, b})}});
  }
  Plan p = plan(Collective::AllGather, 3, 1, 3, tbs);
  MscclProgram m = plan_to_msccl(p);
  EXPECT_EQ(m.coll, "allgather");
  EXPECT_EQ(m.nchunksperloop, 3);
  EXPECT_EQ(m.nchannels, 1);
  ASSERT_EQ(m.gpus.size(), 3u);
  const MscclGpu& g0 = m.gpus[0];
  // One block per peer and direction: weft's two blocks become MSCCL's four (what the
  // state-based allocation saves is lost in MSCCL XML).
  ASSERT_EQ(g0.tbs.size(), 4u);
  EXPECT_EQ(std::make_pair(g0.tbs[0].send, g0.tbs[0].recv), std::make_pair(1, -1));
  EXPECT_EQ(std::make_pair(g0.tbs[1].send, g0.tbs[1].recv), std::make_pair(2, -1));
  EXPECT_EQ(std::make_pair(g0.tbs[2].send, g0.tbs[2].recv), std::make_pair(-1, 1));
  EXPECT_EQ(std::make_pair(g0.tbs[3].send, g0.tbs[3].recv), std::make_pair(-1, 2));
  // The blocks cut from one weft thread block keep its order: the send to 2 waits for the
  // send to 1 (which signals), the receive from 2 for the receive from 1.
  ASSERT_EQ(g0.tbs[1].steps.size(), 1u);
  EXPECT_EQ(g0.tbs[1].steps[0].type, MscclStepType::Send);
  EXPECT_EQ(g0.tbs[1].steps[0].depid, 0);
  EXPECT_EQ(g0.tbs[1].steps[0].deps, 0);
  EXPECT_TRUE(g0.tbs[0].steps[0].hasdep);
  EXPECT_FALSE(g0.tbs[1].steps[0].hasdep);
  EXPECT_EQ(g0.tbs[3].steps[0].depid, 2);
  EXPECT_TRUE(g0.tbs[2].steps[0].hasdep);
  // What it does survives the trip.
  MscclImport back = import_msccl(export_msccl(p), "x.xml");
  std::vector<Transfer> want;
  for (int r = 0; r < 3; ++r)
    for (int d : {(r + 1) % 3, (r + 2) % 3}) want.push_back(T(r, O, r, d, O, r, TransferOp::Copy, 0));
  std::sort(want.begin(), want.end(), [](const Transfer& a, const Transfer& b) {
    return std::tie(a.src_rank, a.dst_rank) < std::tie(b.src_rank, b.dst_rank);
  });
  EXPECT_EQ(back.algorithm.transfers, want);
}

TEST(MscclExport, FusedPrimitivesAreSplitWhenTheirPeersCannotShareABlock) {
  // Rank 1 forwards two chunks from rank 0 to ranks 2 and 3 with rcs and rrs in one thread
  // block: one receive connection, two send connections.
  std::vector<std::vector<std::vector<Slot>>> tbs(4);
  tbs[0] = {{slot(Primitive::Send, 1, -1, 0, {I, 0}, {}), slot(Primitive::Send, 1, -1, 0, {I, 1}, {})}};
  tbs[1] = {{slot(Primitive::RecvCopySend, 2, 0, 0, {}, {I, 0}), slot(Primitive::RecvReduceSend, 3, 0, 0, {I, 1}, {})}};
  tbs[2] = {{slot(Primitive::Recv, -1, 1, 0, {}, {I, 0})}};
  tbs[3] = {{slot(Primitive::Recv, -1, 1, 0, {}, {I, 1})}};
  Plan p = plan(Collective::AllReduce, 4, 2, 2, tbs);
  p.scratch_chunks = 1;
  MscclProgram m = plan_to_msccl(p);
  const MscclGpu& g1 = m.gpus[1];
  EXPECT_EQ(g1.s_chunks, 2);  // the rrs's sum needs a home once split: scratch chunk 1
  ASSERT_EQ(g1.tbs.size(), 2u);
  EXPECT_EQ(g1.tbs[0].recv, 0);
  EXPECT_EQ(g1.tbs[0].send, 2);
  ASSERT_EQ(g1.tbs[0].steps.size(), 3u);
  EXPECT_EQ(g1.tbs[0].steps[0].type, MscclStepType::Recv);
  EXPECT_EQ(g1.tbs[0].steps[1].type, MscclStepType::Send);
  EXPECT_EQ(g1.tbs[0].steps[2].type, MscclStepType::RecvReduceCopy);
  EXPECT_EQ(g1.tbs[0].steps[2].dstbuf, S);
  EXPECT_EQ(g1.tbs[0].steps[2].dstoff, 1);
  EXPECT_TRUE(g1.tbs[0].steps[2].hasdep);
  EXPECT_EQ(g1.tbs[1].send, 3);
  ASSERT_EQ(g1.tbs[1].steps.size(), 1u);
  EXPECT_EQ(g1.tbs[1].steps[0].srcbuf, S);
  EXPECT_EQ(g1.tbs[1].steps[0].depid, 0);
  EXPECT_EQ(g1.tbs[1].steps[0].deps, 2);
  MscclImport back = import_msccl(write_msccl_program(m), "x.xml");
  // The split rrs copies its source into the scratch chunk before reducing into it.
  EXPECT_EQ(back.algorithm.transfers,
            (std::vector<Transfer>{T(0, I, 0, 1, I, 0, TransferOp::Copy, 0), T(1, I, 1, 1, S, 1, TransferOp::Copy, 0),
                                   T(0, I, 1, 1, S, 1, TransferOp::Reduce, 1), T(1, I, 0, 2, I, 0, TransferOp::Copy, 1),
                                   T(1, S, 1, 3, I, 1, TransferOp::Copy, 2)}));
}

TEST(MscclExport, DependenciesBecomeNopsAndSignals) {
  // One rank, three local thread blocks; the last waits for both others.
  std::vector<std::vector<std::vector<Slot>>> tbs(1);
  tbs[0] = {{slot(Primitive::Copy, -1, -1, 0, {I, 0}, {S, 0})},
            {slot(Primitive::Copy, -1, -1, 0, {I, 1}, {S, 1})},
            {slot(Primitive::Reduce, -1, -1, 0, {S, 0}, {S, 1}, 1, {{0, 0}, {1, 0}}),
             slot(Primitive::Nop, -1, -1, 0, {}, {}, 1, {{1, 0}}), slot(Primitive::Copy, -1, -1, 0, {S, 1}, {O, 0})}};
  Plan p = plan(Collective::AllReduce, 1, 2, 2, tbs);
  p.in_place = false;
  p.scratch_chunks = 2;
  MscclProgram m = plan_to_msccl(p);
  const MscclThreadBlock& tb = m.gpus[0].tbs[2];
  // nop for the second dependency, then the reduce with the first; the plan's nop and the
  // copy after it: MSCCL folds a nop into the next step, which must then wait too, so the
  // copy takes the nop's dependency over.
  ASSERT_EQ(tb.steps.size(), 3u);
  EXPECT_EQ(tb.steps[0].type, MscclStepType::Nop);
  EXPECT_EQ(tb.steps[0].depid, 1);
  EXPECT_EQ(tb.steps[1].type, MscclStepType::Reduce);
  EXPECT_EQ(tb.steps[1].depid, 0);
  EXPECT_EQ(tb.steps[2].type, MscclStepType::Copy);
  EXPECT_EQ(tb.steps[2].depid, 1);
  EXPECT_TRUE(m.gpus[0].tbs[0].steps[0].hasdep);
  EXPECT_TRUE(m.gpus[0].tbs[1].steps[0].hasdep);
  MscclImport back = import_msccl(write_msccl_program(m), "x.xml");
  EXPECT_EQ(back.algorithm.transfers.size(), 4u);
}

TEST(MscclExport, InstancesRefineChunks) {
  // AllGather on 2 ranks, each link driven by 2 instances on channels 0 and 1.
  std::vector<std::vector<std::vector<Slot>>> tbs(2);
  for (int r = 0; r < 2; ++r) {
    int peer = 1 - r;
    for (int k = 0; k < 2; ++k) {
      Slot s = slot(Primitive::Send, peer, -1, k, {O, r}, {});
      s.instance = k;
      s.instances = 2;
      Slot v = slot(Primitive::Recv, -1, peer, k, {}, {O, peer});
      v.instance = k;
      v.instances = 2;
      tbs[static_cast<size_t>(r)].push_back({s, v});
    }
  }
  Plan p = plan(Collective::AllGather, 2, 1, 2, tbs);
  MscclProgram m = plan_to_msccl(p);
  EXPECT_EQ(m.nchunksperloop, 4);
  EXPECT_EQ(m.nchannels, 2);
  EXPECT_EQ(m.gpus[0].o_chunks, 4);
  EXPECT_EQ(m.gpus[0].tbs[1].steps[0].srcoff, 1);  // instance 1 of chunk 0: refined chunk 1
  EXPECT_EQ(m.gpus[1].tbs[1].steps[0].srcoff, 3);
  Algorithm a = import_msccl(write_msccl_program(m), "x.xml").algorithm;
  EXPECT_EQ(a.input_chunks, 2);
  EXPECT_EQ(a.output_chunks, 4);
  EXPECT_EQ(a.transfers, (std::vector<Transfer>{T(0, O, 0, 1, O, 0, TransferOp::Copy, 0), T(0, O, 1, 1, O, 1, TransferOp::Copy, 0),
                                                T(1, O, 2, 0, O, 2, TransferOp::Copy, 0), T(1, O, 3, 0, O, 3, TransferOp::Copy, 0)}));
}

TEST(MscclExport, LargeStepsAreCutToMscclsLimit) {
  std::vector<std::vector<std::vector<Slot>>> tbs(2);
  tbs[0] = {{slot(Primitive::Send, 1, -1, 0, {I, 0}, {}, 100)}};
  tbs[1] = {{slot(Primitive::Recv, -1, 0, 0, {}, {I, 0}, 100)}};
  Plan p = plan(Collective::AllReduce, 2, 100, 100, tbs);
  MscclProgram m = plan_to_msccl(p);
  ASSERT_EQ(m.gpus[0].tbs[0].steps.size(), 2u);
  EXPECT_EQ(m.gpus[0].tbs[0].steps[0].cnt, 64);
  EXPECT_EQ(m.gpus[0].tbs[0].steps[1].cnt, 36);
  EXPECT_EQ(m.gpus[0].tbs[0].steps[1].srcoff, 64);
  EXPECT_EQ(m.gpus[1].tbs[0].steps[1].dstoff, 64);
  Algorithm a = import_msccl(write_msccl_program(m), "x.xml").algorithm;
  EXPECT_EQ(a.transfers, (std::vector<Transfer>{T(0, I, 0, 1, I, 0, TransferOp::Copy, 0, 64),
                                                T(0, I, 64, 1, I, 64, TransferOp::Copy, 0, 36)}));
}

TEST(MscclExport, RefusesWhatMscclCannotExpress) {
  auto expect_invalid = [](const Plan& p, const std::string& words) {
    try {
      plan_to_msccl(p);
      ADD_FAILURE() << "no error; expected '" << words << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  std::vector<std::vector<std::vector<Slot>>> one(1);
  one[0] = {{slot(Primitive::Copy, -1, -1, 0, {I, 0}, {O, 0})}};
  Plan custom = plan(Collective::Custom, 1, 1, 1, one);
  MscclProgram m = plan_to_msccl(custom);
  EXPECT_EQ(m.coll, "custom");
  EXPECT_EQ(m.nchunksperloop, 1);
  EXPECT_EQ(import_msccl(write_msccl_program(m), "custom.xml").algorithm.collective, Collective::Custom);
  expect_invalid(plan(Collective::Custom, 1, 1, 2, one), "this plan has 1 input and 2 output chunks");

  std::vector<std::vector<std::vector<Slot>>> twice(2);
  twice[0] = {{slot(Primitive::Send, 1, -1, 0, {I, 0}, {})}, {slot(Primitive::Send, 1, -1, 0, {I, 1}, {})}};
  twice[1] = {{slot(Primitive::Recv, -1, 0, 0, {}, {I, 0}), slot(Primitive::Recv, -1, 0, 0, {}, {I, 1})}};
  expect_invalid(plan(Collective::AllReduce, 2, 2, 2, twice), "rank 0 sends to rank 1 on channel 0 from two thread blocks");

  std::vector<std::vector<std::vector<Slot>>> fine(2);
  Slot a = slot(Primitive::Send, 1, -1, 0, {I, 0}, {});
  a.instances = 9;
  Slot b = slot(Primitive::Send, 1, -1, 1, {I, 0}, {});
  b.instances = 8;
  fine[0] = {{a}, {b}};
  fine[1] = {{}};
  expect_invalid(plan(Collective::AllReduce, 2, 1, 1, fine), "more than 64 parts");

  std::vector<std::vector<std::vector<Slot>>> nopeer(1);
  nopeer[0] = {{slot(Primitive::Send, -1, -1, 0, {I, 0}, {})}};
  expect_invalid(plan(Collective::AllReduce, 1, 1, 1, nopeer), "rank 0, thread block 0, slot 0: a sending slot needs a send peer");
  nopeer[0] = {{slot(Primitive::Recv, -1, 5, 0, {}, {I, 0})}};
  expect_invalid(plan(Collective::AllReduce, 1, 1, 1, nopeer), "a receiving slot needs a receive peer in range, not 5");

  std::vector<std::vector<std::vector<Slot>>> baddep(1);
  baddep[0] = {{slot(Primitive::Copy, -1, -1, 0, {I, 0}, {O, 0}, 1, {{3, 0}})}};
  expect_invalid(plan(Collective::AllReduce, 1, 1, 1, baddep), "names thread block 3, slot 0, which does not exist");

  baddep[0] = {{slot(Primitive::Copy, -1, -1, 0, {I, 0}, {O, 0}, 0)}};
  expect_invalid(plan(Collective::AllReduce, 1, 1, 1, baddep), "of 0 chunks cannot be exported");

  Plan short_plan = plan(Collective::AllReduce, 1, 1, 1, one);
  short_plan.num_ranks = 2;
  expect_invalid(short_plan, "the plan has 1 rank plans for 2 ranks");
}

TEST(MscclExport, OptionsAndHeader) {
  std::vector<std::vector<std::vector<Slot>>> one(1);
  one[0] = {{slot(Primitive::Copy, -1, -1, 3, {I, 0}, {S, 0})}};
  Plan p = plan(Collective::ReduceScatter, 1, 1, 1, one);
  p.protocol = "LL128";
  p.in_place = false;
  p.scratch_chunks = 1;
  MscclProgram m = plan_to_msccl(p, {"renamed", 512, 4096});
  EXPECT_EQ(m.name, "renamed");
  EXPECT_EQ(m.coll, "reducescatter");
  EXPECT_EQ(m.proto, "LL128");
  EXPECT_FALSE(m.inplace);
  EXPECT_TRUE(m.outofplace);
  EXPECT_EQ(m.min_bytes, 512);
  EXPECT_EQ(m.max_bytes, 4096);
  EXPECT_EQ(m.nchannels, 4);  // a local block keeps its slots' channel
  EXPECT_EQ(m.gpus[0].s_chunks, 1);
  EXPECT_EQ(m.root, -1);  // only broadcast and reduce name a root
  Plan bc = plan(Collective::Broadcast, 1, 1, 1, one);
  bc.root = 0;
  EXPECT_EQ(plan_to_msccl(bc).root, 0);
  EXPECT_NE(export_msccl(bc).find(" root=\"0\">"), std::string::npos);
  p.protocol = "weird";
  EXPECT_EQ(plan_to_msccl(p).proto, "Simple");
  EXPECT_EQ(plan_to_msccl(p).name, "exported");
}

}  // namespace
}  // namespace weft
