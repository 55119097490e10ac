// Copy-engine collectives (WEFT_ALGO=ce, docs/port-channels.md) captured in CUDA graphs, one
// process per rank (launcher.hpp), ranks sharing the GPUs where there are fewer:
//
//   graph --ranks N   AllGather and AllReduce (sum, float32), out of place and in place, on
//                     registered buffers: each call captured (its first use of the buffers
//                     included), the graph replayed 3 times on new random data with the
//                     output poisoned, every element checked. The captured graph's nodes
//                     are counted: every kernel must be the one-thread trigger kernel or (the
//                     AllReduce's reduction) at most 8 thread blocks, and there must be a
//                     trigger kernel (else the call fell back to the SM path). Prints the
//                     thread blocks and copies of each graph. Every case allocates and
//                     frees its buffers (peers' new buffers in chunks mapped before), in
//                     two rounds, the second with a spacer allocation before each case.
//
// Exit codes: 0 pass, 1 fail, 77 skipped without a GPU.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_check.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "util/launcher.hpp"
#include "weft/weft.h"

using weft::Collective;
namespace gt = weft::gputest;
namespace host = weft::host;

namespace {

constexpr unsigned kMaxReduceBlocks = 8;  // ce::kMaxReduceBlocks

// Inside the cases (which return values): throw, and graph() reports and fails.
#define CE_CUDA(call)                                                                            \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)
#define CE_WEFT(call)                                                                            \
  do {                                                                                           \
    weftResult_t r_ = (call);                                                                    \
    if (r_ != weftSuccess) throw std::runtime_error(std::string(#call) + ": " + weftGetLastError(nullptr)); \
  } while (0)

struct GraphCount {
  int trigger_kernels = 0;   ///< 1 block of 1 thread
  int reduce_kernels = 0;
  unsigned max_blocks = 0;   ///< of any kernel
  unsigned total_blocks = 0;
  int copies = 0;            ///< memcpy nodes (local copies by copy engine)
  int other = 0;             ///< kernels that are neither: the SM path
};

GraphCount count_nodes(cudaGraph_t g) {
  GraphCount c;
  size_t n = 0;
  CE_CUDA(cudaGraphGetNodes(g, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  CE_CUDA(cudaGraphGetNodes(g, nodes.data(), &n));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    CE_CUDA(cudaGraphNodeGetType(node, &t));
    if (t == cudaGraphNodeTypeMemcpy) ++c.copies;
    if (t != cudaGraphNodeTypeKernel) continue;
    // The driver's query: the kernels were launched by libweft's own (static) CUDA runtime,
    // whose functions this program's runtime does not know ("invalid device function").
    using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
    static const GetParams get = [] {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult q;
      if (cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess)
        fn = nullptr;
      return reinterpret_cast<GetParams>(fn);
    }();
    CUDA_KERNEL_NODE_PARAMS p{};
    if (get == nullptr || get(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS)
      throw std::runtime_error("cuGraphKernelNodeGetParams failed on a kernel node");
    const unsigned blocks = p.gridDimX * p.gridDimY * p.gridDimZ;
    const unsigned threads = p.blockDimX * p.blockDimY * p.blockDimZ;
    c.max_blocks = std::max(c.max_blocks, blocks);
    c.total_blocks += blocks;
    if (blocks == 1 && threads == 1) ++c.trigger_kernels;
    else if (blocks <= kMaxReduceBlocks) ++c.reduce_kernels;
    else ++c.other;
  }
  return c;
}

/// One collective captured and replayed; returns "" or what went wrong.
std::string graph_case(weftComm_t comm, cudaStream_t st, int R, int rank, Collective c, bool in_place, size_t count) {
  const size_t ns = host::send_elems(c, count, R), nr = host::recv_elems(c, count, R);
  char *dsend = nullptr, *drecv = nullptr;
  CE_CUDA(cudaMalloc(reinterpret_cast<void**>(&dsend), ns * 4));
  CE_CUDA(cudaMalloc(reinterpret_cast<void**>(&drecv), nr * 4));
  void *hs = nullptr, *hr = nullptr;
  CE_WEFT(weftCommRegister(comm, dsend, ns * 4, &hs));
  CE_WEFT(weftCommRegister(comm, drecv, nr * 4, &hr));
  char* sp = !in_place ? dsend : c == Collective::AllGather ? drecv + static_cast<size_t>(rank) * count * 4 : drecv;
  auto ws = reinterpret_cast<weftStream_t>(st);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CE_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  weftResult_t r = c == Collective::AllGather ? weftAllGather(sp, drecv, count, weftFloat32, comm, ws)
                                              : weftAllReduce(sp, drecv, count, weftFloat32, weftSum, comm, ws);
  CE_CUDA(cudaStreamEndCapture(st, &g));
  std::string err;
  if (r != weftSuccess) return std::string("call under capture failed: ") + weftGetLastError(nullptr);
  const GraphCount gc = count_nodes(g);
  std::printf("rank %d: %s %s of %zu floats: %d trigger kernels (1 thread each), %d reduce kernels, at most %u thread "
              "blocks in a kernel, %u in all, %d copy nodes, %d other kernels\n",
              rank, c == Collective::AllGather ? "AllGather" : "AllReduce", in_place ? "in place" : "out of place", count,
              gc.trigger_kernels, gc.reduce_kernels, gc.max_blocks, gc.total_blocks, gc.copies, gc.other);
  if (gc.trigger_kernels == 0 || gc.other != 0) err = "the call did not run by copy engines (SM path kernels captured)";
  if (c == Collective::AllGather && gc.reduce_kernels != 0) err = "AllGather launched thread blocks beyond its trigger thread";
  CE_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int rep = 0; rep < 3 && err.empty(); ++rep) {
    std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(R));
    for (int q = 0; q < R; ++q) {
      sends[static_cast<size_t>(q)].resize(ns * 4);
      host::fill_random(weftFloat32, weftSum, sends[static_cast<size_t>(q)].data(), ns, 1000 * rep + q + count, 4);
    }
    CE_CUDA(cudaMemsetAsync(drecv, 0xFF, nr * 4, st));
    CE_CUDA(cudaMemcpyAsync(sp, sends[static_cast<size_t>(rank)].data(), ns * 4, cudaMemcpyHostToDevice, st));
    CE_CUDA(cudaGraphLaunch(ge, st));
    if (!gt::sync_bounded(ws, 120)) {
      err = "graph replay " + std::to_string(rep) + " did not finish";
      break;
    }
    weftResult_t ae = weftSuccess;
    weftCommGetAsyncError(comm, &ae);
    if (ae != weftSuccess) {
      err = std::string("async error: ") + weftGetLastError(nullptr);
      break;
    }
    std::vector<uint8_t> got(nr * 4);
    CE_CUDA(cudaMemcpyAsync(got.data(), drecv, got.size(), cudaMemcpyDeviceToHost, st));
    CE_CUDA(cudaStreamSynchronize(st));
    auto want = host::reference_for_rank(c, weftFloat32, weftSum, 0, count, rank, sends, {}, 4);
    if (want != got) {
      size_t first = 0;
      while (first < got.size() && got[first] == want[first]) ++first;
      err = "replay " + std::to_string(rep) + " is wrong from byte " + std::to_string(first);
    }
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  CE_WEFT(weftCommDeregister(comm, hs));
  CE_WEFT(weftCommDeregister(comm, hr));
  cudaFree(dsend);
  cudaFree(drecv);
  return err;
}

int graph(int R, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, R, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int failures = 0;
  // Every case allocates, registers, deregisters and frees its buffers, so a peer's new
  // small buffer lands in a driver chunk this rank opened for an earlier one (its IPC
  // handle new, its memory mapped already). The second round holds a 4 KiB spacer per case
  // so that buffers land at offsets in those chunks not seen before.
  std::vector<void*> spacers;
  for (int round = 0; round < 2; ++round)
  for (Collective c : {Collective::AllGather, Collective::AllReduce})
    for (bool in_place : {false, true})
      for (size_t count : {size_t(1001), (size_t(4) << 20) + 3}) {
        if (round == 1) {
          void* sp = nullptr;
          CUDA_OK(cudaMalloc(&sp, 4096));
          spacers.push_back(sp);
        }
        std::string err;
        try {
          err = graph_case(comm, st, R, rank, c, in_place, count);
        } catch (const std::exception& e) {
          err = std::string("async error or failed call: ") + e.what();
        }
        if (!err.empty()) {
          ++failures;
          std::printf("FAIL rank %d: round %d: %s %s count=%zu: %s\n", rank, round,
                      c == Collective::AllGather ? "AllGather" : "AllReduce", in_place ? "in place" : "out of place", count,
                      err.c_str());
          if (err.find("did not finish") != std::string::npos || err.find("async") != std::string::npos) {
            weftCommAbort(comm);
            return 1;
          }
        }
      }
  for (void* sp : spacers) cudaFree(sp);
  std::printf("rank %d: copy-engine graphs %s\n", rank, failures ? "FAILED" : "passed");
  WEFT_OK(weftCommDestroy(comm));
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int ranks = 2;
  std::string cmd = argc > 1 ? argv[1] : "";
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--ranks") ranks = std::atoi(argv[i + 1]);
  if (cmd != "graph" || ranks < 2 || ranks > 8) {
    std::printf("usage: %s graph [--ranks 2..8]\n", argv[0]);
    return 2;
  }
  setenv("WEFT_ALGO", "ce", 1);  // the copy-engine path for AllGather and AllReduce
  return gt::run_ranks(ranks, [&](int r, const weftUniqueId& id) { return graph(ranks, r, id); }, 600, cmd);
}
