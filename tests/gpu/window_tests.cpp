// Memory windows and CTA policies through weft's C API, one process per rank (launcher.hpp),
// ranks sharing the GPUs where there are fewer:
//
//   policy --ranks N   weftCommSetCtaPolicy: every rank alike (EFFICIENCY|ZERO is ZERO, read
//                      back); ranks that disagree all fail (weftInvalidUsage naming rank 0's
//                      and another's value) and keep their policy; an out-of-range value on
//                      one rank fails every rank (weftInvalidArgument).
//   refuse --ranks N   window registration refused on every rank when one rank passes a NULL
//                      buffer (naming it), then a good registration still works (the ranks'
//                      window counts stayed in step); bad flags likewise; deregistering a
//                      window twice is weftInvalidArgument.
//   mismatch           2 ranks, symmetric windows, ZERO policy: rank 1 passes its AllGather's
//                      receive buffer 4 KiB further into its window than rank 0. Copy
//                      engines are not allowed to write the wrong place silently: both ranks
//                      must see weftInvalidUsage ("another copy-engine call") within seconds.
//
// Exit codes: 0 pass, 1 fail, 77 skipped without a GPU.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "gpu_check.hpp"
#include "util/launcher.hpp"
#include "weft/weft.h"

namespace gt = weft::gputest;

namespace {

int ranks_of(int argc, char** argv) {
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--ranks") return std::atoi(argv[i + 1]);
  return 2;
}

bool says(const char* what) {
  const std::string m = weftGetLastError(nullptr);
  if (m.find(what) != std::string::npos) return true;
  std::printf("message '%s' lacks '%s'\n", m.c_str(), what);
  return false;
}

int policy(int nranks, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, nranks, id, rank));
  int p = -1;
  WEFT_OK(weftCommGetCtaPolicy(comm, &p));
  if (p != WEFT_CTA_POLICY_DEFAULT) return std::printf("initial policy %d\n", p), 1;
  WEFT_OK(weftCommSetCtaPolicy(comm, WEFT_CTA_POLICY_EFFICIENCY | WEFT_CTA_POLICY_ZERO));
  WEFT_OK(weftCommGetCtaPolicy(comm, &p));
  if (p != WEFT_CTA_POLICY_ZERO) return std::printf("both flags gave %d, not ZERO\n", p), 1;
  // Rank 1 disagrees: every rank fails, and keeps ZERO.
  weftResult_t r = weftCommSetCtaPolicy(comm, rank == 1 ? WEFT_CTA_POLICY_DEFAULT : WEFT_CTA_POLICY_EFFICIENCY);
  if (r != weftInvalidUsage || !says("disagree")) return std::printf("rank %d: disagreement gave %d\n", rank, r), 1;
  WEFT_OK(weftCommGetCtaPolicy(comm, &p));
  if (p != WEFT_CTA_POLICY_ZERO) return std::printf("policy changed to %d by a failed call\n", p), 1;
  r = weftCommSetCtaPolicy(comm, rank == nranks - 1 ? 7 : WEFT_CTA_POLICY_DEFAULT);
  if (r != weftInvalidArgument || !says("passed CTA policy 7")) return std::printf("rank %d: 7 gave %d\n", rank, r), 1;
  WEFT_OK(weftCommDestroy(comm));
  return 0;
}

int refuse(int nranks, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, nranks, id, rank));
  void* buf = nullptr;
  WEFT_OK(weftMemAlloc(&buf, 1 << 20));
  weftWindow_t w = reinterpret_cast<weftWindow_t>(0x1);
  weftResult_t r = weftCommWindowRegister(comm, rank == 1 ? nullptr : buf, 1 << 20, &w, WEFT_WIN_COLL_SYMMETRIC);
  if (r != weftInvalidArgument || w != nullptr || !says("rank 1 refused its arguments"))
    return std::printf("rank %d: a NULL buffer on rank 1 gave %d\n", rank, r), 1;
  r = weftCommWindowRegister(comm, buf, 1 << 20, &w, 5);
  if (r != weftInvalidArgument || !says("winFlags")) return std::printf("rank %d: flags 5 gave %d\n", rank, r), 1;
  WEFT_OK(weftCommWindowRegister(comm, buf, 1 << 20, &w, WEFT_WIN_DEFAULT));
  WEFT_OK(weftCommWindowDeregister(comm, w));
  r = weftCommWindowDeregister(comm, w);
  if (r != weftInvalidArgument || !says("not registered")) return std::printf("rank %d: twice gave %d\n", rank, r), 1;
  WEFT_OK(weftMemFree(buf));
  WEFT_OK(weftCommDestroy(comm));
  return 0;
}

int mismatch(int nranks, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, nranks, id, rank));
  WEFT_OK(weftCommSetCtaPolicy(comm, WEFT_CTA_POLICY_ZERO));
  const size_t count = 1024, bytes = 1 << 20;
  void *send = nullptr, *recv = nullptr;
  WEFT_OK(weftMemAlloc(&send, bytes));
  WEFT_OK(weftMemAlloc(&recv, bytes));
  weftWindow_t ws, wr;
  WEFT_OK(weftCommWindowRegister(comm, send, bytes, &ws, WEFT_WIN_COLL_SYMMETRIC));
  WEFT_OK(weftCommWindowRegister(comm, recv, bytes, &wr, WEFT_WIN_COLL_SYMMETRIC));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  char* out = static_cast<char*>(recv) + (rank == 1 ? 4096 : 0);
  const auto t0 = std::chrono::steady_clock::now();
  WEFT_OK(weftAllGather(send, out, count, weftFloat32, comm, reinterpret_cast<weftStream_t>(st)));
  if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(st), 60)) return std::printf("rank %d: stream hung\n", rank), 1;
  weftResult_t ae = weftSuccess;
  WEFT_OK(weftCommGetAsyncError(comm, &ae));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ae != weftInvalidUsage || !says("another copy-engine call"))
    return std::printf("rank %d: mismatched offsets gave %d after %.1f s\n", rank, ae, s), 1;
  std::printf("rank %d: mismatch reported after %.2f s: %s\n", rank, s, weftGetLastError(nullptr));
  weftCommAbort(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::printf("usage: %s policy|refuse|mismatch [--ranks N]\n", argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  const int n = ranks_of(argc, argv);
  if (cmd == "policy") return gt::run_ranks(n, [n](int r, const weftUniqueId& id) { return policy(n, r, id); }, 120, cmd);
  if (cmd == "refuse") return gt::run_ranks(n, [n](int r, const weftUniqueId& id) { return refuse(n, r, id); }, 120, cmd);
  if (cmd == "mismatch") return gt::run_ranks(2, [](int r, const weftUniqueId& id) { return mismatch(2, r, id); }, 120, cmd);
  std::printf("unknown test '%s'\n", cmd.c_str());
  return 2;
}
