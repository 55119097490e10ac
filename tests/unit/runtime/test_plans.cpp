// The hand-built plans and the executor's geometry, checked on the CPU emulator: every
// collective, rank counts 1 to 5, in place and out of place, counts that do not divide,
// several instances, tiny staging slots (many micro-batches) and shallow FIFOs, against
// the host reference, element by element.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "plan/hand_built.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "exec/plan_emulator.hpp"
#include "exec/plan_lowering.hpp"
#include "util/error.hpp"
#include "weft/weft.h"

namespace weft {
namespace {

struct Case {
  Collective c;
  std::string algo;
  int R;
  bool in_place;
  size_t count;
  int instances;
  int dtype;
  int op;
  uint64_t cap;
  int depth;
  int root;
  exec::Protocol protocol = exec::kSimple;  ///< LL128: `cap` is the slot's bytes on the wire
};

std::string describe(const Case& k) {
  return std::string(to_string(k.c)) + "/" + k.algo + " R=" + std::to_string(k.R) + (k.in_place ? " in-place" : " out-of-place") +
         " count=" + std::to_string(k.count) + " instances=" + std::to_string(k.instances) + " " +
         host::dtype_name(k.dtype) + " " + host::op_name(k.op) + " cap=" + std::to_string(k.cap) +
         " depth=" + std::to_string(k.depth) + " root=" + std::to_string(k.root) +
         (k.protocol == exec::kLL128 ? " LL128" : "");
}

/// Runs one case through lowering, geometry and the emulator; returns "" or what went wrong.
std::string run_case(const Case& k) {
  HandBuiltSpec spec;
  spec.algorithm = k.algo;
  spec.instances = k.instances;
  spec.in_place = k.in_place;
  spec.root = k.root;
  Plan plan = hand_built_plan(k.c, k.R, spec);
  LoweredPlan lp = lower_plan(plan, k.R, 64);
  const size_t esz = host::dtype_size(k.dtype);
  exec::Geometry g = make_geometry(lp, k.count, static_cast<uint32_t>(esz), k.cap, 0, k.protocol);

  const size_t ns = host::send_elems(k.c, k.count, k.R), nr = host::recv_elems(k.c, k.count, k.R);
  std::vector<std::vector<uint8_t>> sends(k.R), untouched(k.R);
  std::vector<std::vector<uint8_t>> mem_in(k.R), mem_out(k.R), mem_scratch(k.R);
  std::vector<EmuBuffers> bufs(k.R);
  std::vector<uint8_t*> out_view(k.R);
  for (int r = 0; r < k.R; ++r) {
    sends[r].resize(ns * esz);
    host::fill_random(k.dtype, k.op, sends[r].data(), ns, 1000 + r);
    mem_scratch[r].assign(scratch_bytes(lp, g) + 16, 0xAB);
    bufs[r].buf[2] = mem_scratch[r].data();
    if (!k.in_place) {
      mem_in[r] = sends[r];
      mem_out[r].assign(nr * esz, 0xEE);  // poison
      bufs[r].buf[0] = mem_in[r].data();
      bufs[r].buf[1] = mem_out[r].data();
      out_view[r] = mem_out[r].data();
      untouched[r] = mem_out[r];
    } else if (k.c == Collective::AllGather) {
      mem_out[r].assign(nr * esz, 0xEE);
      std::memcpy(mem_out[r].data() + r * k.count * esz, sends[r].data(), ns * esz);
      bufs[r].buf[1] = mem_out[r].data();
      bufs[r].buf[0] = mem_out[r].data() + r * k.count * esz;
      out_view[r] = mem_out[r].data();
    } else if (k.c == Collective::ReduceScatter) {
      mem_in[r] = sends[r];
      bufs[r].buf[0] = mem_in[r].data();
      bufs[r].buf[1] = mem_in[r].data() + r * k.count * esz;
      out_view[r] = bufs[r].buf[1];
    } else {
      mem_in[r] = sends[r];
      bufs[r].buf[0] = bufs[r].buf[1] = mem_in[r].data();
      out_view[r] = mem_in[r].data();
      untouched[r] = sends[r];
    }
  }
  EmuResult res = emulate(lp, g, k.depth, bufs, k.dtype, k.op, k.protocol);
  if (!res.ok) return res.error;
  auto expect = host::reference(k.c, k.dtype, k.op, k.root, k.count, sends, untouched);
  for (int r = 0; r < k.R; ++r) {
    std::vector<uint8_t> got(out_view[r], out_view[r] + nr * esz);
    if (k.op == weftAvg && (k.c == Collective::AllReduce || k.c == Collective::ReduceScatter ||
                            (k.c == Collective::Reduce && r == k.root)))
      host::divide(k.dtype, got.data(), nr, k.R);
    for (size_t i = 0; i < nr * esz; ++i)
      if (got[i] != expect[r][i])
        return "rank " + std::to_string(r) + ": byte " + std::to_string(i) + " (element " + std::to_string(i / esz) +
               ") is " + std::to_string(got[i]) + ", expected " + std::to_string(expect[r][i]) + " (" +
               std::to_string(g.nmb) + " micro-batches)";
  }
  return "";
}

const Collective kAll[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                           Collective::AllToAll, Collective::Broadcast, Collective::Reduce};

TEST(BuiltinPlans, EveryCollectiveAlgorithmShapeMatchesTheReference) {
  int cases = 0;
  for (Collective c : kAll)
    for (const std::string& algo : hand_built_algorithms(c))
      for (int R : {1, 2, 3, 5})
        for (bool in_place : {false, true})
          for (size_t count : {1ul, 7ul, 100ul, 1027ul})
            for (int instances : {1, 3}) {
              Case k{c, algo, R, in_place, count, instances, weftFloat32, weftSum, 256, 2, R > 2 ? 2 : R - 1};
              std::string err = run_case(k);
              EXPECT_EQ(err, "") << describe(k);
              ++cases;
            }
  EXPECT_GT(cases, 300);
}

TEST(BuiltinPlans, EveryTypeAndOp) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce})
    for (int dtype = 0; dtype < weftNumTypes; ++dtype)
      for (int op = 0; op < weftNumOps; ++op)
        for (bool in_place : {false, true}) {
          Case k{c, hand_built_algorithms(c)[0], 3, in_place, 333, 2, dtype, op, 512, 3, 1};
          EXPECT_EQ(run_case(k), "") << describe(k);
        }
}

TEST(BuiltinPlans, LargeCountsWithRealisticSlots) {
  for (Collective c : kAll) {
    Case k{c, hand_built_algorithms(c)[0], 2, false, (1u << 18) + 3, 4, weftBfloat16, weftSum, 64 << 10, 4, 0};
    EXPECT_EQ(run_case(k), "") << describe(k);
  }
}

// A fused ring step receives and sends at once, so with one-message FIFOs every rank waits
// for its successor: the runtime's FIFOs hold at least two messages (WEFT_FIFO_DEPTH >= 2).
TEST(BuiltinPlans, TwoMessageFifosSuffice) {
  for (Collective c : kAll)
    for (const std::string& algo : hand_built_algorithms(c)) {
      Case k{c, algo, 4, false, 999, 2, weftInt32, weftMax, 128, 2, 3};
      EXPECT_EQ(run_case(k), "") << describe(k);
    }
}

// LL128: every primitive of every hand-built plan (send, recv, copy, reduce and the fused
// rcs, rrc, rrcs, rrs), with messages as the interpreter's lines: slots of one, two and
// three lines per piece, so pieces end inside a line and chunk ends send padding lines.
TEST(BuiltinPlansLL128, EveryCollectiveAlgorithmShapeMatchesTheReference) {
  int cases = 0;
  for (Collective c : kAll)
    for (const std::string& algo : hand_built_algorithms(c))
      for (int R : {2, 3, 5})
        for (bool in_place : {false, true})
          for (size_t count : {1ul, 7ul, 100ul, 1027ul})
            for (uint64_t lines : {1u, 3u}) {
              Case k{c, algo, R, in_place, count, lines == 1 ? 1 : 3, weftFloat32, weftSum, lines * 128 * 4, 2,
                     R > 2 ? 2 : R - 1, exec::kLL128};
              EXPECT_EQ(run_case(k), "") << describe(k);
              ++cases;
            }
  EXPECT_GT(cases, 200);
}

TEST(BuiltinPlansLL128, EveryTypeAndOp) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::Reduce})
    for (int dtype = 0; dtype < weftNumTypes; ++dtype)
      for (int op = 0; op < weftNumOps; ++op)
        for (bool in_place : {false, true}) {
          Case k{c, hand_built_algorithms(c)[0], 3, in_place, 333, 2, dtype, op, 1024, 3, 1, exec::kLL128};
          EXPECT_EQ(run_case(k), "") << describe(k);
        }
}

TEST(BuiltinPlansLL128, LargeCountsWithRealisticSlots) {
  for (Collective c : kAll) {
    Case k{c, hand_built_algorithms(c)[0], 2, false, (1u << 18) + 3, 4, weftBfloat16, weftSum, 512 << 10, 4, 0,
           exec::kLL128};
    EXPECT_EQ(run_case(k), "") << describe(k);
  }
}

// Each message's pieces take whole lines (120 data bytes each) and still fit the slot.
TEST(Geometry, LL128PiecesFitTheirSlot) {
  for (Collective c : kAll)
    for (int instances : {1, 3, 8}) {
      HandBuiltSpec spec;
      spec.algorithm = hand_built_algorithms(c)[0];
      spec.instances = instances;
      LoweredPlan lp = lower_plan(hand_built_plan(c, 4, spec), 4, 64);
      for (uint64_t cap : {4096ull, 65536ull, 512ull << 10})
        for (uint32_t esz : {1u, 2u, 4u, 8u})
          for (uint64_t n : {1ull, 999ull, 1ull << 22}) {
            exec::Geometry g = make_geometry(lp, n, esz, cap, 0, exec::kLL128);
            for (const auto& [count, inst] : lp.comm_shapes) {
              const uint64_t part = exec::part_elems(g, inst);
              EXPECT_LE(static_cast<uint64_t>(count) * device::ll128_buffer_bytes(part * esz), cap)
                  << to_string(c) << " cap " << cap << " esz " << esz << " n " << n << " count " << count;
            }
          }
    }
  EXPECT_EQ(protocol_code("LL128"), exec::kLL128);
  EXPECT_EQ(protocol_code("LL"), exec::kLL);
  EXPECT_EQ(protocol_code("Simple"), exec::kSimple);
  EXPECT_THROW(protocol_code("ll128"), Error);
}

TEST(Geometry, PartsAreAlignedAndCoverTheChunk) {
  exec::Geometry g;
  g.elem_size = 2;
  g.n = 1000;
  g.stride = 1000;
  g.mb = 304;  // make_geometry keeps micro-batches 16-byte multiples
  g.nmb = 4;
  std::vector<int> hits(1000, 0);
  for (uint32_t m = 0; m < g.nmb; ++m)
    for (int i = 0; i < 3; ++i) {
      exec::Range r = exec::piece_range(g, m, i, 3);
      if (r.hi > r.lo) {
        EXPECT_EQ(r.lo % 8, 0u) << "part starts off 16 bytes";
      }
      for (uint64_t x = r.lo; x < r.hi; ++x) ++hits[x];
    }
  for (int h : hits) EXPECT_EQ(h, 1);
}

// The compiler gives a slot dependencies only on the instances of another slot whose fractions
// [i/m, (i+1)/m) overlap its own (docs/plan-format.md, "Instances"): the executor's parts must
// overlap nowhere else, for any two instance counts, and fit part_elems. (Parts of ceil(mb/m)
// each broke this: part 13 of 21 reached into part 2 of 3, and the emulator computed wrong
// data for plans whose reductions had other instance counts than the receives they read.)
TEST(Geometry, PartsOfDifferentInstanceCountsOverlapOnlyWhereTheirFractionsDo) {
  for (uint32_t esz : {1u, 2u, 4u, 16u}) {
    const uint64_t align = esz >= 16 ? 1 : 16 / esz;
    for (uint64_t mb : {align, 7 * align, 64 * align, 1000 * align}) {
      exec::Geometry g;
      g.elem_size = esz;
      g.mb = mb;
      g.stride = 2 * mb;
      g.nmb = 2;
      for (int m = 1; m <= 24; ++m) {
        uint64_t covered = 0;
        for (int i = 0; i < m; ++i) {
          const exec::Range a = exec::piece_range(g, 1, i, m);
          EXPECT_EQ(a.lo, mb + covered);
          EXPECT_EQ(a.lo % align, 0u);
          EXPECT_LE(a.hi - a.lo, exec::part_elems(g, m));
          covered += a.hi - a.lo;
          for (int n = 1; n <= 24; ++n)
            for (int j = 0; j < n; ++j) {
              const exec::Range b = exec::piece_range(g, 1, j, n);
              const bool bytes = a.lo < b.hi && b.lo < a.hi;
              const bool fractions = i * n < (j + 1) * m && j * m < (i + 1) * n;
              if (bytes) EXPECT_TRUE(fractions) << "esz " << esz << " mb " << mb << ": part " << i << " of " << m
                                                << " and part " << j << " of " << n;
            }
        }
        EXPECT_EQ(covered, mb) << "m " << m;
      }
    }
  }
}

TEST(Lowering, RejectsMismatchedConnections) {
  HandBuiltSpec spec;
  Plan p = hand_built_plan(Collective::AllReduce, 2, spec);
  p.ranks[1].tbs[0].slots[0].count = 2;  // sender of rank 1 moves 2 chunks, rank 0 expects 1
  try {
    lower_plan(p, 2, 8);
    FAIL() << "mismatch accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("connection 1->0"), std::string::npos) << e.what();
  }
}

TEST(Lowering, RejectsDependencyOnALaterSlotOfTheSameBlock) {
  Plan p = hand_built_plan(Collective::AllReduce, 2, HandBuiltSpec{});
  p.ranks[0].tbs[0].slots[0].deps.push_back({0, 1});
  EXPECT_THROW(lower_plan(p, 2, 8), Error);
}

TEST(Lowering, RejectsTooManyConnections) {
  HandBuiltSpec spec;
  spec.instances = 9;
  Plan p = hand_built_plan(Collective::AllReduce, 2, spec);
  EXPECT_THROW(lower_plan(p, 2, 8), Error);
  EXPECT_NO_THROW(lower_plan(p, 2, 9));
}

TEST(Emulator, DetectsDeadlock) {
  // Task-level ring with one thread block: both ranks send every micro-batch before
  // receiving any, which deadlocks once the FIFOs fill.
  Plan p = hand_built_plan(Collective::AllReduce, 2, HandBuiltSpec{});
  p.execution = ExecutionModel::Task;
  LoweredPlan lp = lower_plan(p, 2, 8);
  exec::Geometry g = make_geometry(lp, 4096, 4, 256);
  ASSERT_GT(g.nmb, 4u);
  std::vector<std::vector<uint8_t>> mem(2, std::vector<uint8_t>(4096 * 4));
  std::vector<EmuBuffers> bufs(2);
  for (int r = 0; r < 2; ++r) bufs[r].buf[0] = bufs[r].buf[1] = mem[r].data();
  EmuResult res = emulate(lp, g, 2, bufs, weftFloat32, weftSum);
  EXPECT_FALSE(res.ok);
  EXPECT_FALSE(res.deadlock.ok) << res.error;
  EXPECT_EQ(res.deadlock.message, res.error);
  EXPECT_FALSE(res.deadlock.cycle.empty());
}

TEST(HostReduce, HalfAndBfloatConversions) {
  EXPECT_EQ(host::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(host::float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(host::float_to_half(0.1f), 0x2e66);
  EXPECT_EQ(host::float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(host::float_to_half(1e-7f), 0x0002);
  EXPECT_EQ(host::float_to_half(1e6f), 0x7c00);
  EXPECT_FLOAT_EQ(host::half_to_float(0x3c00), 1.0f);
  EXPECT_FLOAT_EQ(host::half_to_float(0x0001), 5.960464477539063e-08f);
  for (int v = -2048; v <= 2048; ++v) EXPECT_EQ(host::half_to_float(host::float_to_half(float(v))), float(v));
  EXPECT_EQ(host::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(host::float_to_bf16(1.00390625f), 0x3f80);  // tie to even
  EXPECT_EQ(host::float_to_bf16(1.01171875f), 0x3f82);  // tie rounds up to even
  EXPECT_FLOAT_EQ(host::bf16_to_float(0xc000), -2.0f);
}

}  // namespace
}  // namespace weft
