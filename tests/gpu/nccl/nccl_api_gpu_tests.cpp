// The NCCL-compatible library on 2 GPUs, for what nccl-tests and PyTorch do not reach:
// initialization deferred to ncclGroupEnd, ncclCommInitAll, ncclCommSplit, PreMulSum with
// host and device scalars, Gather/Scatter, fp8 (moved natively, reduced through
// WEFT_NCCL_FALLBACK when set), and the calls weft refuses; memory windows, CTA policies and
// ncclCommShrink in nccl_window_gpu_tests.cpp (the same program). One process, one thread per rank
// where a call blocks on the host, and every collective call made on every rank (so each test
// is a correct NCCL program, and with NCCL's library it would fail, not hang). Built against
// weft's nccl.h and linked to libweft_nccl.so (soname libnccl.so.2).
// main() first checks that the library answering NCCL calls is weft's (exit 1 otherwise: a
// pass on another library proves nothing), then exits 77 without a GPU (with fewer GPUs than ranks, ranks share them). Every test runs
// under a watchdog (WEFT_NCCL_TEST_WATCHDOG_S, default 30 s) that ends the process with exit
// 124 and the test's name when it is exceeded: a hang is reported, never waited out.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "weft/nccl.h"

#include "nccl_gpu_helpers.hpp"

using namespace nccl_gpu;

TEST(NcclApiGpu, InitAllAndAllReduce) {
  Comms k;
  k.init_all();
  int n = 0, rank = -1, dev = -1;
  NCCL_OK(ncclCommCount(k.c[1], &n));
  NCCL_OK(ncclCommUserRank(k.c[1], &rank));
  NCCL_OK(ncclCommCuDevice(k.c[1], &dev));
  EXPECT_EQ(n, 2);
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(dev, dev_of(1));
  const size_t count = (1 << 20) + 3;
  void* buf[kRanks];
  for (int r = 0; r < kRanks; ++r) buf[r] = to_device(r, pattern(r, count).data(), count * 4);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclAllReduce(buf[r], buf[r], count, ncclFloat, ncclSum, k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    auto got = to_host<float>(r, buf[r], count);
    auto a = pattern(0, count), b = pattern(1, count);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += got[i] != a[i] + b[i];
    EXPECT_EQ(bad, 0u) << "rank " << r;
    cudaFree(buf[r]);
  }
}

// NCCL's documented behaviour: ncclCommInitRank inside ncclGroupStart/End initializes at
// ncclGroupEnd, after which the communicator is usable. With a non-blocking config,
// ncclCommGetAsyncError says ncclInProgress until the initialization is complete, and using
// the communicator before that is ncclInvalidArgument (NCCL's "used before the previous
// operation returned ncclSuccess"); ncclGroupEnd may itself return ncclInProgress, and the
// caller polls. For a blocking communicator NCCL promises nothing before ncclGroupEnd, so
// only the state after it is checked.
TEST(NcclApiGpu, InitInsideAGroupHappensAtGroupEnd) {
  for (int blocking = 0; blocking <= 1; ++blocking) {
    SCOPED_TRACE(blocking ? "blocking" : "non-blocking");
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    ncclComm_t c[kRanks] = {};
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = blocking;
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < kRanks; ++r) {
      CUDA_OK(cudaSetDevice(dev_of(r)));
      ncclResult_t res = ncclCommInitRankConfig(&c[r], kRanks, id, r, &config);
      EXPECT_TRUE(res == ncclSuccess || (!blocking && res == ncclInProgress)) << res << ": " << ncclGetLastError(nullptr);
      ASSERT_NE(c[r], nullptr);
    }
    ncclResult_t state = ncclSuccess;
    if (!blocking) {
      NCCL_OK(ncclCommGetAsyncError(c[0], &state));
      EXPECT_EQ(state, ncclInProgress);
      int n = 0;
      EXPECT_EQ(ncclCommCount(c[0], &n), ncclInvalidArgument);
    }
    ncclResult_t end = ncclGroupEnd();
    ASSERT_TRUE(end == ncclSuccess || (!blocking && end == ncclInProgress)) << end << ": " << ncclGetLastError(nullptr);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (int r = 0; r < kRanks; ++r) {
      do {
        NCCL_OK(ncclCommGetAsyncError(c[r], &state));
        if (state != ncclInProgress) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } while (std::chrono::steady_clock::now() < deadline);
      EXPECT_EQ(state, ncclSuccess) << "rank " << r;
      int rank = -1, n = 0;
      NCCL_OK(ncclCommUserRank(c[r], &rank));
      NCCL_OK(ncclCommCount(c[r], &n));
      EXPECT_EQ(rank, r);
      EXPECT_EQ(n, kRanks);
    }
    for (int r = 0; r < kRanks; ++r) NCCL_OK(ncclCommDestroy(c[r]));
  }
}

TEST(NcclApiGpu, PreMulSumWithHostAndDeviceScalars) {
  Comms k;
  k.init_all();
  const size_t count = 100003;
  void* in[kRanks];
  void* out[kRanks];
  void* dscalar[kRanks];
  ncclRedOp_t hop[kRanks], dop[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    in[r] = to_device(r, pattern(r, count).data(), count * 4);
    out[r] = to_device(r, pattern(9, count).data(), count * 4);
    float hs = static_cast<float>(r + 2), ds = static_cast<float>(3 * r + 1);
    dscalar[r] = to_device(r, &ds, 4);
    NCCL_OK(ncclRedOpCreatePreMulSum(&hop[r], &hs, ncclFloat, ncclScalarHostImmediate, k.c[r]));
    NCCL_OK(ncclRedOpCreatePreMulSum(&dop[r], dscalar[r], ncclFloat, ncclScalarDevice, k.c[r]));
    EXPECT_GE(static_cast<int>(hop[r]), static_cast<int>(ncclNumOps));
  }
  auto a = pattern(0, count), b = pattern(1, count);
  // Host scalars 2 and 3, out of place.
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclAllReduce(in[r], out[r], count, ncclFloat, hop[r], k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    auto got = to_host<float>(r, out[r], count);
    size_t bad = 0;
    for (size_t i = 0; i < count; ++i) bad += got[i] != 2 * a[i] + 3 * b[i];
    EXPECT_EQ(bad, 0u) << "host scalar, rank " << r;
  }
  // Device scalars 1 and 4, reduce-scatter (input 2 * half per rank).
  const size_t half = count / 2;
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclReduceScatter(in[r], out[r], half, ncclFloat, dop[r], k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    auto got = to_host<float>(r, out[r], half);
    size_t bad = 0;
    for (size_t i = 0; i < half; ++i) bad += got[i] != 1 * a[r * half + i] + 4 * b[r * half + i];
    EXPECT_EQ(bad, 0u) << "device scalar, rank " << r;
    // The input is left as it was.
    auto kept = to_host<float>(r, in[r], count);
    EXPECT_EQ(kept, pattern(r, count));
    NCCL_OK(ncclRedOpDestroy(hop[r], k.c[r]));
    NCCL_OK(ncclRedOpDestroy(dop[r], k.c[r]));
    EXPECT_EQ(ncclRedOpDestroy(dop[r], k.c[r]), ncclInvalidArgument);
    EXPECT_EQ(ncclAllReduce(in[r], out[r], 1, ncclFloat, dop[r], k.c[r], k.s[r]), ncclInvalidArgument);
    cudaFree(in[r]);
    cudaFree(out[r]);
    cudaFree(dscalar[r]);
  }
}

TEST(NcclApiGpu, GatherAndScatter) {
  Comms k;
  k.init_all();
  const size_t count = 4099;
  const int root = 1;
  void* in[kRanks];
  void* out[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    in[r] = to_device(r, pattern(r, count * kRanks).data(), count * kRanks * 4);
    out[r] = to_device(r, pattern(7, count * kRanks).data(), count * kRanks * 4);
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclGather(in[r], out[r], count, ncclFloat, root, k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  auto got = to_host<float>(root, out[root], count * kRanks);
  for (int p = 0; p < kRanks; ++p) {
    auto want = pattern(p, count * kRanks);
    EXPECT_TRUE(std::equal(want.begin(), want.begin() + count, got.begin() + p * count)) << "gather block " << p;
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclScatter(in[r], out[r], count, ncclFloat, root, k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  auto src = pattern(root, count * kRanks);
  for (int r = 0; r < kRanks; ++r) {
    auto g = to_host<float>(r, out[r], count);
    EXPECT_TRUE(std::equal(g.begin(), g.end(), src.begin() + r * count)) << "scatter to rank " << r;
    cudaFree(in[r]);
    cudaFree(out[r]);
  }
}

TEST(NcclApiGpu, SplitReordersByKeyAndHonoursNoColor) {
  Comms k;
  k.init_all();
  ncclComm_t reversed[kRanks] = {}, alone[kRanks] = {};
  ncclResult_t res[kRanks][2];
  std::vector<std::thread> th;
  for (int r = 0; r < kRanks; ++r)
    th.emplace_back([&, r] {
      cudaSetDevice(dev_of(r));
      res[r][0] = ncclCommSplit(k.c[r], 0, -r, &reversed[r], nullptr);
      res[r][1] = ncclCommSplit(k.c[r], r == 0 ? 5 : NCCL_SPLIT_NOCOLOR, 0, &alone[r], nullptr);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(res[r][0], ncclSuccess);
    ASSERT_EQ(res[r][1], ncclSuccess);
    int nr = -1, n = 0;
    NCCL_OK(ncclCommUserRank(reversed[r], &nr));
    NCCL_OK(ncclCommCount(reversed[r], &n));
    EXPECT_EQ(nr, kRanks - 1 - r);
    EXPECT_EQ(n, kRanks);
  }
  EXPECT_NE(alone[0], nullptr);
  EXPECT_EQ(alone[1], nullptr);
  int n = 0;
  NCCL_OK(ncclCommCount(alone[0], &n));
  EXPECT_EQ(n, 1);
  // The split communicator works: broadcast from its rank 0 (parent rank 1).
  const size_t count = 777;
  void* buf[kRanks];
  for (int r = 0; r < kRanks; ++r) buf[r] = to_device(r, pattern(r, count).data(), count * 4);
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclBroadcast(buf[r], buf[r], count, ncclFloat, 0, reversed[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(to_host<float>(r, buf[r], count), pattern(1, count)) << "rank " << r;
    cudaFree(buf[r]);
  }
  std::vector<std::thread> done;
  for (int r = 0; r < kRanks; ++r)
    done.emplace_back([&, r] {
      cudaSetDevice(dev_of(r));
      ncclCommDestroy(reversed[r]);
    });
  for (auto& t : done) t.join();
  NCCL_OK(ncclCommDestroy(alone[0]));
}

TEST(NcclApiGpu, Fp8MovesNativelyAndReducesThroughTheFallback) {
  Comms k;
  k.init_all();
  const size_t count = 4096;
  // fp8 e4m3 bytes of 1.0 and 2.0: 0x38 and 0x40.
  std::vector<unsigned char> one(count, 0x38), two(count, 0x40);
  void* in[kRanks];
  void* out[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    in[r] = to_device(r, (r == 0 ? one : two).data(), count);
    out[r] = to_device(r, std::vector<unsigned char>(count * kRanks, 0).data(), count * kRanks);
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclAllGather(in[r], out[r], count, ncclFloat8e4m3, k.c[r], k.s[r]));
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    auto g = to_host<unsigned char>(r, out[r], count * kRanks);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), g.begin()) && std::equal(two.begin(), two.end(), g.begin() + count));
  }
  const char* fb = std::getenv("WEFT_NCCL_FALLBACK");
  if (fb == nullptr || *fb == '\0') {
    cudaSetDevice(0);
    EXPECT_EQ(ncclAllReduce(in[0], out[0], count, ncclFloat8e4m3, ncclSum, k.c[0], k.s[0]), ncclInvalidUsage);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("WEFT_NCCL_FALLBACK"), std::string::npos)
        << ncclGetLastError(nullptr);
  } else {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < kRanks; ++r) {
      cudaSetDevice(dev_of(r));
      NCCL_OK(ncclAllReduce(in[r], out[r], count, ncclFloat8e4m3, ncclSum, k.c[r], k.s[r]));
    }
    NCCL_OK(ncclGroupEnd());
    k.sync();
    for (int r = 0; r < kRanks; ++r) {
      auto g = to_host<unsigned char>(r, out[r], count);
      EXPECT_EQ(g, std::vector<unsigned char>(count, 0x44)) << "1 + 2 = 3.0 (0x44), rank " << r;  // fp8 e4m3 3.0
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    cudaFree(in[r]);
    cudaFree(out[r]);
  }
}

// What weft refuses, on every rank of a correct program (one thread per rank where a call is
// collective): a group simulation, the device API, symmetric windows of different sizes
// (every rank fails, naming both sizes), a rank that excludes itself from a shrink, an
// unknown type.
TEST(NcclApiGpu, RefusedCallsSayWhy) {
  Comms k;
  k.init_all();
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&info), ncclInvalidUsage);
  ncclResult_t win_res[kRanks], shrink_res[kRanks], type_res[kRanks];
  std::string win_msg[kRanks], shrink_msg[kRanks];
  ncclComm_t shrunk[kRanks] = {};
  ncclWindow_t win[kRanks] = {};
  void* buf[kRanks] = {};
  std::vector<std::thread> th;
  for (int r = 0; r < kRanks; ++r)
    th.emplace_back([&, r] {
      cudaSetDevice(dev_of(r));
      if (ncclMemAlloc(&buf[r], 2 << 20) != ncclSuccess) return;
      win_res[r] = ncclCommWindowRegister(k.c[r], buf[r], (r + 1) << 20, &win[r], NCCL_WIN_COLL_SYMMETRIC);
      win_msg[r] = ncclGetLastError(nullptr);  // per thread
      int exclude = r;
      shrink_res[r] = ncclCommShrink(k.c[r], &exclude, 1, &shrunk[r], nullptr, NCCL_SHRINK_DEFAULT);
      shrink_msg[r] = ncclGetLastError(nullptr);
      // One past the last type: refused by argument checking, before any communication.
      type_res[r] = ncclAllReduce(buf[r], buf[r], 4, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, k.c[r], k.s[r]);
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NE(buf[r], nullptr) << "ncclMemAlloc, rank " << r;
    EXPECT_EQ(win_res[r], ncclInvalidUsage) << "rank " << r;
    EXPECT_EQ(win[r], nullptr);
    EXPECT_NE(win_msg[r].find("rank 0 passed 1048576 bytes, rank 1 2097152"), std::string::npos) << win_msg[r];
    EXPECT_EQ(shrink_res[r], ncclInvalidArgument) << "rank " << r;
    EXPECT_NE(shrink_msg[r].find("is in excludeRanksList"), std::string::npos) << shrink_msg[r];
    EXPECT_EQ(shrunk[r], nullptr);
    EXPECT_EQ(type_res[r], ncclInvalidArgument) << "rank " << r;
    cudaSetDevice(dev_of(r));
    NCCL_OK(ncclMemFree(buf[r]));
  }
}

// Counts whose byte size overflows 64 bits are refused on every path (a collective weft
// runs, Gather built from sends, the PreMulSum temporary of ReduceScatter), never run
// short; registration is local (rank 0 registers, rank 1 never does, nothing waits); a
// destroyed communicator is an error for every later call, destroying it again included.
TEST(NcclApiGpu, OverflowingCountsLocalRegistrationAndDeadHandles) {
  Comms k;
  k.init_all();
  cudaSetDevice(0);
  void* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, 1 << 20));
  auto overflows = [](ncclResult_t r) {
    const std::string msg = ncclGetLastError(nullptr);
    return r == ncclInvalidArgument && msg.find("overflows 64 bits") != std::string::npos;
  };
  EXPECT_TRUE(overflows(ncclAllReduce(buf, buf, size_t(1) << 62, ncclFloat, ncclSum, k.c[0], k.s[0])))
      << ncclGetLastError(nullptr);
  EXPECT_TRUE(overflows(ncclGather(buf, buf, size_t(1) << 63, ncclUint8, 0, k.c[0], k.s[0])))
      << ncclGetLastError(nullptr);
  ncclRedOp_t op;
  float scalar = 2;
  NCCL_OK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, k.c[0]));
  EXPECT_TRUE(overflows(ncclReduceScatter(buf, buf, size_t(1) << 63, ncclFloat, op, k.c[0], k.s[0])))
      << ncclGetLastError(nullptr);
  NCCL_OK(ncclRedOpDestroy(op, k.c[0]));
  void* h = nullptr;
  NCCL_OK(ncclCommRegister(k.c[0], buf, 1 << 20, &h));
  NCCL_OK(ncclCommDeregister(k.c[0], h));
  cudaFree(buf);
  NCCL_OK(ncclCommDestroy(k.c[0]));
  EXPECT_EQ(ncclCommDestroy(k.c[0]), ncclInvalidArgument);
  int n = 0;
  EXPECT_EQ(ncclCommCount(k.c[0], &n), ncclInvalidArgument);
  k.c[0] = nullptr;
}

namespace {

// The file that answers this program's NCCL calls, and whether it is weft's: its real path's
// name holds "weft" (libweft_nccl.so, also behind a libnccl.so.2 link) or it is the file
// named by WEFT_NCCL_EXPECT_LIB; and its ncclGetVersion must say 22800.
bool running_on_weft() {
  void* sym = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  Dl_info info{};
  std::string path = sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "";
  char real[4096] = {};
  std::string resolved = !path.empty() && realpath(path.c_str(), real) ? real : path;
  std::string expect_real;
  if (const char* e = std::getenv("WEFT_NCCL_EXPECT_LIB"); e && *e && realpath(e, real)) expect_real = real;
  const std::string base = resolved.substr(resolved.find_last_of('/') + 1);
  const bool weft_file = (!expect_real.empty() && resolved == expect_real) || base.find("weft") != std::string::npos;
  int version = 0;
  ncclGetVersion(&version);
  std::printf("nccl_api_gpu_tests: NCCL calls go to %s (ncclGetVersion %d)\n", resolved.c_str(), version);
  if (!weft_file || version != 22800) {
    std::printf("nccl_api_gpu_tests: FAIL: that is not weft's library (want a libweft_nccl.so file%s%s answering "
                "22800); check LD_LIBRARY_PATH\n",
                expect_real.empty() ? "" : " or ", expect_real.c_str());
    return false;
  }
  return true;
}

// Ends the process when one test runs longer than its limit: a hang must be reported with the
// test's name, not left to an outer timeout.
class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit Watchdog(double seconds) : limit_(seconds), thread_([this] { run(); }) {}
  ~Watchdog() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void OnTestStart(const ::testing::TestInfo& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    name_ = std::string(t.test_suite_name()) + "." + t.name();
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(limit_));
    armed_ = true;
    cv_.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!quit_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !quit_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::printf("[  HUNG    ] %s: still running after %.0f s (WEFT_NCCL_TEST_WATCHDOG_S); ending the process\n",
                    name_.c_str(), limit_);
        std::fflush(stdout);
        std::_Exit(124);
      }
    }
  }
  double limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string name_;
  std::chrono::steady_clock::time_point deadline_{};
  bool armed_ = false, quit_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  if (!running_on_weft()) return 1;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    std::printf("nccl_api_gpu_tests: no GPU; skipped\n");
    return 77;
  }
  g_ndev = n;
  if (n < kRanks) std::printf("nccl_api_gpu_tests: %d ranks share %d GPU(s): correctness only\n", kRanks, n);
  ::testing::InitGoogleTest(&argc, argv);
  double limit = 30;
  if (const char* w = std::getenv("WEFT_NCCL_TEST_WATCHDOG_S"); w && std::atof(w) > 0) limit = std::atof(w);
  ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog(limit));
  return RUN_ALL_TESTS();
}
