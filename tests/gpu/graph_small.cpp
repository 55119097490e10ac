// Part of `weft_gpu_tests graph`: small Broadcast and Reduce calls (the interpreter's LL plans;
// the one-shot kernel's epochs where WEFT_ALGO=Broadcast:oneshot,Reduce:oneshot names it for
// them: the CTest entry gpu_graph_oneshot_rooted_4) captured three to a CUDA graph and replayed, then
// run once more outside the graph. Three replays of three calls move nine messages over each
// connection, more than the FIFO's default depth of four, so the staging slots wrap and the
// packet flags and the positions the interpreter keeps per launch (docs/runtime.md, "Where a
// small plan call's time goes") carry across launches and replays. Every replay draws new
// inputs, poisons the outputs and compares every byte with the host reference.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "util/launcher.hpp"
#include "weft/weft.h"

namespace weft::gputest {

namespace {

constexpr int kCalls = 3;    // calls per graph
constexpr int kReplays = 3;  // then one plain round

weftResult_t call(Collective c, const void* s, void* r, size_t count, int root, weftComm_t comm, cudaStream_t st) {
  auto ws = reinterpret_cast<weftStream_t>(st);
  if (c == Collective::Broadcast) return weftBroadcast(s, r, count, weftFloat32, root, comm, ws);
  return weftReduce(s, r, count, weftFloat32, weftSum, root, comm, ws);
}

/// One collective and count: the graph's replays and a plain round; failures counted.
int one_case(Collective c, size_t count, int ranks, int rank, weftComm_t comm, cudaStream_t st) {
  const int root = c == Collective::Broadcast ? ranks - 1 : 0;
  const std::string name(to_string(c));
  const size_t bytes = count * 4;
  std::vector<float*> send(kCalls, nullptr), recv(kCalls, nullptr);
  for (int i = 0; i < kCalls; ++i) {
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&send[static_cast<size_t>(i)]), bytes));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&recv[static_cast<size_t>(i)]), bytes));
  }
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  weftResult_t res = weftSuccess;
  for (int i = 0; i < kCalls && res == weftSuccess; ++i)
    res = call(c, send[static_cast<size_t>(i)], recv[static_cast<size_t>(i)], count, root, comm, st);
  CUDA_OK(cudaStreamEndCapture(st, &g));
  if (res != weftSuccess) {
    std::printf("FAIL rank %d: %s of %zu floats under capture: %s\n", rank, name.c_str(), count, weftGetLastError(nullptr));
    return 1;
  }
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  int failures = 0;
  const std::vector<uint8_t> poison(bytes, 0xFF);
  for (int rep = 0; rep <= kReplays; ++rep) {  // the last round runs the calls plainly
    std::vector<std::vector<std::vector<uint8_t>>> sends(kCalls);
    for (int i = 0; i < kCalls; ++i) {
      auto& si = sends[static_cast<size_t>(i)];
      si.resize(static_cast<size_t>(ranks));
      for (int q = 0; q < ranks; ++q) {
        si[static_cast<size_t>(q)].resize(bytes);
        host::fill_random(weftFloat32, weftSum, si[static_cast<size_t>(q)].data(), count,
                          static_cast<uint64_t>(7000 + 100 * rep + 10 * i + q));
      }
      CUDA_OK(cudaMemcpyAsync(send[static_cast<size_t>(i)], si[static_cast<size_t>(rank)].data(), bytes,
                              cudaMemcpyHostToDevice, st));
      CUDA_OK(cudaMemcpyAsync(recv[static_cast<size_t>(i)], poison.data(), bytes, cudaMemcpyHostToDevice, st));
    }
    if (rep < kReplays) {
      CUDA_OK(cudaGraphLaunch(ge, st));
    } else {
      for (int i = 0; i < kCalls; ++i)
        WEFT_OK(call(c, send[static_cast<size_t>(i)], recv[static_cast<size_t>(i)], count, root, comm, st));
    }
    if (!sync_bounded(reinterpret_cast<weftStream_t>(st), 60)) {
      std::printf("FAIL rank %d: %s of %zu floats, round %d did not finish\n", rank, name.c_str(), count, rep);
      return 1;
    }
    for (int i = 0; i < kCalls; ++i) {
      std::vector<uint8_t> got(bytes);
      CUDA_OK(cudaMemcpy(got.data(), recv[static_cast<size_t>(i)], bytes, cudaMemcpyDeviceToHost));
      const auto want = host::reference_for_rank(c, weftFloat32, weftSum, root, count, rank,
                                                 sends[static_cast<size_t>(i)], poison);
      if (std::memcmp(got.data(), want.data(), bytes) != 0) {
        ++failures;
        std::printf("FAIL rank %d: %s of %zu floats (root %d), %s %d, call %d is wrong\n", rank, name.c_str(), count,
                    root, rep < kReplays ? "graph replay" : "plain round", rep, i);
      }
    }
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  for (int i = 0; i < kCalls; ++i) {
    cudaFree(send[static_cast<size_t>(i)]);
    cudaFree(recv[static_cast<size_t>(i)]);
  }
  return failures;
}

}  // namespace

int graph_small(int ranks, int rank, weftComm_t comm) {
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int failures = 0;
  // 2 floats: one packet pair, one warp; 3000 floats: several warps per block.
  for (Collective c : {Collective::Broadcast, Collective::Reduce})
    for (size_t count : {size_t(2), size_t(3000)}) failures += one_case(c, count, ranks, rank, comm, st);
  cudaStreamDestroy(st);
  return failures;
}

}  // namespace weft::gputest
