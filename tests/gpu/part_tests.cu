// GPU tests of partitioned communication (label gpu), one process per rank (launcher.hpp;
// ranks may share one GPU). Every case writes random data from a kernel that readies it,
// poisons every receive buffer first, and compares every byte with what the host computes.
//
//   p2p    --ranks N   each rank sends to rank+1 and receives from rank-1 (the kernel-copy
//                      path, or with --path proxy the progression-engine path): device pready at thread, warp and block granularity with
//                      thresholds 1, 4 and all partitions, three epochs each; device parrived
//                      (a kernel that waits for each partition and copies it out) and host
//                      parrived; then host pready with odd sizes
//   coll   --ranks N   partitioned AllReduce (int32 sum, float32 max, float64 sum) and
//                      Broadcast from every root, three epochs, uneven chunks
//   reuse  --ranks N [--epochs E]   many epochs back to back on one request each (part_reuse.cu:
//                      E at block granularity, E at warp granularity with threshold 3, E/2
//                      at thread granularity with threshold 64, E of a partitioned
//                      AllReduce; E defaults to 200): new random data every epoch, the
//                      receive buffer poisoned before each, every element checked on the
//                      device (after device parrived) and counted; a line per case and
//                      progress at each quarter; an epoch that takes longer than 10 s (or a
//                      host wait longer than WEFT_TIMEOUT, 20 s unless set) fails naming it
//   arrived [--epochs E]  device parrived's cache of the started epoch over E epochs (default
//                      200) of plain launches and CUDA graph replays, on one GPU without
//                      ranks (part_arrived.cu): every answer against the host's epoch
//   misuse             every misuse is an error with its message: device pready twice and
//                      out of range (p2p and collective), host pready twice, out of range,
//                      start while active, partition counts that differ from the peer's
//
// --path kernel|proxy|env picks the context's transfer path (weftPartCommCreateWithPath;
// env: weftPartPathDefault, i.e. WEFT_PART_PATH); default kernel. With WEFT_EMULATE_NODES=2
// and the proxy path, peers on the other emulated node are reached over UCX, staged through
// page-locked memory where UCX cannot register GPU memory or WEFT_PART_STAGE=1 (exit 77,
// skipped, only where UCX itself is not available: no libucp.so.0 or no UCX headers at build).
//
// WEFT_PART_TEST_TRACE=1 prints a line per p2p case and epoch (launch, each wait's time). A
// failed p2p send wait always prints a diagnosis: whether the producer and consumer kernels
// finished, and the sender's device state (partitions claimed, transport partitions counted
// complete, the sent counter).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "net/ucx_transport.hpp"
#include "part_common.cuh"

using namespace parttest;

int arrived_epochs(long long epochs);  // part_arrived.cu

namespace {

/// One thread per partition: waits (bounded) for parrived, then copies the partition out.
__global__ void consume(PrecvDeviceHandle h, uint64_t* out, int* timed_out) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= h.partitions) return;
  const uint64_t t0 = clock64();
  while (!h.parrived(p)) {
    if (clock64() - t0 > 60ull * 2000000000ull) {
      atomicExch(timed_out, 1);
      return;
    }
  }
  const uint64_t words = h.partition_bytes / 8;
  const volatile uint64_t* src = reinterpret_cast<const volatile uint64_t*>(h.buf) + p * words;
  for (uint64_t w = 0; w < words; ++w) out[p * words + w] = src[w];
}

__global__ void misuse_kernel(PsendDeviceHandle h, int what) {
  if (what == 0) {  // twice
    h.pready_block(0);
    h.pready_block(0);
    for (uint32_t p = 1; p < h.partitions; ++p) h.pready_block(p);
  } else {          // out of range, after every valid one
    for (uint32_t p = 0; p <= h.partitions; ++p) h.pready_block(p);
  }
}

int p2p(int nranks, int rank, const weftUniqueId& id) {
  Comm c;
  if (int rc = open_comm(nranks, rank, id, c)) return rc;
  // Load both kernels now. With CUDA's lazy loading (the default since 12.2) the first launch
  // of a kernel may wait for the context to go idle; launched while this rank's consumer
  // spins (it waits for the previous rank's producer, which waits the same way), every rank
  // stalls until the consumers' own timeout. CUDA's guide names this hazard and this cure.
  cudaFuncAttributes fa;
  CUDA_OK(cudaFuncGetAttributes(&fa, produce));
  CUDA_OK(cudaFuncGetAttributes(&fa, consume));
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  constexpr uint32_t kBlocks = 24, kThreads = 256;
  constexpr uint64_t kElems = kBlocks * kThreads;
  uint64_t *src = nullptr, *dst = nullptr, *out = nullptr;
  int *flag = nullptr, *scratch = nullptr;
  CUDA_OK(cudaMalloc(&src, kElems * 8));
  CUDA_OK(cudaMalloc(&dst, kElems * 8));
  CUDA_OK(cudaMalloc(&out, kElems * 8));
  CUDA_OK(cudaMalloc(&flag, sizeof(int)));
  CUDA_OK(cudaMalloc(&scratch, sizeof(int)));
  std::vector<uint64_t> host(kElems), got(kElems);
  uint64_t* pinned = nullptr;  // explain_send's: stamps, counters, control words
  CUDA_OK(cudaMallocHost(&pinned, (2 * kElems + weft::part::kCtlWords) * 8));
  int tag = 0;
  for (int gran = 0; gran < 3; ++gran) {
    const uint32_t per = gran == 0 ? 1 : gran == 1 ? 32 : kThreads;  // elements per partition
    const uint32_t parts = static_cast<uint32_t>(kElems / per);
    for (uint32_t threshold : {1u, 4u, parts}) {
      ++tag;
      weftPrequest_t s = nullptr, r = nullptr;
      WEFT_OK(weftPsendInit(src, static_cast<int>(parts), per, weftUint64, next, tag, c.pc, &s));
      WEFT_OK(weftPrecvInit(dst, static_cast<int>(parts), per, weftUint64, prev, tag, c.pc, &r));
      weftPdevRequest_t d = nullptr;
      const void* dh = nullptr;
      WEFT_OK(weftPdevRequestCreate(s, static_cast<int>(threshold), &d, &dh));
      PrecvDeviceHandle rh;
      WEFT_OK(weftPrecvDeviceHandle(r, &rh, sizeof(rh)));
      for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
        CUDA_OK(cudaMemset(dst, 0xA5, kElems * 8));  // poison, before the sender may write
        CUDA_OK(cudaMemset(out, 0x5A, kElems * 8));
        CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
        CUDA_OK(cudaDeviceSynchronize());
        WEFT_OK(weftPstart(s));
        WEFT_OK(weftPstart(r));
        weftPrequest_t both[2] = {s, r};
        WEFT_OK(weftPbufPrepareAll(2, both));
        PsendDeviceHandle sh;
        CUDA_OK(cudaMemcpy(&sh, dh, sizeof(sh), cudaMemcpyDeviceToHost));
        CHECK((sh.ready != nullptr) == expect_proxy(), "the %s path was asked for, the handle is on the %s path",
              path_name(), sh.ready != nullptr ? "proxy" : "kernel");
        const uint64_t seed = (static_cast<uint64_t>(rank) << 32) | (static_cast<uint64_t>(tag) << 8) | epoch;
        // The consumer waits for the previous rank's producer: it must not sit before this
        // rank's producer on one stream (every rank would wait for the one before it). The
        // producer goes first, so that nothing this rank launches waits behind a spinning kernel.
        timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (trace())
          std::printf("rank %d: trace: gran %d threshold %u epoch %llu: %u partitions, launching\n", rank, gran,
                      threshold, (unsigned long long)epoch, parts);
        produce<<<kBlocks, kThreads, 0, c.stream>>>(sh, src, seed, gran);
        consume<<<(parts + 255) / 256, 256, 0, c.stream2>>>(rh, out, flag);
        CUDA_OK(cudaGetLastError());
        const weftResult_t sw = weftPwait(s);
        if (sw != weftSuccess) explain_send(sh, epoch, c.stream, c.stream2, pinned);
        WEFT_OK(sw);
        if (trace()) std::printf("rank %d: trace: send wait done at %.3f s\n", rank, seconds_since(t0));
        WEFT_OK(weftPwait(r));
        if (trace()) std::printf("rank %d: trace: receive wait done at %.3f s\n", rank, seconds_since(t0));
        CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), 120), "the producer did not finish");
        CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream2), 120), "the consumer did not finish");
        int timed_out = 0;
        CUDA_OK(cudaMemcpy(&timed_out, flag, sizeof(int), cudaMemcpyDeviceToHost));
        CHECK(timed_out == 0, "device parrived never saw a partition (gran %d threshold %u)", gran, threshold);
        const uint64_t pseed = (static_cast<uint64_t>(prev) << 32) | (static_cast<uint64_t>(tag) << 8) | epoch;
        for (uint64_t i = 0; i < kElems; ++i) host[i] = value(pseed, i);
        CUDA_OK(cudaMemcpy(got.data(), dst, kElems * 8, cudaMemcpyDeviceToHost));
        for (uint64_t i = 0; i < kElems; ++i)
          CHECK(got[i] == host[i], "gran %d threshold %u epoch %llu: element %llu (partition %llu) is %016llx, "
                "expected %016llx", gran, threshold, (unsigned long long)epoch, (unsigned long long)i,
                (unsigned long long)(i / per), (unsigned long long)got[i], (unsigned long long)host[i]);
        CUDA_OK(cudaMemcpy(got.data(), out, kElems * 8, cudaMemcpyDeviceToHost));
        for (uint64_t i = 0; i < kElems; ++i)
          CHECK(got[i] == host[i], "device parrived copy: element %llu differs", (unsigned long long)i);
        for (uint32_t p = 0; p < parts; p += 7) {
          int arrived = 0;
          WEFT_OK(weftParrived(r, static_cast<int>(p), &arrived));
          CHECK(arrived == 1, "host parrived(%u) is false after wait", p);
        }
      }
      WEFT_OK(weftPdevRequestFree(d));
      WEFT_OK(weftPrequestFree(s));
      WEFT_OK(weftPrequestFree(r));
      std::printf("rank %d: p2p (%s path) granularity %d threshold %u: 3 epochs, every byte right\n", rank,
                  path_name(), gran, threshold);
    }
  }
  // Host pready with odd sizes (bytes, not 16-aligned partitions), partitions readied in reverse.
  {
    constexpr uint32_t parts = 5;
    constexpr uint64_t count = 1001;
    char *hs = nullptr, *hd = nullptr;
    CUDA_OK(cudaMalloc(&hs, parts * count));
    CUDA_OK(cudaMalloc(&hd, parts * count));
    weftPrequest_t s = nullptr, r = nullptr;
    WEFT_OK(weftPsendInit(hs, parts, count, weftUint8, next, 999, c.pc, &s));
    WEFT_OK(weftPrecvInit(hd, parts, count, weftUint8, prev, 999, c.pc, &r));
    std::vector<unsigned char> mine(parts * count), want(parts * count), have(parts * count);
    for (uint64_t epoch = 1; epoch <= 2; ++epoch) {
      for (uint64_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<unsigned char>(value(rank * 7 + epoch, i));
      for (uint64_t i = 0; i < want.size(); ++i) want[i] = static_cast<unsigned char>(value(prev * 7 + epoch, i));
      CUDA_OK(cudaMemcpy(hs, mine.data(), mine.size(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(hd, 0xA5, parts * count));
      CUDA_OK(cudaDeviceSynchronize());
      WEFT_OK(weftPstart(s));
      WEFT_OK(weftPstart(r));
      weftPrequest_t both[2] = {s, r};
      WEFT_OK(weftPbufPrepareAll(2, both));
      for (int p = parts - 1; p >= 0; --p) WEFT_OK(weftPready(p, s));
      WEFT_OK(weftPwait(s));
      WEFT_OK(weftPwait(r));
      CUDA_OK(cudaMemcpy(have.data(), hd, have.size(), cudaMemcpyDeviceToHost));
      for (uint64_t i = 0; i < have.size(); ++i)
        CHECK(have[i] == want[i], "host pready epoch %llu: byte %llu is %02x, expected %02x", (unsigned long long)epoch,
              (unsigned long long)i, have[i], want[i]);
    }
    WEFT_OK(weftPrequestFree(s));
    WEFT_OK(weftPrequestFree(r));
    std::printf("rank %d: host pready, 5 partitions of 1001 bytes, 2 epochs: every byte right\n", rank);
  }
  CUDA_OK(cudaFreeHost(pinned));
  return close_comm(c, scratch);
}

template <typename T>
int run_coll(Comm& c, int nranks, int rank, bool bcast, int root, weftDataType_t dt, weftRedOp_t op, int tag) {
  constexpr uint32_t parts = 12;
  constexpr uint64_t count = 1000 + 3;  // not a multiple of the rank count
  const uint64_t n = parts * count;
  T* buf = nullptr;
  int* flag = nullptr;
  CUDA_OK(cudaMalloc(&buf, n * sizeof(T)));
  CUDA_OK(cudaMalloc(&flag, sizeof(int)));
  weftPcoll_t coll = nullptr;
  if (bcast) WEFT_OK(weftPbcastInit(buf, parts, count, dt, root, tag, c.pc, &coll));
  else WEFT_OK(weftPallreduceInit(buf, parts, count, dt, op, tag, c.pc, &coll));
  const void* dh = nullptr;
  WEFT_OK(weftPcollDeviceHandle(coll, &dh));
  std::vector<T> got(n), want(n);
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    CUDA_OK(cudaMemset(buf, 0xA5, n * sizeof(T)));  // poison; the kernel overwrites what it owns
    CUDA_OK(cudaMemset(flag, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    WEFT_OK(weftPcollStart(coll));
    WEFT_OK(weftPcollPbufPrepare(coll));
    PcollDeviceHandle h;
    CUDA_OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
    const int write = !bcast || rank == root;
    coll_kernel<T><<<parts, 256, 0, c.stream>>>(h, buf, rank, epoch, write, flag);
    CUDA_OK(cudaGetLastError());
    WEFT_OK(weftPcollWait(coll));
    CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), 120), "collective kernel did not finish");
    for (uint64_t i = 0; i < n; ++i) {
      if (bcast) {
        want[i] = gen<T>(root, epoch, i);
        continue;
      }
      T acc = gen<T>(0, epoch, i);
      for (int r = 1; r < nranks; ++r) {
        const T v = gen<T>(r, epoch, i);
        acc = op == weftMax ? (v > acc ? v : acc) : static_cast<T>(acc + v);
      }
      want[i] = acc;
    }
    CUDA_OK(cudaMemcpy(got.data(), buf, n * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(std::memcmp(got.data(), want.data(), n * sizeof(T)) == 0,
          "%s epoch %llu: the result differs from the host's (first at element %llu)", bcast ? "pbcast" : "pallreduce",
          (unsigned long long)epoch, [&] {
            uint64_t i = 0;
            while (i < n && std::memcmp(&got[i], &want[i], sizeof(T)) == 0) ++i;
            return (unsigned long long)i;
          }());
    int not_arrived = 0;
    CUDA_OK(cudaMemcpy(&not_arrived, flag, sizeof(int), cudaMemcpyDeviceToHost));
    CHECK(not_arrived == 0, "device parrived was false after pready_block for %d partitions", not_arrived);
    int arrived = 0;
    WEFT_OK(weftPcollParrived(coll, parts - 1, &arrived));
    CHECK(arrived == 1, "host parrived is false after wait");
  }
  WEFT_OK(weftPcollFree(coll));
  CUDA_OK(cudaFree(buf));
  CUDA_OK(cudaFree(flag));
  std::printf("rank %d: %s%s type %d: 3 epochs, every element right\n", rank, bcast ? "pbcast from " : "pallreduce",
              bcast ? std::to_string(root).c_str() : "", dt);
  return 0;
}

int coll(int nranks, int rank, const weftUniqueId& id) {
  Comm c;
  if (int rc = open_comm(nranks, rank, id, c)) return rc;
  int* scratch = nullptr;
  CUDA_OK(cudaMalloc(&scratch, sizeof(int)));
  if (run_coll<int32_t>(c, nranks, rank, false, 0, weftInt32, weftSum, 1)) return 1;
  if (run_coll<float>(c, nranks, rank, false, 0, weftFloat32, weftMax, 2)) return 1;
  if (run_coll<double>(c, nranks, rank, false, 0, weftFloat64, weftSum, 3)) return 1;
  for (int root = 0; root < nranks; ++root)
    if (run_coll<int32_t>(c, nranks, rank, true, root, weftInt32, weftSum, 10 + root)) return 1;
  return close_comm(c, scratch);
}

int misuse(int nranks, int rank, const weftUniqueId& id) {
  setenv("WEFT_TIMEOUT", "5", 1);
  Comm c;
  if (int rc = open_comm(nranks, rank, id, c)) return rc;
  int* scratch = nullptr;
  CUDA_OK(cudaMalloc(&scratch, sizeof(int)));
  const int peer = 1 - rank;
  char* buf = nullptr;
  CUDA_OK(cudaMalloc(&buf, 1 << 20));
  // Partition counts that differ: both sides get the error, naming both.
  {
    weftPrequest_t q = nullptr;
    if (rank == 0) WEFT_OK(weftPsendInit(buf, 4, 16, weftFloat32, peer, 1, c.pc, &q));
    else WEFT_OK(weftPrecvInit(buf, 5, 16, weftFloat32, peer, 1, c.pc, &q));
    WEFT_OK(weftPstart(q));
    WEFT_FAILS(weftPbufPrepare(q), weftInvalidUsage, "does not match");
    WEFT_FAILS(weftPrequestFree(q), weftInvalidUsage, "free of an active request");
  }
  if (barrier(c, scratch)) return 1;
  // Host misuse on a working pair.
  weftPrequest_t q = nullptr;
  if (rank == 0) WEFT_OK(weftPsendInit(buf, 4, 64, weftFloat32, peer, 2, c.pc, &q));
  else WEFT_OK(weftPrecvInit(buf, 4, 64, weftFloat32, peer, 2, c.pc, &q));
  WEFT_FAILS(weftPbufPrepare(q), weftInvalidUsage, "inactive");
  WEFT_OK(weftPstart(q));
  WEFT_FAILS(weftPstart(q), weftInvalidUsage, "start while active");
  WEFT_OK(weftPbufPrepare(q));
  if (rank == 0) {
    WEFT_FAILS(weftPready(4, q), weftInvalidArgument, "out of range");
    WEFT_FAILS(weftPready(-1, q), weftInvalidArgument, "out of range");
    WEFT_OK(weftPready(1, q));
    WEFT_FAILS(weftPready(1, q), weftInvalidUsage, "pready twice");
    for (int p : {0, 2, 3}) WEFT_OK(weftPready(p, q));
  } else {
    int f = 0;
    WEFT_FAILS(weftParrived(q, 4, &f), weftInvalidArgument, "out of range");
    WEFT_FAILS(weftPready(0, q), weftInvalidUsage, "pready on a receive request");
  }
  WEFT_OK(weftPwait(q));
  // Device misuse: twice, then out of range; the receiver still gets every valid partition.
  weftPdevRequest_t d = nullptr;
  const void* dh = nullptr;
  if (rank == 0) WEFT_OK(weftPdevRequestCreate(q, 1, &d, &dh));
  for (int what = 0; what < 2; ++what) {
    WEFT_OK(weftPstart(q));
    WEFT_OK(weftPbufPrepare(q));
    if (rank == 0) {
      PsendDeviceHandle h;
      CUDA_OK(cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost));
      misuse_kernel<<<1, 128, 0, c.stream>>>(h, what);
      CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), 60), "misuse kernel did not finish");
      WEFT_FAILS(weftPwait(q), weftInvalidUsage, what == 0 ? "twice for partition 0" : "partition 4, out of range");
    } else {
      WEFT_OK(weftPwait(q));
    }
  }
  if (d) WEFT_OK(weftPdevRequestFree(d));
  WEFT_OK(weftPrequestFree(q));
  WEFT_FAILS(weftPrequestFree(q), weftInvalidArgument, "freed");
  if (barrier(c, scratch)) return 1;
  // A collective's device pready twice.
  {
    weftPcoll_t coll = nullptr;
    WEFT_OK(weftPallreduceInit(buf, 2, 64, weftInt32, weftSum, 5, c.pc, &coll));
    const void* ch = nullptr;
    WEFT_OK(weftPcollDeviceHandle(coll, &ch));
    WEFT_OK(weftPcollStart(coll));
    WEFT_FAILS(weftPcollStart(coll), weftInvalidUsage, "start while active");
    WEFT_OK(weftPcollPbufPrepare(coll));
    PcollDeviceHandle h;
    CUDA_OK(cudaMemcpy(&h, ch, sizeof(h), cudaMemcpyDeviceToHost));
    int* flag = nullptr;
    CUDA_OK(cudaMalloc(&flag, sizeof(int)));
    coll_kernel<int32_t><<<2, 128, 0, c.stream>>>(h, reinterpret_cast<int32_t*>(buf), rank, 1, 1, flag);
    if (rank == 0) coll_kernel<int32_t><<<1, 128, 0, c.stream>>>(h, reinterpret_cast<int32_t*>(buf), rank, 1, 1, flag);
    CHECK(gt::sync_bounded(reinterpret_cast<weftStream_t>(c.stream), 60), "collective kernel did not finish");
    if (rank == 0) WEFT_FAILS(weftPcollWait(coll), weftInvalidUsage, "twice for partition 0");
    else WEFT_OK(weftPcollWait(coll));
    WEFT_OK(weftPcollFree(coll));
  }
  return close_comm(c, scratch);
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::printf("usage: %s p2p|coll|reuse|arrived|misuse [--ranks N] [--path kernel|proxy|env] [--epochs E (reuse, arrived)]\n",
                argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  int ranks = 2;
  long long epochs = 200;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--ranks") {
      ranks = std::atoi(argv[++i]);
    } else if (std::string(argv[i]) == "--epochs") {
      epochs = std::atoll(argv[++i]);
    } else if (std::string(argv[i]) == "--path") {
      const std::string p = argv[++i];
      if (p == "kernel") g_path = weftPartPathKernel;
      else if (p == "proxy") g_path = weftPartPathProxy;
      else if (p == "env") g_path = weftPartPathDefault;
      else {
        std::printf("--path: kernel, proxy or env, not '%s'\n", p.c_str());
        return 2;
      }
    }
  if (ranks < 2 || ranks > 16) {
    std::printf("--ranks: need 2 to 16\n");
    return 2;
  }
  if (epochs < 2 || epochs > 100000) {
    std::printf("--epochs: need 2 to 100000\n");
    return 2;
  }
  const char* nodes = std::getenv("WEFT_EMULATE_NODES");
  const bool proxy = g_path == weftPartPathProxy || (g_path == weftPartPathDefault && expect_proxy());
  if (proxy && nodes != nullptr && std::atoi(nodes) > 1) {
    const std::string why = weft::net::ucx_unavailable_reason();
    if (!why.empty()) {
      std::printf("skipped: WEFT_EMULATE_NODES=%s with the proxy path puts over UCX, which is not available here: %s\n",
                  nodes, why.c_str());
      return 77;
    }
  }
  if (cmd == "p2p") return gt::run_ranks(ranks, [&](int r, const weftUniqueId& id) { return p2p(ranks, r, id); }, 600, cmd);
  if (cmd == "coll") return gt::run_ranks(ranks, [&](int r, const weftUniqueId& id) { return coll(ranks, r, id); }, 600, cmd);
  if (cmd == "reuse")
    return gt::run_ranks(
        ranks, [&](int r, const weftUniqueId& id) { return reuse(ranks, r, id, static_cast<uint64_t>(epochs)); },
        60.0 + static_cast<double>(epochs) / 5, cmd);
  if (cmd == "arrived") return arrived_epochs(epochs);
  if (cmd == "misuse") return gt::run_ranks(2, [&](int r, const weftUniqueId& id) { return misuse(2, r, id); }, 300, cmd);
  std::printf("unknown subcommand '%s'\n", cmd.c_str());
  return 2;
}
