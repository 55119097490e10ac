// weft's GPU tests, one process per rank (launcher.hpp). Every case draws random inputs,
// poisons the output, runs the call through the C API, and compares every element with a
// reference computed on the host. Subcommands (one CTest test each, label gpu):
//
//   collectives --ranks N [--full] [--counts a,b,...] [--only COLL] [--type T] [--register]
//               [--window sym|default]
//                                  the collective matrix (--register: both buffers registered
//                                  with weftCommRegister, as copy-engine collectives need;
//                                  --window: both registered as memory windows instead, and
//                                  deregistered after the matrix, which must then succeed)
//   p2p         --ranks N          grouped sends and receives, sizes 0 to 8 MiB
//   graph       --ranks N          AllReduce captured in a CUDA graph, replayed; small
//                                  Broadcast and Reduce, three calls a graph (graph_small.cpp)
//   initall     [--ranks N]        one process driving every GPU (weftCommInitAll), or N
//                                  ranks sharing them round-robin
//   never_joins                    rank 1 never joins: rank 0 gets an error in bounded time
//   peer_stops  [--counts N]       rank 1 stops taking part: rank 0 gets weftTimeout (N floats)
//   peer_dies   [--counts N] [--ranks N]  rank 1 is killed mid-collective, WEFT_TIMEOUT unset:
//                                  every other rank gets weftRemoteError naming rank 1 within seconds
//   hosts_refuse                   2 ranks on 2 "hosts": a memory channel to the other host is
//                                  refused on both, registration works, an AllReduce is right
//   handles                        bad WEFT_* values at init, a destroyed communicator used
//                                  again, overflowing counts, registration on one rank only:
//                                  errors, never hangs or crashes
//
// --hosts H (collectives, p2p, graph, peer_dies) gives the ranks H host identities
// (WEFT_HOST_ID=host0.., contiguous runs in rank order: 4 ranks as 2 hosts are {0,1} {2,3}),
// so that the communicator spans H "hosts" of one machine through the real multi-node path:
// UCX between hosts, nothing mapped through CUDA IPC (docs/multi-node.md).
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu_check.hpp"
#include "util/launcher.hpp"
#include "exec/collective_reference.hpp"
#include "exec/host_reduce.hpp"
#include "weft/weft.h"

using weft::Collective;
namespace gt = weft::gputest;
namespace host = weft::host;

namespace weft::gputest {
/// graph_small.cpp: small Broadcast and Reduce (LL plans) in CUDA graphs; failures counted.
int graph_small(int ranks, int rank, weftComm_t comm);
}  // namespace weft::gputest

namespace {

struct Options {
  int ranks = 2;
  bool ranks_given = false;
  bool full = false;
  std::vector<size_t> counts;
  std::string only;
  std::string type;  ///< one element type by name (host::dtype_name), or all
  int hosts = 0;     ///< --hosts: host identities given to the ranks (0: the real host)
  bool reg = false;  ///< register the buffers (weftCommRegister)
  int window = -1;   ///< --window: WEFT_WIN_COLL_SYMMETRIC or WEFT_WIN_DEFAULT windows on both buffers
};

const int kThreads = std::max(1u, std::min(16u, std::thread::hardware_concurrency() / 2));

const char* coll_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "AllReduce";
    case Collective::AllGather: return "AllGather";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::AllToAll: return "AllToAll";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    default: return "?";
  }
}

weftResult_t call(Collective c, const void* s, void* r, size_t count, int dtype, int op, int root, weftComm_t comm,
                  cudaStream_t st) {
  auto t = static_cast<weftDataType_t>(dtype);
  auto o = static_cast<weftRedOp_t>(op);
  auto ws = reinterpret_cast<weftStream_t>(st);
  switch (c) {
    case Collective::AllReduce: return weftAllReduce(s, r, count, t, o, comm, ws);
    case Collective::AllGather: return weftAllGather(s, r, count, t, comm, ws);
    case Collective::ReduceScatter: return weftReduceScatter(s, r, count, t, o, comm, ws);
    case Collective::AllToAll: return weftAllToAll(s, r, count, t, comm, ws);
    case Collective::Broadcast: return weftBroadcast(s, r, count, t, root, comm, ws);
    case Collective::Reduce: return weftReduce(s, r, count, t, o, root, comm, ws);
    default: return weftInvalidArgument;
  }
}

/// One case on this rank; returns "" or what went wrong.
std::string run_case(weftComm_t comm, cudaStream_t st, int R, int rank, Collective c, int dtype, int op, size_t count,
                     bool in_place, int root, char* d_send, char* d_recv, uint64_t seed) {
  const size_t esz = host::dtype_size(dtype);
  const size_t ns = host::send_elems(c, count, R), nr = host::recv_elems(c, count, R);
  std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(R));
  for (int q = 0; q < R; ++q) {
    sends[static_cast<size_t>(q)].resize(ns * esz);
    host::fill_random(dtype, op, sends[static_cast<size_t>(q)].data(), ns, seed * 131 + static_cast<uint64_t>(q), kThreads);
  }
  const std::vector<uint8_t>& mine = sends[static_cast<size_t>(rank)];
  std::vector<uint8_t> untouched(nr * esz, 0xFF);
  char *sp = d_send, *rp = d_recv, *view = d_recv;
  size_t view_elems = nr;
  // Uploads and poison go on the collective's stream: a cudaMemcpy from pageable memory
  // may return before its DMA lands, and the stream does not wait for the legacy stream.
  auto up = [&](void* dst, const void* src, size_t n) {
    return n == 0 ? cudaSuccess : cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, st);
  };
  if (cudaMemsetAsync(d_recv, 0xFF, nr * esz, st) != cudaSuccess) return "cudaMemset failed";
  if (!in_place) {
    if (up(d_send, mine.data(), ns * esz) != cudaSuccess) return "upload failed";
  } else if (c == Collective::AllGather) {
    sp = d_recv + static_cast<size_t>(rank) * count * esz;
    if (up(sp, mine.data(), ns * esz) != cudaSuccess) return "upload failed";
  } else if (c == Collective::ReduceScatter) {
    if (up(d_send, mine.data(), ns * esz) != cudaSuccess) return "upload failed";
    rp = view = d_send + static_cast<size_t>(rank) * count * esz;
    view_elems = count;
  } else {
    if (up(d_recv, mine.data(), ns * esz) != cudaSuccess) return "upload failed";
    sp = d_recv;
    untouched = mine;
  }
  weftResult_t r = call(c, sp, rp, count, dtype, op, root, comm, st);
  if (r != weftSuccess) return std::string("call failed: ") + weftGetErrorString(r) + ": " + weftGetLastError(nullptr);
  if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(st), 120)) return "the stream did not finish within 120 s";
  weftResult_t ae = weftSuccess;
  weftCommGetAsyncError(comm, &ae);
  if (ae != weftSuccess) return std::string("async error: ") + weftGetLastError(nullptr);
  std::vector<uint8_t> got(view_elems * esz);
  if (!got.empty() && (cudaMemcpyAsync(got.data(), view, got.size(), cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                       cudaStreamSynchronize(st) != cudaSuccess))
    return "download failed";
  std::vector<uint8_t> want = host::reference_for_rank(c, dtype, op, root, count, rank, sends, untouched, kThreads);
  if (want.size() != got.size()) return "reference size mismatch";
  if (std::memcmp(want.data(), got.data(), got.size()) == 0) return "";
  size_t bad = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      ++bad;
      if (first == got.size()) first = i;
    }
  char msg[256];
  std::snprintf(msg, sizeof(msg), "%zu wrong bytes; first at element %zu of %zu (byte %zu: got 0x%02x, want 0x%02x)",
                bad, first / esz, view_elems, first, got[first], want[first]);
  return msg;
}

int collectives(const Options& o, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, o.ranks, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const size_t kBig = size_t(64) << 20;
  std::vector<size_t> counts = o.counts;
  // 16385 needs several words per thread in the one-shot kernel; 65537 and 131073 straddle
  // its limit on 2 ranks (512 KiB per peer) for the different element sizes.
  if (counts.empty()) counts = {0, 1, 7, 1024, 16385, 65537, 131073, (size_t(1) << 20) + 3, kBig};
  const size_t max_count = *std::max_element(counts.begin(), counts.end());
  const size_t max_bytes = std::max<size_t>(16, max_count * 8 * static_cast<size_t>(o.ranks));
  char *d_send = nullptr, *d_recv = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d_send), max_bytes));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&d_recv), max_bytes));
  void *h_send = nullptr, *h_recv = nullptr;
  if (o.reg) {
    WEFT_OK(weftCommRegister(comm, d_send, max_bytes, &h_send));
    WEFT_OK(weftCommRegister(comm, d_recv, max_bytes, &h_recv));
  }
  weftWindow_t w_send = nullptr, w_recv = nullptr;
  if (o.window >= 0) {
    WEFT_OK(weftCommWindowRegister(comm, d_send, max_bytes, &w_send, o.window));
    WEFT_OK(weftCommWindowRegister(comm, d_recv, max_bytes, &w_recv, o.window));
  }
  const Collective all[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                            Collective::AllToAll, Collective::Broadcast, Collective::Reduce};
  int cases = 0, failures = 0;
  uint64_t seed = 1;
  auto t0 = std::chrono::steady_clock::now();
  for (Collective c : all) {
    if (!o.only.empty() && o.only != coll_name(c)) continue;
    const bool reduces = c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
    const bool rooted = c == Collective::Broadcast || c == Collective::Reduce;
    for (int dtype = 0; dtype < weftNumTypes; ++dtype) {
      if (!o.type.empty() && o.type != host::dtype_name(dtype)) continue;
      for (int op = 0; op < (reduces ? weftNumOps : 1); ++op)
        for (size_t count : counts)
          for (int in_place = 0; in_place < 2; ++in_place)
            for (int root = 0; root < (rooted ? o.ranks : 1); ++root) {
              // The largest count runs for one type of each element size with one op, and
              // for one root (every type and op with --full): it is what takes the time.
              if (count == kBig && !o.full &&
                  ((reduces && op != weftSum) || root != o.ranks - 1 - (rooted ? 0 : o.ranks - 1) ||
                   !(dtype == weftInt8 || dtype == weftBfloat16 || dtype == weftFloat32 || dtype == weftFloat64)))
                continue;
              ++cases;
              ++seed;
              std::string err = run_case(comm, st, o.ranks, rank, c, dtype, op, count, in_place != 0, root, d_send,
                                         d_recv, seed);
              if (!err.empty()) {
                ++failures;
                if (failures <= 30)
                  std::printf("FAIL rank %d: %s %s %s count=%zu %s root=%d: %s\n", rank, coll_name(c),
                              host::dtype_name(dtype), reduces ? host::op_name(op) : "-", count,
                              in_place ? "in-place" : "out-of-place", root, err.c_str());
                if (err.find("async error") != std::string::npos || err.find("did not finish") != std::string::npos) {
                  std::printf("rank %d: stopping after a device error\n", rank);
                  std::fflush(stdout);
                  weftCommAbort(comm);
                  return 1;
                }
              }
            }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("rank %d: %d cases, %d failures, %.1f s\n", rank, cases, failures, secs);
  if (o.reg) {
    WEFT_OK(weftCommDeregister(comm, h_send));
    WEFT_OK(weftCommDeregister(comm, h_recv));
  }
  if (o.window >= 0) {  // every case synchronized its stream: the windows are idle
    WEFT_OK(weftCommWindowDeregister(comm, w_send));
    WEFT_OK(weftCommWindowDeregister(comm, w_recv));
  }
  cudaFree(d_send);
  cudaFree(d_recv);
  WEFT_OK(weftCommDestroy(comm));
  return failures == 0 ? 0 : 1;
}

int p2p(const Options& o, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, o.ranks, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const int R = o.ranks, next = (rank + 1) % R, prev = (rank + R - 1) % R;
  int failures = 0;
  for (size_t bytes : {size_t(0), size_t(1), size_t(4097), size_t(1) << 20, (size_t(8) << 20) + 5}) {
    std::vector<uint8_t> mine(bytes), from_prev(bytes), want(bytes);
    host::fill_random(weftUint8, weftSum, mine.data(), bytes, 7 + static_cast<uint64_t>(rank));
    host::fill_random(weftUint8, weftSum, want.data(), bytes, 7 + static_cast<uint64_t>(prev));
    char *ds = nullptr, *dr = nullptr, *dself = nullptr;
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&ds), bytes + 1));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dr), bytes + 1));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dself), bytes + 1));
    if (bytes) CUDA_OK(cudaMemcpyAsync(ds, mine.data(), bytes, cudaMemcpyHostToDevice, st));
    CUDA_OK(cudaMemsetAsync(dr, 0xEE, bytes + 1, st));
    CUDA_OK(cudaMemsetAsync(dself, 0xEE, bytes + 1, st));
    auto ws = reinterpret_cast<weftStream_t>(st);
    WEFT_OK(weftGroupStart());
    WEFT_OK(weftSend(ds, bytes, weftUint8, next, comm, ws));
    WEFT_OK(weftRecv(dr, bytes, weftUint8, prev, comm, ws));
    WEFT_OK(weftSend(ds, bytes, weftUint8, rank, comm, ws));
    WEFT_OK(weftRecv(dself, bytes, weftUint8, rank, comm, ws));
    WEFT_OK(weftGroupEnd());
    if (!gt::sync_bounded(ws, 60)) {
      std::printf("FAIL rank %d: p2p of %zu bytes did not finish\n", rank, bytes);
      return 1;
    }
    std::vector<uint8_t> got(bytes + 1), self(bytes + 1);
    CUDA_OK(cudaMemcpyAsync(got.data(), dr, bytes + 1, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaMemcpyAsync(self.data(), dself, bytes + 1, cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaStreamSynchronize(st));
    bool ok = std::memcmp(got.data(), want.data(), bytes) == 0 && got[bytes] == 0xEE &&
              std::memcmp(self.data(), mine.data(), bytes) == 0 && self[bytes] == 0xEE;
    if (!ok) {
      ++failures;
      std::printf("FAIL rank %d: p2p of %zu bytes delivered wrong data\n", rank, bytes);
    }
    cudaFree(ds);
    cudaFree(dr);
    cudaFree(dself);
  }
  std::printf("rank %d: p2p %s\n", rank, failures ? "FAILED" : "passed");
  WEFT_OK(weftCommDestroy(comm));
  return failures ? 1 : 0;
}

/// One replay of `ge`: `input` into `dsend`, `drecv` poisoned first; 1 (and a line) when a CUDA
/// call failed or the replay did not finish, else 0 and `got` holds `drecv`.
int replay_graph(cudaGraphExec_t ge, cudaStream_t st, void* dsend, void* drecv, const std::vector<uint8_t>& input,
                  std::vector<uint8_t>& got, int rank, int rep) {
  const size_t bytes = input.size();
  CUDA_OK(cudaMemcpyAsync(dsend, input.data(), bytes, cudaMemcpyHostToDevice, st));
  CUDA_OK(cudaMemsetAsync(drecv, 0xFF, bytes, st));
  CUDA_OK(cudaGraphLaunch(ge, st));
  if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(st), 60)) {
    std::printf("FAIL rank %d: graph replay %d did not finish\n", rank, rep);
    return 1;
  }
  got.resize(bytes);
  CUDA_OK(cudaMemcpyAsync(got.data(), drecv, bytes, cudaMemcpyDeviceToHost, st));
  CUDA_OK(cudaStreamSynchronize(st));
  return 0;
}

int graph(const Options& o, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, o.ranks, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int failures = 0;
  // One graph of `chain` AllReduce calls of `count` floats, each after the first in place on
  // the one before's result, replayed three times on new random inputs against the host's
  // AllReduce applied `chain` times. 1 on a failure that ends the test (a CUDA call, a replay
  // that does not finish), else 0; wrong results count in `failures`.
  auto check = [&](size_t count, int chain, uint64_t seed) -> int {
    const size_t bytes = count * 4;
    float *dsend = nullptr, *drecv = nullptr;
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dsend), bytes));
    CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&drecv), bytes));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    weftResult_t r = weftSuccess;
    for (int k = 0; k < chain && r == weftSuccess; ++k)
      r = weftAllReduce(k == 0 ? static_cast<const void*>(dsend) : drecv, drecv, count, weftFloat32, weftSum, comm,
                        reinterpret_cast<weftStream_t>(st));
    CUDA_OK(cudaStreamEndCapture(st, &g));
    if (r != weftSuccess) {
      std::printf("FAIL rank %d: %d AllReduce call(s) under capture: %s\n", rank, chain, weftGetLastError(nullptr));
      return 1;
    }
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(o.ranks));
      for (int q = 0; q < o.ranks; ++q) {
        sends[static_cast<size_t>(q)].resize(bytes);
        host::fill_random(weftFloat32, weftSum, sends[static_cast<size_t>(q)].data(), count, seed + 1000 * rep + q,
                          kThreads);
      }
      const std::vector<uint8_t> mine = sends[static_cast<size_t>(rank)];
      std::vector<uint8_t> want, got;
      for (int k = 0; k < chain; ++k) {
        want = host::reference_for_rank(Collective::AllReduce, weftFloat32, weftSum, 0, count, rank, sends, {}, kThreads);
        for (auto& v : sends) v = want;  // every rank's next input is this result
      }
      if (replay_graph(ge, st, dsend, drecv, mine, got, rank, rep) != 0) return 1;
      if (std::memcmp(got.data(), want.data(), bytes) != 0) {
        ++failures;
        std::printf("FAIL rank %d: graph replay %d (%d call(s) of %zu floats) is wrong\n", rank, rep, chain, count);
      }
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaFree(dsend);
    cudaFree(drecv);
    return 0;
  };
  // 2048 and 24577 floats run the one-shot kernel (its epochs must advance across replays),
  // 16 Mi the plan interpreter.
  for (size_t count : {size_t(2048), size_t(24577), size_t(16) << 20})
    if (check(count, 1, 0) != 0) return 1;
  // Back-to-back calls in one graph, each reading what the one before wrote: the one-shot
  // kernel's epochs advance within a replay, and with programmatic dependent launch
  // (WEFT_ONESHOT_PDL, the default) each call's launch overlaps the previous call's end,
  // which must not let it read its input early.
  if (check(2048, 4, 7000) != 0) return 1;
  failures += gt::graph_small(o.ranks, rank, comm);
  std::printf("rank %d: graph %s\n", rank, failures ? "FAILED" : "passed");
  WEFT_OK(weftCommDestroy(comm));
  return failures ? 1 : 0;
}

int initall(const Options& o) {
  const int ngpu = gt::probe_device_count();
  if (ngpu == 0) {
    std::printf("initall: no GPU, skipped\n");
    return gt::kSkip;
  }
  // One rank per GPU, or --ranks N sharing them round-robin (correctness only).
  const int ndev = o.ranks_given ? o.ranks : ngpu;
  std::vector<int> devlist(static_cast<size_t>(ndev));
  for (int d = 0; d < ndev; ++d) devlist[static_cast<size_t>(d)] = d % ngpu;
  std::vector<weftComm_t> comms(static_cast<size_t>(ndev));
  WEFT_OK(weftCommInitAll(comms.data(), ndev, devlist.data()));
  int failures = 0;
  // One thread drives every rank: the plan interpreter, then the one-shot kernel.
  for (size_t count : {(size_t(1) << 20) + 3, size_t(1001)}) {
    std::vector<std::vector<uint8_t>> sends(static_cast<size_t>(ndev));
    std::vector<int*> bufs(static_cast<size_t>(ndev));
    std::vector<cudaStream_t> streams(static_cast<size_t>(ndev));
    for (int d = 0; d < ndev; ++d) {
      sends[static_cast<size_t>(d)].resize(count * 4);
      host::fill_random(weftInt32, weftSum, sends[static_cast<size_t>(d)].data(), count, 50 + d, kThreads);
      CUDA_OK(cudaSetDevice(devlist[static_cast<size_t>(d)]));
      CUDA_OK(cudaStreamCreate(&streams[static_cast<size_t>(d)]));
      CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&bufs[static_cast<size_t>(d)]), count * 4));
      CUDA_OK(cudaMemcpy(bufs[static_cast<size_t>(d)], sends[static_cast<size_t>(d)].data(), count * 4, cudaMemcpyHostToDevice));
    }
    WEFT_OK(weftGroupStart());
    for (int d = 0; d < ndev; ++d)
      WEFT_OK(weftAllReduce(bufs[static_cast<size_t>(d)], bufs[static_cast<size_t>(d)], count, weftInt32, weftSum,
                            comms[static_cast<size_t>(d)], reinterpret_cast<weftStream_t>(streams[static_cast<size_t>(d)])));
    WEFT_OK(weftGroupEnd());
    for (int d = 0; d < ndev; ++d) {
      CUDA_OK(cudaSetDevice(devlist[static_cast<size_t>(d)]));
      if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(streams[static_cast<size_t>(d)]), 60)) {
        std::printf("FAIL initall: device %d did not finish\n", d);
        return 1;
      }
      std::vector<uint8_t> got(count * 4);
      CUDA_OK(cudaMemcpy(got.data(), bufs[static_cast<size_t>(d)], count * 4, cudaMemcpyDeviceToHost));
      auto want = host::reference_for_rank(Collective::AllReduce, weftInt32, weftSum, 0, count, d, sends, {}, kThreads);
      if (got != want) {
        ++failures;
        std::printf("FAIL initall: device %d has a wrong sum of %zu elements\n", d, count);
      }
      CUDA_OK(cudaFree(bufs[static_cast<size_t>(d)]));
      CUDA_OK(cudaStreamDestroy(streams[static_cast<size_t>(d)]));
    }
  }
  for (weftComm_t c : comms) WEFT_OK(weftCommDestroy(c));
  std::printf("initall, %d ranks on %d GPU(s): %s\n", ndev, ngpu, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}

int never_joins(int rank, const weftUniqueId& id) {
  setenv("WEFT_BOOTSTRAP_TIMEOUT", "3", 1);
  auto t0 = std::chrono::steady_clock::now();
  weftComm_t comm = nullptr;
  weftResult_t r = weftCommInitRank(&comm, 2, id, rank);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string msg = weftGetLastError(nullptr);
  std::printf("rank %d: weftCommInitRank returned %s after %.1f s: %s\n", rank, weftGetErrorString(r), s, msg.c_str());
  if (r == weftSuccess) return 1;
  if (s > 30) return 1;
  return msg.find("rank 1 of 2 did not join") != std::string::npos ? 0 : 1;
}

/// The fault cases' start: `nranks` ranks, a stream, `count` floats (1 Mi run the plan
/// interpreter; --counts 1024 the one-shot kernel) and one AllReduce that completes.
struct Fault {
  weftComm_t comm = nullptr;
  weftStream_t ws = nullptr;
  float* buf = nullptr;
  size_t count = 0;
};

int fault_start(const Options& o, int rank, const weftUniqueId& id, Fault* f, int nranks = 2) {
  WEFT_OK(weftCommInitRank(&f->comm, nranks, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  f->ws = reinterpret_cast<weftStream_t>(st);
  f->count = o.counts.empty() ? size_t(1) << 20 : o.counts.front();
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&f->buf), f->count * 4));
  CUDA_OK(cudaMemset(f->buf, 0, f->count * 4));
  WEFT_OK(weftAllReduce(f->buf, f->buf, f->count, weftFloat32, weftSum, f->comm, f->ws));
  return gt::sync_bounded(f->ws, 30) ? 0 : 1;
}

/// What rank 0 sees of an AllReduce that rank 1 never joins.
struct FaultSeen {
  bool finished = false;  ///< the kernel ended within 30 s
  double seconds = 0;
  weftResult_t async = weftSuccess;
  std::string message;
  weftResult_t again = weftSuccess;  ///< the next call's result
};

FaultSeen fault_seen_by_rank0(const Fault& f, int rank = 0) {
  FaultSeen r;
  auto t0 = std::chrono::steady_clock::now();
  weftResult_t launched = weftAllReduce(f.buf, f.buf, f.count, weftFloat32, weftSum, f.comm, f.ws);
  r.finished = launched == weftSuccess && gt::sync_bounded(f.ws, 30);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (weftCommGetAsyncError(f.comm, &r.async) != weftSuccess) r.async = weftInternalError;
  r.message = weftGetLastError(nullptr);
  std::printf("rank %d: kernel %s after %.1f s; async error %s: %s\n", rank, r.finished ? "ended" : "still running",
              r.seconds, weftGetErrorString(r.async), r.message.c_str());
  r.again = weftAllReduce(f.buf, f.buf, f.count, weftFloat32, weftSum, f.comm, f.ws);
  std::printf("rank %d: the next call returns %s\n", rank, weftGetErrorString(r.again));
  return r;
}

int peer_stops(const Options& o, int rank, const weftUniqueId& id) {
  setenv("WEFT_TIMEOUT", "3", 1);
  Fault f;
  if (fault_start(o, rank, id, &f) != 0) return 1;
  if (rank == 1) {
    // Stops taking part, stays alive until rank 0 has seen the timeout, then leaves.
    std::this_thread::sleep_for(std::chrono::seconds(12));
    weftCommAbort(f.comm);
    return 0;
  }
  FaultSeen seen = fault_seen_by_rank0(f);
  WEFT_OK(weftCommAbort(f.comm));
  const std::string& msg = seen.message;
  bool ok = seen.finished && seen.async == weftTimeout && seen.again == weftTimeout &&
            msg.find("rank 0") != std::string::npos && msg.find("thread block") != std::string::npos &&
            msg.find("rank 1") != std::string::npos;
  return ok ? 0 : 1;
}

int peer_dies(const Options& o, int rank, const weftUniqueId& id) {
  unsetenv("WEFT_TIMEOUT");  // the default deadline (600 s): only the peer watchdog ends the wait in time
  Fault f;
  if (fault_start(o, rank, id, &f, o.ranks) != 0) return 1;
  if (rank == 1) {
    // Rank 0 is inside the next collective by now, waiting for this rank's data. This rank
    // ends at once, destroying nothing, as a crash or a kill would end it (_exit rather
    // than SIGKILL only so that the launcher counts the exit as intended).
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::printf("rank 1: exits without a word\n");
    std::fflush(stdout);
    _exit(0);
  }
  FaultSeen seen = fault_seen_by_rank0(f, rank);
  // Destroy (not abort) with a dead peer: the meeting fails at once, and the arena is freed
  // because its only writer has exited.
  auto t1 = std::chrono::steady_clock::now();
  weftResult_t d = weftCommDestroy(f.comm);
  double ds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf("rank %d: weftCommDestroy returned %s after %.1f s\n", rank, weftGetErrorString(d), ds);
  // Across emulated nodes (WEFT_EMULATE_NODES=2) the network proxy may see the dead peer
  // first: its endpoint to rank 1 failed. Either way the error names rank 1.
  // Across hosts (--hosts) the watchdog cannot see rank 1's process: the news comes from the
  // network transport (an endpoint to rank 1 failed) or the bootstrap ring; it must name rank 1.
  const char* emu = std::getenv("WEFT_EMULATE_NODES");
  const bool emulated = emu != nullptr && std::atoi(emu) > 1;
  const size_t at1 = seen.message.find("rank 1");
  const bool names1 = at1 != std::string::npos && at1 + 6 < seen.message.size() &&
                      !std::isdigit(static_cast<unsigned char>(seen.message[at1 + 6]));
  const bool named = o.hosts > 1 ? names1
                     : emulated ? seen.message.find("rank 1") != std::string::npos &&
                                    (seen.message.find("exited") != std::string::npos ||
                                     seen.message.find("network transport failed") != std::string::npos)
                              : seen.message.find("rank 1 (process") != std::string::npos &&
                                    seen.message.find("exited") != std::string::npos;
  bool ok = seen.finished && seen.seconds < 10 && seen.async == weftRemoteError && seen.again == weftRemoteError &&
            d == weftSuccess && ds < 10 && named;
  return ok ? 0 : 1;
}

/// Expects `r` to be weftInvalidArgument with `needle` in the message.
int expect_invalid(int rank, const char* what, weftResult_t r, const char* needle) {
  std::string msg = weftGetLastError(nullptr);
  const bool ok = r == weftInvalidArgument && msg.find(needle) != std::string::npos;
  std::printf("rank %d: %s returns %s: %s%s\n", rank, what, weftGetErrorString(r), msg.c_str(), ok ? "" : "  <- FAIL");
  return ok ? 0 : 1;
}

int handles(int rank, const weftUniqueId& id) {
  int failures = 0;
  weftComm_t comm = nullptr;
  // Bad configuration values are errors of the initialization itself, before any rank
  // joins (so the id stays unused for the real communicator below).
  for (const auto& [name, value] : {std::pair<const char*, const char*>{"WEFT_FIFO_DEPTH", "010"},
                                    {"WEFT_INSTANCES", "-1"}, {"WEFT_TIMEOUT", "inf"}}) {
    setenv(name, value, 1);
    const std::string needle = std::string(name) + "='" + value + "'";
    failures += expect_invalid(rank, needle.c_str(), weftCommInitRank(&comm, 2, id, rank), needle.c_str());
    unsetenv(name);
  }
  WEFT_OK(weftCommInitRank(&comm, 2, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto ws = reinterpret_cast<weftStream_t>(st);
  // Registration is local: rank 0 registers two buffers, rank 1 none, and neither waits.
  float* buf = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buf), 1 << 20));
  if (rank == 0) {
    void *h1 = nullptr, *h2 = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    WEFT_OK(weftCommRegister(comm, buf, 1 << 20, &h1));
    WEFT_OK(weftCommRegister(comm, buf + 1024, 4096, &h2));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 1) {
      std::printf("rank 0: registering took %.1f s (waited for rank 1?)\n", s);
      ++failures;
    }
    WEFT_OK(weftCommDeregister(comm, h2));
    WEFT_OK(weftCommDeregister(comm, h1));
    failures += expect_invalid(rank, "weftCommRegister past the allocation",
                               weftCommRegister(comm, buf, (1 << 20) + 4, &h1), "runs past its allocation");
  }
  // Counts whose byte size wraps are errors, never a shorter transfer.
  const size_t huge = size_t(1) << 62;
  failures += expect_invalid(rank, "weftAllReduce of 2^62 floats", weftAllReduce(buf, buf, huge, weftFloat32, weftSum, comm, ws),
                             "overflows 64 bits");
  failures += expect_invalid(rank, "weftAllGather of 2^63 bytes x 2 ranks",
                             weftAllGather(buf, buf, size_t(1) << 63, weftUint8, comm, ws), "overflows 64 bits");
  failures += expect_invalid(rank, "weftSend of 2^62 floats", weftSend(buf, huge, weftFloat32, 1 - rank, comm, ws),
                             "overflows 64 bits");
  // The communicator still works.
  WEFT_OK(weftAllReduce(buf, buf, 1024, weftFloat32, weftSum, comm, ws));
  if (!gt::sync_bounded(ws, 30)) return 1;
  WEFT_OK(weftCommDestroy(comm));
  // A destroyed handle: an error from every call, not a double free or a hang.
  failures += expect_invalid(rank, "weftCommDestroy again", weftCommDestroy(comm), "destroyed");
  failures += expect_invalid(rank, "weftCommAbort after destroy", weftCommAbort(comm), "destroyed");
  failures += expect_invalid(rank, "weftAllReduce after destroy",
                             weftAllReduce(buf, buf, 1024, weftFloat32, weftSum, comm, ws), "destroyed");
  int n = 0;
  failures += expect_invalid(rank, "weftCommCount after destroy", weftCommCount(comm, &n), "destroyed");
  // Never a communicator at all.
  failures += expect_invalid(rank, "weftCommCount of a stray pointer",
                             weftCommCount(reinterpret_cast<weftComm_t>(buf), &n), "is not one");
  cudaFree(buf);
  std::printf("rank %d: handles %s\n", rank, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}

/// Two ranks on two "hosts" (WEFT_HOST_ID): what must be refused across hosts is, with an
/// error naming the host, and the communicator stays usable (an AllReduce checked after).
int hosts_refuse(int rank, const weftUniqueId& id) {
  setenv("WEFT_HOST_ID", rank == 0 ? "host0" : "host1", 1);
  int failures = 0;
  weftComm_t comm = nullptr;
  WEFT_OK(weftCommInitRank(&comm, 2, id, rank));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto ws = reinterpret_cast<weftStream_t>(st);
  const size_t count = 1 << 16;
  float* buf = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&buf), count * 4));
  // A memory channel maps the peer's buffer through CUDA IPC: refused on both ranks.
  const int peer = 1 - rank;
  weftMemoryChannel_t ch = nullptr;
  failures += expect_invalid(rank, "weftCommConnectMemoryChannels to another host",
                             weftCommConnectMemoryChannels(comm, &peer, 1, buf, count * 4, 0, &ch), "on another host");
  // Registration is local and works.
  void* h = nullptr;
  WEFT_OK(weftCommRegister(comm, buf, count * 4, &h));
  WEFT_OK(weftCommDeregister(comm, h));
  // Collectives run over the network FIFOs: every rank contributes rank + 1.
  std::vector<float> mine(count, static_cast<float>(rank + 1)), got(count);
  CUDA_OK(cudaMemcpy(buf, mine.data(), count * 4, cudaMemcpyHostToDevice));
  WEFT_OK(weftAllReduce(buf, buf, count, weftFloat32, weftSum, comm, ws));
  if (!gt::sync_bounded(ws, 60)) return 1;
  CUDA_OK(cudaMemcpy(got.data(), buf, count * 4, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < count; ++i)
    if (got[i] != 3.0f) {
      std::printf("rank %d: element %zu is %g after the AllReduce, 3 expected\n", rank, i, got[i]);
      ++failures;
      break;
    }
  WEFT_OK(weftCommDestroy(comm));
  cudaFree(buf);
  std::printf("rank %d: hosts_refuse %s\n", rank, failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}

std::vector<size_t> parse_counts(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!item.empty()) out.push_back(std::strtoull(item.c_str(), nullptr, 0));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::printf("usage: %s collectives|p2p|graph|initall|never_joins|peer_stops|peer_dies|handles|hosts_refuse [--ranks N] [--full] [--counts a,b] [--only COLL] [--type T] [--hosts H] [--register] [--window sym|default]\n", argv[0]);
    return 2;
  }
  std::string cmd = argv[1];
  Options o;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) {
      o.ranks = std::atoi(argv[++i]);
      o.ranks_given = true;
      if (o.ranks < 1 || o.ranks > 64) {
        std::printf("--ranks %s: need 1 to 64\n", argv[i]);
        return 2;
      }
    }
    else if (a == "--full") o.full = true;
    else if (a == "--counts" && i + 1 < argc) o.counts = parse_counts(argv[++i]);
    else if (a == "--only" && i + 1 < argc) o.only = argv[++i];
    else if (a == "--type" && i + 1 < argc) o.type = argv[++i];
    else if (a == "--hosts" && i + 1 < argc) {
      o.hosts = std::atoi(argv[++i]);
      if (o.hosts < 1 || o.hosts > o.ranks) {
        std::printf("--hosts %s: need 1 to --ranks (give --ranks first)\n", argv[i]);
        return 2;
      }
    }
    else if (a == "--register") o.reg = true;
    else if (a == "--window" && i + 1 < argc) {
      const std::string w = argv[++i];
      if (w != "sym" && w != "default") {
        std::printf("--window %s: sym or default\n", w.c_str());
        return 2;
      }
      o.window = w == "sym" ? WEFT_WIN_COLL_SYMMETRIC : WEFT_WIN_DEFAULT;
    }
  }
  // --hosts: each rank process takes its host identity before it joins (plan/placement.hpp).
  auto on_host = [&](auto body) {
    return [&o, body](int r, const weftUniqueId& id) {
      if (o.hosts > 0) setenv("WEFT_HOST_ID", ("host" + std::to_string(r * o.hosts / o.ranks)).c_str(), 1);
      return body(r, id);
    };
  };
  if (cmd == "collectives")
    return gt::run_ranks(o.ranks, on_host([&](int r, const weftUniqueId& id) { return collectives(o, r, id); }), 1800, cmd);
  if (cmd == "p2p")
    return gt::run_ranks(o.ranks, on_host([&](int r, const weftUniqueId& id) { return p2p(o, r, id); }), 300, cmd);
  if (cmd == "graph")
    return gt::run_ranks(o.ranks, on_host([&](int r, const weftUniqueId& id) { return graph(o, r, id); }), 300, cmd);
  if (cmd == "initall") return initall(o);
  if (cmd == "never_joins") {
    setenv("WEFT_BOOTSTRAP_TIMEOUT", "3", 1);  // the root lives in this process
    return gt::run_ranks(2, never_joins, 60, cmd, {1});
  }
  if (cmd == "peer_stops")
    return gt::run_ranks(2, [&](int r, const weftUniqueId& id) { return peer_stops(o, r, id); }, 90, cmd);
  if (cmd == "peer_dies")
    return gt::run_ranks(o.ranks_given ? o.ranks : 2,
                         on_host([&](int r, const weftUniqueId& id) { return peer_dies(o, r, id); }), 120, cmd);
  if (cmd == "handles") return gt::run_ranks(2, handles, 120, cmd);
  if (cmd == "hosts_refuse") return gt::run_ranks(2, hosts_refuse, 120, cmd);
  std::printf("unknown test '%s'\n", cmd.c_str());
  return 2;
}
