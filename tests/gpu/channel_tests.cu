// Users' memory channels (weft/channel.hpp, weftCommConnectMemoryChannels) on the GPU, one
// process per rank (util/launcher.hpp; ranks share GPUs round-robin when there are
// fewer). Each rank connects to its ring neighbours over one buffer:
//
//   [0, n)    its own random data
//   [n, 2n)   put by the previous rank (put, signal / wait)
//   [2n, 3n)  read from the previous rank (get, after its signal)
//   [3n, 4n)  the previous rank's data as LL packets (put_packets / get_packets)
//
// and a last signal / wait pair keeps every rank from leaving while a peer still reads its
// buffer. Outputs are poisoned (0xFF bytes) before each of three rounds with new data, and
// every byte is compared with the previous rank's data; the rounds also check that counters
// and packet flags carry over between kernels. Then one rank passes a bad peer: every rank
// must get an error, none may hang. Exit codes: 0 pass, 1 fail, 77 no GPU.
//
//   weft_channel_tests --ranks N [--elems E]
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gpu_check.hpp"
#include "util/launcher.hpp"
#include "weft/channel.hpp"
#include "weft/device.hpp"
#include "weft/weft.h"

namespace gt = weft::gputest;
using weft::device::MemoryChannelDeviceHandle;
using weft::device::ThreadGroup;
using weft::device::WaitResult;

namespace {

/// One block. status[0]: the first failed wait (0 none, 1 timeout, 2 aborted) and status[1]
/// the phase it failed in.
__global__ void ring_round(MemoryChannelDeviceHandle next, MemoryChannelDeviceHandle prev, uint64_t bytes,
                           uint32_t flag, uint64_t timeout_ns, int* status) {
  __shared__ int failed;
  const ThreadGroup block = ThreadGroup::block();
  const weft::device::Deadline dl = weft::device::deadline_after(timeout_ns);
  if (threadIdx.x == 0) failed = 0;
  auto fail = [&](WaitResult r, int phase) {
    if (r != WaitResult::Ok && atomicCAS(&failed, 0, 1) == 0) {
      status[0] = static_cast<int>(r);
      status[1] = phase;
    }
  };
  // 1. Put: our data into the next rank's [n, 2n), then tell it.
  next.put(bytes, 0, bytes, block);
  __syncthreads();
  if (threadIdx.x == 0) next.signal();
  // 2. The previous rank's put has landed (and its data is in place for the get).
  if (threadIdx.x == 0) fail(prev.wait(dl), 2);
  __syncthreads();
  if (failed) return;
  prev.get(2 * bytes, 0, bytes, block);
  // 3. LL: packets straight into the next rank's packet buffer, no signal.
  next.put_packets(0, 0, bytes, flag, block);
  fail(prev.get_packets(3 * bytes, 0, bytes, flag, block, dl), 3);
  __syncthreads();
  if (failed) return;
  // 4. Done reading the previous rank's buffer: tell it; wait until the next rank is done with ours.
  if (threadIdx.x == 0) {
    prev.signal();
    fail(next.wait(dl), 4);
  }
}

int ring(int nranks, size_t elems, int rank, const weftUniqueId& id) {
  weftComm_t comm;
  WEFT_OK(weftCommInitRank(&comm, nranks, id, rank));
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const uint64_t bytes = elems * sizeof(float);
  float* buf = nullptr;
  WEFT_OK(weftMemAlloc(reinterpret_cast<void**>(&buf), 4 * bytes));
  int* status = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&status), 2 * sizeof(int)));
  float* dummy = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dummy), sizeof(float)));
  CUDA_OK(cudaMemset(dummy, 0, sizeof(float)));
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  int failures = 0;
  {
    // Two ranks: the next rank is the previous one, one channel serves both roles.
    std::vector<int> peers = next == prev ? std::vector<int>{next} : std::vector<int>{next, prev};
    std::vector<weft::MemoryChannel> ch;
    try {
      ch = weft::connect_memory_channels(comm, peers, buf, 4 * bytes, weft::device::ll_buffer_bytes(bytes));
    } catch (const std::exception& e) {
      std::printf("FAIL rank %d: connect_memory_channels: %s\n", rank, e.what());
      return 1;
    }
    const MemoryChannelDeviceHandle hn = ch[0].device_handle(), hp = ch.back().device_handle();
    if (hn.peer != next || hp.peer != prev || hn.local != reinterpret_cast<char*>(buf)) {
      std::printf("FAIL rank %d: handles name peers %d and %d (want %d and %d)\n", rank, hn.peer, hp.peer, next, prev);
      return 1;
    }
    for (uint32_t round = 0; round < 3; ++round) {
      auto data = [&](int r) {
        std::vector<float> v(elems);
        std::mt19937_64 gen(1000 * round + static_cast<uint64_t>(r));
        std::uniform_real_distribution<float> d(-1e3f, 1e3f);
        for (float& x : v) x = d(gen);
        return v;
      };
      const std::vector<float> mine = data(rank), want = data(prev);
      CUDA_OK(cudaMemcpyAsync(buf, mine.data(), bytes, cudaMemcpyHostToDevice, st));
      CUDA_OK(cudaMemsetAsync(reinterpret_cast<char*>(buf) + bytes, 0xFF, 3 * bytes, st));
      CUDA_OK(cudaMemsetAsync(status, 0, 2 * sizeof(int), st));
      // Every rank's data and poison are in place before any rank's kernel starts: each
      // enqueues the AllReduce (a barrier here) only once its own are.
      CUDA_OK(cudaStreamSynchronize(st));
      WEFT_OK(weftAllReduce(dummy, dummy, 1, weftFloat32, weftSum, comm, reinterpret_cast<weftStream_t>(st)));
      ring_round<<<1, 512, 0, st>>>(hn, hp, bytes, round + 1, 60ull * 1000000000ull, status);
      CUDA_OK(cudaGetLastError());
      if (!gt::sync_bounded(reinterpret_cast<weftStream_t>(st), 120)) {
        std::printf("FAIL rank %d: round %u did not finish\n", rank, round);
        return 1;
      }
      int s[2];
      CUDA_OK(cudaMemcpy(s, status, sizeof(s), cudaMemcpyDeviceToHost));
      if (s[0] != 0) {
        std::printf("FAIL rank %d: round %u: wait of phase %d ended with %d\n", rank, round, s[1], s[0]);
        return 1;
      }
      std::vector<float> got(3 * elems);
      CUDA_OK(cudaMemcpy(got.data(), buf + elems, 3 * bytes, cudaMemcpyDeviceToHost));
      const char* what[3] = {"put", "get", "LL packets"};
      for (int part = 0; part < 3; ++part) {
        size_t wrong = 0, first = 0;
        for (size_t i = 0; i < elems; ++i)
          if (std::memcmp(&got[part * elems + i], &want[i], sizeof(float)) != 0 && wrong++ == 0) first = i;
        if (wrong != 0) {
          ++failures;
          std::printf("FAIL rank %d: round %u: %s: %zu of %zu elements wrong (first at %zu)\n", rank, round, what[part],
                      wrong, elems, first);
        }
      }
    }
  }  // channels released here, after every kernel using them ended on every rank (phase 4)

  // A refused argument on one rank fails every rank's call, and nobody hangs.
  {
    std::vector<int> bad = {rank == 0 ? 0 : next};
    weftMemoryChannel_t out = nullptr;
    weftResult_t r = weftCommConnectMemoryChannels(comm, bad.data(), 1, buf, bytes, 0, &out);
    if (r == weftSuccess) {
      ++failures;
      std::printf("FAIL rank %d: a connect where rank 0 names itself succeeded\n", rank);
      weftMemoryChannelDestroy(out);
    } else if (rank != 0 && std::string(weftGetLastError(comm)).find("rank 0 refused") == std::string::npos) {
      ++failures;
      std::printf("FAIL rank %d: the error does not name rank 0: %s\n", rank, weftGetLastError(comm));
    }
  }
  cudaFree(status);
  cudaFree(dummy);
  weftMemFree(buf);
  cudaStreamDestroy(st);
  WEFT_OK(weftCommDestroy(comm));
  if (failures == 0) std::printf("rank %d: ok (%zu elements, 3 rounds)\n", rank, elems);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 2;
  size_t elems = (size_t(1) << 20) + 3;  // a tail that is not a whole 16-byte vector
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) ranks = std::atoi(argv[++i]);
    else if (a == "--elems" && i + 1 < argc) elems = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::printf("usage: %s [--ranks N] [--elems E]\n", argv[0]);
      return 2;
    }
  }
  if (ranks < 2) {
    std::printf("--ranks must be 2 or more\n");
    return 2;
  }
  return gt::run_ranks(ranks, [&](int r, const weftUniqueId& id) { return ring(ranks, elems, r, id); }, 300,
                       "memory_channel");
}
