// Memory windows, CTA policies and ncclCommShrink through the NCCL library (part of
// nccl_api_gpu_tests; helpers in nccl_gpu_helpers.hpp). Every result is compared element by
// element with values computed here, on random data with the outputs poisoned first.
//
//   SymmetricWindowsUnderEveryPolicy  nccl-tests' way: one thread registers both ranks' send
//       and receive windows inside one group (registered at ncclGroupEnd); AllGather (out of
//       place and in place), AlltoAll (both), Broadcast from each root, AllReduce and
//       ReduceScatter on them, with NCCL_CTA_POLICY DEFAULT, EFFICIENCY and ZERO, at a size
//       under and over the copy-engine threshold (4 MiB); then deregistration while idle.
//   DefaultWindowsTakeAnyOffset       NCCL_WIN_DEFAULT windows of different sizes, each rank's
//       buffers at its own offset: AllGather and AlltoAll by copy engines (ZERO).
//   DeregisteringAWindowInUseIsRefused  rank 0's AllGather waits for rank 1: deregistering
//       rank 0's window meanwhile is ncclInvalidUsage; after the call completes it works.
//   ShrinkLeavesTheExcludedRankOut    3 ranks, rank 1 excluded (it never calls): ranks 0 and 2
//       form a 2-rank communicator (AllReduce checked); with NCCL_SHRINK_ABORT the parent is
//       left unusable; excluding all others leaves a working 1-rank communicator.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl_gpu_helpers.hpp"

using namespace nccl_gpu;

namespace {

std::vector<uint32_t> random_words(uint64_t seed, size_t n) {
  std::vector<uint32_t> v(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint32_t>(x >> 11);
  }
  return v;
}

/// Sets NCCL_CTA_POLICY while communicators are made (it is read at initialization).
struct PolicyEnv {
  explicit PolicyEnv(const char* p) {
    if (p) setenv("NCCL_CTA_POLICY", p, 1);
    else unsetenv("NCCL_CTA_POLICY");
  }
  ~PolicyEnv() { unsetenv("NCCL_CTA_POLICY"); }
};

/// Two ranks' send and receive buffers of `bytes` each (ncclMemAlloc), with their windows.
struct Buffers {
  void* send[kRanks] = {};
  void* recv[kRanks] = {};
  ncclWindow_t ws[kRanks] = {}, wr[kRanks] = {};
  size_t bytes = 0;
  void alloc(size_t b) {
    bytes = b;
    for (int r = 0; r < kRanks; ++r) {
      CUDA_OK(cudaSetDevice(dev_of(r)));
      NCCL_OK(ncclMemAlloc(&send[r], b));
      NCCL_OK(ncclMemAlloc(&recv[r], b));
    }
  }
  // As nccl-tests: one thread, one group, every rank's windows.
  void register_windows(Comms& k, int flags) {
    NCCL_OK(ncclGroupStart());
    for (int r = 0; r < kRanks; ++r) {
      NCCL_OK(ncclCommWindowRegister(k.c[r], send[r], bytes, &ws[r], flags));
      NCCL_OK(ncclCommWindowRegister(k.c[r], recv[r], bytes, &wr[r], flags));
    }
    NCCL_OK(ncclGroupEnd());
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_NE(ws[r], nullptr);
      ASSERT_NE(wr[r], nullptr);
    }
  }
  void deregister(Comms& k) {
    for (int r = 0; r < kRanks; ++r) {
      NCCL_OK(ncclCommWindowDeregister(k.c[r], ws[r]));
      NCCL_OK(ncclCommWindowDeregister(k.c[r], wr[r]));
      ws[r] = wr[r] = nullptr;
    }
  }
  ~Buffers() {
    for (int r = 0; r < kRanks; ++r) {
      if (send[r]) ncclMemFree(send[r]);
      if (recv[r]) ncclMemFree(recv[r]);
    }
  }
};

enum class Op { AllGather, AlltoAll, Broadcast, AllReduce, ReduceScatter };
const char* name(Op op) {
  switch (op) {
    case Op::AllGather: return "AllGather";
    case Op::AlltoAll: return "AlltoAll";
    case Op::Broadcast: return "Broadcast";
    case Op::AllReduce: return "AllReduce";
    default: return "ReduceScatter";
  }
}

/// One call of `op` on both ranks (count words per block; `off[r]` bytes into rank r's
/// buffers), issued by one thread inside a group, checked against the host.
void check_call(Comms& k, Buffers& b, Op op, size_t count, bool in_place, int root, const size_t off[kRanks],
                uint64_t seed) {
  SCOPED_TRACE(std::string(name(op)) + (in_place ? " in place" : " out of place") + " count " +
               std::to_string(count) + " root " + std::to_string(root));
  const size_t R = kRanks, n = count * R;  // words in each rank's send and receive region
  std::vector<std::vector<uint32_t>> in(R);
  for (size_t r = 0; r < R; ++r) {
    in[r] = random_words(seed + r, n);
    // Reductions: small values, so that sums are exact in any order.
    if (op == Op::AllReduce || op == Op::ReduceScatter)
      for (uint32_t& w : in[r]) w &= 0xffff;
  }
  char* sp[kRanks];
  char* rp[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    CUDA_OK(cudaSetDevice(dev_of(r)));
    char* s = static_cast<char*>(b.send[r]) + off[r];
    char* d = static_cast<char*>(b.recv[r]) + off[r];
    CUDA_OK(cudaMemset(d, 0xEE, n * 4));  // poison
    sp[r] = s;
    rp[r] = d;
    if (!in_place) {
      CUDA_OK(cudaMemcpy(s, in[r].data(), n * 4, cudaMemcpyHostToDevice));
    } else if (op == Op::AllGather) {
      sp[r] = d + r * count * 4;
      CUDA_OK(cudaMemcpy(sp[r], in[r].data(), count * 4, cudaMemcpyHostToDevice));
    } else if (op == Op::ReduceScatter) {
      CUDA_OK(cudaMemcpy(s, in[r].data(), n * 4, cudaMemcpyHostToDevice));
      rp[r] = s + r * count * 4;
    } else {
      CUDA_OK(cudaMemcpy(d, in[r].data(), n * 4, cudaMemcpyHostToDevice));
      sp[r] = d;
    }
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    CUDA_OK(cudaSetDevice(dev_of(r)));
    switch (op) {
      case Op::AllGather: NCCL_OK(ncclAllGather(sp[r], rp[r], count, ncclUint32, k.c[r], k.s[r])); break;
      case Op::AlltoAll: NCCL_OK(ncclAlltoAll(sp[r], rp[r], count, ncclUint32, k.c[r], k.s[r])); break;
      case Op::Broadcast: NCCL_OK(ncclBroadcast(sp[r], rp[r], n, ncclUint32, root, k.c[r], k.s[r])); break;
      case Op::AllReduce: NCCL_OK(ncclAllReduce(sp[r], rp[r], n, ncclUint32, ncclSum, k.c[r], k.s[r])); break;
      case Op::ReduceScatter:
        NCCL_OK(ncclReduceScatter(sp[r], rp[r], count, ncclUint32, ncclSum, k.c[r], k.s[r]));
        break;
    }
  }
  NCCL_OK(ncclGroupEnd());
  k.sync();
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t async = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(k.c[r], &async));
    ASSERT_EQ(async, ncclSuccess) << ncclGetLastError(nullptr);
    const size_t got_n = op == Op::ReduceScatter ? count : n;
    std::vector<uint32_t> got = to_host<uint32_t>(r, rp[r], got_n), want(got_n);
    for (size_t i = 0; i < got_n; ++i) {
      const size_t blk = i / count, j = i % count;
      switch (op) {
        case Op::AllGather: want[i] = in[blk][j]; break;
        case Op::AlltoAll: want[i] = in[blk][r * count + j]; break;
        case Op::Broadcast: want[i] = in[static_cast<size_t>(root)][i]; break;
        case Op::AllReduce: want[i] = in[0][i] + in[1][i]; break;
        case Op::ReduceScatter: want[i] = in[0][r * count + i] + in[1][r * count + i]; break;
      }
    }
    size_t bad = 0, first = got_n;
    for (size_t i = 0; i < got_n; ++i)
      if (got[i] != want[i]) {
        if (bad++ == 0) first = i;
      }
    EXPECT_EQ(bad, 0u) << "rank " << r << ": first wrong word " << first << " of " << got_n;
  }
}

}  // namespace

TEST(NcclWindowGpu, SymmetricWindowsUnderEveryPolicy) {
  for (const char* policy : {"DEFAULT", "EFFICIENCY", "ZERO"}) {
    SCOPED_TRACE(std::string("NCCL_CTA_POLICY=") + policy);
    PolicyEnv env(policy);
    Comms k;
    k.init_all();
    Buffers b;
    const size_t big = (size_t(3) << 20) / 4 + 5;  // words per block: 2 ranks x 3 MiB, over the 4 MiB threshold
    b.alloc(big * 4 * kRanks);
    b.register_windows(k, NCCL_WIN_COLL_SYMMETRIC);
    const size_t off[kRanks] = {0, 0};
    uint64_t seed = 100;
    for (size_t count : {size_t(1000), big})
      for (bool in_place : {false, true}) {
        check_call(k, b, Op::AllGather, count, in_place, 0, off, ++seed);
        check_call(k, b, Op::AlltoAll, count, in_place, 0, off, ++seed);
        for (int root = 0; root < kRanks; ++root) check_call(k, b, Op::Broadcast, count, in_place, root, off, ++seed);
        check_call(k, b, Op::AllReduce, count, in_place, 0, off, ++seed);
      }
    check_call(k, b, Op::ReduceScatter, big, false, 0, off, ++seed);
    b.deregister(k);  // idle: works
    // Deregistered windows are plain buffers again: collectives on them still work.
    check_call(k, b, Op::AllGather, big, false, 0, off, ++seed);
  }
}

TEST(NcclWindowGpu, DefaultWindowsTakeAnyOffset) {
  PolicyEnv env("ZERO");
  Comms k;
  k.init_all();
  const size_t count = 70001;
  const size_t off[kRanks] = {0, 8192};
  void* send[kRanks];
  void* recv[kRanks];
  ncclWindow_t ws[kRanks], wr[kRanks];
  Buffers b;  // frees what it holds; its windows are registered here, per rank, of different sizes
  b.alloc(count * 4 * kRanks + 2 * 8192);
  for (int r = 0; r < kRanks; ++r) {
    send[r] = b.send[r];
    recv[r] = b.recv[r];
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < kRanks; ++r) {
    const size_t size = count * 4 * kRanks + off[r];
    NCCL_OK(ncclCommWindowRegister(k.c[r], send[r], size, &ws[r], NCCL_WIN_DEFAULT));
    NCCL_OK(ncclCommWindowRegister(k.c[r], recv[r], size, &wr[r], NCCL_WIN_DEFAULT));
  }
  NCCL_OK(ncclGroupEnd());
  // The copy-engine path of default windows exchanges addresses on the host at each call:
  // one thread per rank.
  std::vector<std::thread> th;
  uint64_t seed = 500;
  for (Op op : {Op::AllGather, Op::AlltoAll}) {
    Comms* kp = &k;
    std::vector<std::vector<uint32_t>> in(kRanks);
    for (int r = 0; r < kRanks; ++r) in[r] = random_words(++seed, count * kRanks);
    for (int r = 0; r < kRanks; ++r) {
      CUDA_OK(cudaSetDevice(dev_of(r)));
      CUDA_OK(cudaMemcpy(static_cast<char*>(send[r]) + off[r], in[r].data(), count * 4 * kRanks, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(static_cast<char*>(recv[r]) + off[r], 0xEE, count * 4 * kRanks));
    }
    ncclResult_t res[kRanks];
    for (int r = 0; r < kRanks; ++r)
      th.emplace_back([&, r, op, kp] {
        cudaSetDevice(dev_of(r));
        const char* s = static_cast<const char*>(send[r]) + off[r];
        char* d = static_cast<char*>(recv[r]) + off[r];
        res[r] = op == Op::AllGather ? ncclAllGather(s, d, count, ncclUint32, kp->c[r], kp->s[r])
                                     : ncclAlltoAll(s, d, count, ncclUint32, kp->c[r], kp->s[r]);
        if (res[r] == ncclSuccess) res[r] = cudaStreamSynchronize(kp->s[r]) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
      });
    for (auto& t : th) t.join();
    th.clear();
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(res[r], ncclSuccess) << name(op) << " rank " << r << ": " << ncclGetLastError(nullptr);
      auto got = to_host<uint32_t>(r, static_cast<char*>(recv[r]) + off[r], count * kRanks);
      size_t bad = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const size_t blk = i / count, j = i % count;
        bad += got[i] != (op == Op::AllGather ? in[blk][j] : in[blk][r * count + j]);
      }
      EXPECT_EQ(bad, 0u) << name(op) << " rank " << r;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    NCCL_OK(ncclCommWindowDeregister(k.c[r], ws[r]));
    NCCL_OK(ncclCommWindowDeregister(k.c[r], wr[r]));
  }
}

TEST(NcclWindowGpu, DeregisteringAWindowInUseIsRefused) {
  PolicyEnv env("ZERO");
  Comms k;
  k.init_all();
  Buffers b;
  const size_t count = 4096;
  b.alloc(count * 4 * kRanks);
  b.register_windows(k, NCCL_WIN_COLL_SYMMETRIC);
  // Rank 0's AllGather (copy engines) waits in its rendezvous for rank 1, which has not called.
  CUDA_OK(cudaSetDevice(dev_of(0)));
  NCCL_OK(ncclAllGather(b.send[0], b.recv[0], count, ncclUint32, k.c[0], k.s[0]));
  EXPECT_EQ(ncclCommWindowDeregister(k.c[0], b.wr[0]), ncclInvalidUsage);
  const std::string msg = ncclGetLastError(nullptr);
  EXPECT_NE(msg.find("still used by a collective in flight"), std::string::npos) << msg;
  CUDA_OK(cudaSetDevice(dev_of(1)));
  NCCL_OK(ncclAllGather(b.send[1], b.recv[1], count, ncclUint32, k.c[1], k.s[1]));
  k.sync();
  ncclWindow_t stale = b.wr[0];
  b.deregister(k);  // both calls complete: works on every window
  // A handle deregistered already is an error, not a crash; NULL is nothing (as NCCL).
  EXPECT_EQ(ncclCommWindowDeregister(k.c[0], stale), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("not registered with this communicator"), std::string::npos);
  EXPECT_EQ(ncclCommWindowDeregister(k.c[0], nullptr), ncclSuccess);
}

namespace {

void allreduce_check(ncclComm_t* comms, const std::vector<int>& devs, const char* what) {
  const size_t n = 100003;
  const int R = static_cast<int>(devs.size());
  std::vector<void*> buf(devs.size());
  std::vector<cudaStream_t> st(devs.size());
  std::vector<std::vector<uint32_t>> in(devs.size());
  for (int r = 0; r < R; ++r) {
    in[r] = random_words(900 + r, n);
    for (uint32_t& w : in[r]) w &= 0xffff;
    CUDA_OK(cudaSetDevice(devs[r]));
    CUDA_OK(cudaStreamCreate(&st[r]));
    CUDA_OK(cudaMalloc(&buf[r], n * 4));
    CUDA_OK(cudaMemcpy(buf[r], in[r].data(), n * 4, cudaMemcpyHostToDevice));
  }
  NCCL_OK(ncclGroupStart());
  for (int r = 0; r < R; ++r) {
    CUDA_OK(cudaSetDevice(devs[r]));
    NCCL_OK(ncclAllReduce(buf[r], buf[r], n, ncclUint32, ncclSum, comms[r], st[r]));
  }
  NCCL_OK(ncclGroupEnd());
  for (int r = 0; r < R; ++r) {
    CUDA_OK(cudaSetDevice(devs[r]));
    CUDA_OK(cudaStreamSynchronize(st[r]));
    std::vector<uint32_t> got(n);
    CUDA_OK(cudaMemcpy(got.data(), buf[r], n * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      uint32_t want = 0;
      for (int q = 0; q < R; ++q) want += in[q][i];
      bad += got[i] != want;
    }
    EXPECT_EQ(bad, 0u) << what << ", rank " << r;
    cudaFree(buf[r]);
    cudaStreamDestroy(st[r]);
  }
}

}  // namespace

TEST(NcclWindowGpu, ShrinkLeavesTheExcludedRankOut) {
  for (int flags : {NCCL_SHRINK_DEFAULT, NCCL_SHRINK_ABORT}) {
    SCOPED_TRACE(flags == NCCL_SHRINK_ABORT ? "NCCL_SHRINK_ABORT" : "NCCL_SHRINK_DEFAULT");
    constexpr int R = 3;
    ncclComm_t parent[R] = {};
    int devs[R];
    for (int r = 0; r < R; ++r) devs[r] = r % g_ndev;
    NCCL_OK(ncclCommInitAll(parent, R, devs));
    // Ranks 0 and 2 shrink (each blocks until the new communicator is made); rank 1 never calls.
    ncclComm_t child[R] = {};
    ncclResult_t res[R] = {ncclSuccess, ncclSuccess, ncclSuccess};
    std::vector<std::thread> th;
    for (int r : {0, 2})
      th.emplace_back([&, r] {
        cudaSetDevice(devs[r]);
        int exclude[] = {1};
        res[r] = ncclCommShrink(parent[r], exclude, 1, &child[r], nullptr, flags);
      });
    for (auto& t : th) t.join();
    ASSERT_EQ(res[0], ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(res[2], ncclSuccess) << ncclGetLastError(nullptr);
    int n = 0, rank = -1;
    NCCL_OK(ncclCommCount(child[2], &n));
    NCCL_OK(ncclCommUserRank(child[2], &rank));
    EXPECT_EQ(n, 2);
    EXPECT_EQ(rank, 1);  // parent order, the gap closed
    ncclComm_t two[2] = {child[0], child[2]};
    allreduce_check(two, {devs[0], devs[2]}, "shrunk communicator");
    if (flags == NCCL_SHRINK_ABORT) {
      // The parent's work was stopped: it refuses new work until destroyed.
      void* p = nullptr;
      CUDA_OK(cudaSetDevice(devs[0]));
      CUDA_OK(cudaMalloc(&p, 64));
      EXPECT_NE(ncclAllReduce(p, p, 4, ncclFloat, ncclSum, parent[0], nullptr), ncclSuccess);
      EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_SHRINK_ABORT"), std::string::npos)
          << ncclGetLastError(nullptr);
      cudaFree(p);
    }
    for (ncclComm_t c : {child[0], child[2]}) NCCL_OK(ncclCommDestroy(c));
    // Excluding every other rank leaves one.
    ncclComm_t alone = nullptr;
    if (flags == NCCL_SHRINK_DEFAULT) {
      int others[] = {1, 2};
      NCCL_OK(ncclCommShrink(parent[0], others, 2, &alone, nullptr, NCCL_SHRINK_DEFAULT));
      NCCL_OK(ncclCommCount(alone, &n));
      EXPECT_EQ(n, 1);
      allreduce_check(&alone, {devs[0]}, "one-rank communicator");
      NCCL_OK(ncclCommDestroy(alone));
    }
    for (int r = 0; r < R; ++r) ncclCommAbort(parent[r]);  // rank 1 never left; abort meets nobody
  }
}
