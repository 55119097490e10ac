// Generated kernels' source (src/gen/codegen.hpp) and its NVRTC compile: every plan the
// default selection table yields at 2, 3, 4 and 8 ranks, Simple and LL, compiles for sm_90;
// every element type and reduction compiles; the first compile of each plan is timed and
// printed (the target is 2 s; the time is printed, never asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <tuple>

#include "gen/codegen.hpp"
#include "gen_test_util.hpp"
#include "tune/selection.hpp"

namespace weft::gen {
namespace {

using test::lowered;

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(GenCodegen, OneCasePerBlockAndOneCallPerSlot) {
  const LoweredPlan lp = lowered(Collective::AllReduce, 4, "ring_allreduce", "Simple", 2);
  for (int r = 0; r < 4; ++r) {
    const LoweredRank& lr = lp.ranks[static_cast<size_t>(r)];
    const std::string src = generate_source(lp, KernelSpec{r, exec::kSimple, 7, 0});
    size_t blocks = 0, slots = 0;
    for (const exec::DevTB& tb : lr.tbs) {
      blocks += tb.nslots > 0;
      slots += static_cast<size_t>(tb.nslots);
    }
    EXPECT_EQ(count_of(src, "    case "), blocks) << src;
    EXPECT_EQ(count_of(src, "weft::gen::run<"), slots) << src;
    EXPECT_NE(src.find(std::string("extern \"C\" __global__")), std::string::npos);
    EXPECT_NE(src.find("using T = float;"), std::string::npos);
    // Each slot's shape is a template constant, its indices immediate arguments.
    for (const exec::DevSlot& s : lr.slots) {
      const std::string call = "run<T, kProto, kOp, " + std::to_string(s.prim) + ", " + std::to_string(s.src_buf) +
                               ", " + std::to_string(s.dst_buf) + ", " + std::to_string(s.flags) + ">(iv, sh, " +
                               std::to_string(s.send_conn) + ", " + std::to_string(s.recv_conn) + ", " +
                               std::to_string(s.src_index) + ", " + std::to_string(s.dst_index) + ", ";
      EXPECT_NE(src.find(call), std::string::npos) << call << "\n" << src;
    }
  }
}

TEST(GenCodegen, AlgorithmLevelLoopsMicroBatchesOutside) {
  LoweredPlan lp = lowered(Collective::AllReduce, 2, "ring_allreduce", "Simple", 1);
  lp.plan.execution = ExecutionModel::Algorithm;
  const std::string src = generate_source(lp, KernelSpec{0, exec::kSimple, 7, 0});
  // One loop over windows of micro-batches per block (exec::InvocationOrder), around all its
  // slots, each slot over the window [k, k1).
  size_t blocks = 0;
  for (const exec::DevTB& tb : lp.ranks[0].tbs) blocks += tb.nslots > 0;
  EXPECT_EQ(count_of(src, "for (uint32_t k = 0; k < nmb; k += win) {"), blocks) << src;
  EXPECT_EQ(count_of(src, "weft::exec::order_window(false, nmb, a.mb_window)"), blocks) << src;
  EXPECT_NE(src.find(", k, k1, par)"), std::string::npos) << src;
}

TEST(GenCodegen, AvgIsGeneratedAsSumAndTypesAreNamed) {
  const LoweredPlan lp = lowered(Collective::AllReduce, 2, "ring_allreduce", "Simple", 1);
  EXPECT_NE(generate_source(lp, KernelSpec{0, exec::kSimple, 7, 4}).find("constexpr int kOp = 0;"), std::string::npos);
  EXPECT_NE(generate_source(lp, KernelSpec{0, exec::kLL, 6, 2}).find("using T = __half;"), std::string::npos);
  EXPECT_NE(generate_source(lp, KernelSpec{0, exec::kLL, 9, 3}).find("using T = __nv_bfloat16;"), std::string::npos);
  EXPECT_NE(generate_source(lp, KernelSpec{0, exec::kLL, 9, 3}).find("constexpr int kProto = 1;"), std::string::npos);
}

TEST(GenCodegen, PlansThatReduceNothingShareOneKernelPerElementSize) {
  const LoweredPlan ag = lowered(Collective::AllGather, 2, "ring_allgather", "Simple", 1);
  const LoweredPlan ar = lowered(Collective::AllReduce, 2, "ring_allreduce", "Simple", 1);
  ASSERT_FALSE(ag.has_reduction);
  ASSERT_TRUE(ar.has_reduction);
  auto spec = [](int dtype, int op) { return KernelSpec{0, exec::kSimple, dtype, op}; };
  EXPECT_EQ(generate_source(ag, canonical_spec(ag, spec(7, 2))), generate_source(ag, canonical_spec(ag, spec(2, 0))));
  EXPECT_EQ(generate_source(ag, canonical_spec(ag, spec(9, 0))), generate_source(ag, canonical_spec(ag, spec(6, 1))));
  EXPECT_EQ(generate_source(ag, canonical_spec(ag, spec(8, 0))), generate_source(ag, canonical_spec(ag, spec(4, 0))));
  EXPECT_NE(generate_source(ag, canonical_spec(ag, spec(8, 0))), generate_source(ag, canonical_spec(ag, spec(7, 0))));
  EXPECT_NE(generate_source(ar, canonical_spec(ar, spec(7, 0))), generate_source(ar, canonical_spec(ar, spec(2, 0))));
  EXPECT_NE(generate_source(ar, canonical_spec(ar, spec(7, 0))), generate_source(ar, canonical_spec(ar, spec(7, 2))));
  EXPECT_EQ(generate_source(ar, canonical_spec(ar, spec(7, 4))), generate_source(ar, canonical_spec(ar, spec(7, 0))));
}

TEST(GenCodegen, RejectsWhatItCannotGenerate) {
  const LoweredPlan lp = lowered(Collective::AllReduce, 2, "ring_allreduce", "Simple", 1);
  EXPECT_THROW(generate_source(lp, KernelSpec{2, exec::kSimple, 7, 0}), Error);
  EXPECT_THROW(generate_source(lp, KernelSpec{-1, exec::kSimple, 7, 0}), Error);
  EXPECT_THROW(generate_source(lp, KernelSpec{0, exec::kSimple, 10, 0}), Error);
  EXPECT_THROW(generate_source(lp, KernelSpec{0, exec::kSimple, 7, 5}), Error);
  EXPECT_THROW(generate_source(lp, KernelSpec{0, exec::kLL128, 7, 0}), Error);
}

TEST(GenCodegen, ExecutorSwitch) {
  unsetenv("WEFT_EXECUTOR");
  EXPECT_FALSE(executor_is_gen());
  setenv("WEFT_EXECUTOR", "interp", 1);
  EXPECT_FALSE(executor_is_gen());
  setenv("WEFT_EXECUTOR", "gen", 1);
  EXPECT_TRUE(executor_is_gen());
  setenv("WEFT_EXECUTOR", "jit", 1);
  try {
    executor_is_gen();
    ADD_FAILURE() << "WEFT_EXECUTOR=jit accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither interp nor gen"), std::string::npos) << e.what();
  }
  unsetenv("WEFT_EXECUTOR");
}

TEST(GenCodegen, EmbeddedHeadersCoverTheIncludes) {
  std::set<std::string> names;
  for (const auto& [name, text] : embedded_headers()) names.insert(name);
  for (const char* n : {"gen/gen_kernel.cuh", "exec/executor_kernel.cuh", "exec/exec_plan.hpp", "exec/reduce_ops.cuh",
                        "weft/device/memory_channel.hpp", "cstdint", "type_traits", "cuda_fp16.h", "cuda_bf16.h"})
    EXPECT_TRUE(names.count(n)) << n << " is not embedded";
}

TEST(GenNvrtc, MissingLibraryNamesItAndTheWayAround) {
  try {
    Nvrtc::load({"libnvrtc-weft-test-absent.so.13", "libnvrtc-weft-test-absent.so"});
    ADD_FAILURE() << "an absent library loaded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("libnvrtc-weft-test-absent.so.13"), std::string::npos) << m;
    EXPECT_NE(m.find("NVRTC"), std::string::npos) << m;
    EXPECT_NE(m.find("WEFT_EXECUTOR=interp"), std::string::npos) << m;
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(GenNvrtc, CompileErrorCarriesTheLog) {
  WEFT_REQUIRE_NVRTC(nvrtc);
  try {
    nvrtc->compile("extern \"C\" __global__ void k() { undeclared_thing(); }", "bad.cu", {}, compile_options(90));
    ADD_FAILURE() << "bad source compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

TEST(GenNvrtc, EveryTypeAndReductionCompiles) {
  WEFT_REQUIRE_NVRTC(nvrtc);
  const LoweredPlan lp = lowered(Collective::AllReduce, 2, "ring_allreduce", "Simple", 1);
  for (int dtype = 0; dtype < 10; ++dtype)
    for (int op : dtype == 7 ? std::vector<int>{0, 1, 2, 3, 4} : std::vector<int>{dtype % 4})
      for (uint8_t proto : {exec::kSimple, exec::kLL}) {
        SCOPED_TRACE("type " + std::to_string(dtype) + ", op " + std::to_string(op) + ", protocol " +
                     std::to_string(proto));
        const std::string src = generate_source(lp, KernelSpec{0, proto, dtype, op});
        EXPECT_NO_THROW(EXPECT_GT(nvrtc->compile(src, "t.cu", embedded_headers(), compile_options(90)).size(), 0u));
      }
}

/// Every plan the default table yields (every collective, 2, 3, 4 and 8 ranks, in and out of
/// place, the table's sizes), for Simple and LL, compiles for sm_90; rank 0's kernel of each
/// is compiled, every rank's source generated.
TEST(GenNvrtc, EveryDefaultTablePlanCompilesForSm90) {
  WEFT_REQUIRE_NVRTC(nvrtc);
  const std::vector<Collective> all = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                       Collective::Broadcast, Collective::Reduce,    Collective::AllToAll};
  const std::vector<uint64_t> sizes = {4 << 10, 128 << 10, 1 << 20, 4 << 20, 256 << 20};
  std::set<std::tuple<int, std::string, int, bool, int, std::string, std::string>> seen;
  std::set<std::string> algorithms;
  int compiled = 0;
  double total_s = 0, worst_s = 0;
  std::string worst;
  std::printf("first compile per plan (NVRTC %s, sm_90, float sum, rank 0):\n", nvrtc->version().c_str());
  for (Collective c : all)
    for (int R : {2, 3, 4, 8})
      for (bool in_place : {false, true})
        for (uint64_t b : sizes) {
          const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
          if (rooted && in_place) continue;
          const Choice ch = default_selection_table().choose(c, b, R, in_place, true);
          if (!seen.insert({static_cast<int>(c), ch.algorithm, R, in_place, ch.instances, ch.scheduler, ch.allocator})
                   .second)
            continue;
          algorithms.insert(ch.algorithm);
          for (const char* proto : {"Simple", "LL"}) {
            const std::string what = std::string(to_string(c)) + " " + ch.algorithm + " R=" + std::to_string(R) +
                                     (in_place ? " in place" : "") + " x" + std::to_string(ch.instances) + " " + proto;
            SCOPED_TRACE(what);
            const LoweredPlan lp = lower_plan(make_plan(c, R, ch.algorithm, proto, ch.instances, in_place, 0,
                                                        kDefaultFifoDepth, ch.scheduler, ch.allocator),
                                              R, 32);
            const uint8_t p = std::string(proto) == "LL" ? exec::kLL : exec::kSimple;
            for (int r = 1; r < R; ++r) EXPECT_FALSE(generate_source(lp, KernelSpec{r, p, 7, 0}).empty());
            const std::string src = generate_source(lp, KernelSpec{0, p, 7, 0});
            const auto t0 = std::chrono::steady_clock::now();
            std::vector<char> cubin;
            EXPECT_NO_THROW(cubin = nvrtc->compile(src, "plan.cu", embedded_headers(), compile_options(90)));
            const double s = seconds_since(t0);
            EXPECT_GT(cubin.size(), 0u);
            ++compiled;
            total_s += s;
            if (s > worst_s) worst_s = s, worst = what;
            std::printf("  %-62s %3zu slots %6.3f s%s\n", what.c_str(), lp.ranks[0].slots.size(), s,
                        s > 2.0 ? "  (over the 2 s target)" : "");
          }
        }
  std::printf("%d plans compiled: mean %.3f s, slowest %.3f s (%s)\n", compiled, total_s / std::max(1, compiled),
              worst_s, worst.c_str());
  for (const char* prefix : {"ring_", "peerwise_", "allpairs", "pipe_", "alltoall_direct"}) {
    bool found = false;
    for (const std::string& a : algorithms) found |= a.rfind(prefix, 0) == 0;
    EXPECT_TRUE(found) << "no default-table plan named " << prefix << "*";
  }
}

}  // namespace
}  // namespace weft::gen
