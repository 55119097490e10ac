// A user kernel on weft's device API: every rank puts a vector into the next rank's
// buffer through a memory channel, signals it, and waits for the previous rank's put.
//
//   mpirun -np 2 ./ring_put               (or: torchrun --nproc-per-node 2 --no-python ./ring_put)
//
// weft::connect_memory_channels (weft/channel.hpp) is collective: every rank calls it with
// its own peers and buffer, and gets one channel per peer; a kernel takes the channel's
// device handle by value (weft/device/memory_channel.hpp, docs/device-api.md).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

#include <weft/channel.hpp>
#include <weft/device.hpp>
#include <weft/weft.h>

using namespace weft::device;

// buf holds [0, n) this rank's data and [n, 2n) what the previous rank puts.
__global__ void ring_put(MemoryChannelDeviceHandle next, MemoryChannelDeviceHandle prev, uint64_t bytes,
                         uint64_t timeout_ns, int* status) {
  ThreadGroup block = ThreadGroup::block();
  next.put(bytes, 0, bytes, block);  // our [0, n) to the next rank's [n, 2n)
  __syncthreads();                   // every thread's puts before the signal
  if (threadIdx.x == 0) {
    next.signal();
    *status = static_cast<int>(prev.wait(deadline_after(timeout_ns)));  // the previous rank's put landed
  }
}

#define CHECK(call)                                                                        \
  do {                                                                                     \
    weftResult_t r = (call);                                                               \
    if (r != weftSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s\n", #call, weftGetLastError(nullptr));           \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

int main() {
  weftComm_t comm;
  CHECK(weftCommInitFromEnv(&comm));
  int rank, nranks;
  CHECK(weftCommUserRank(comm, &rank));
  CHECK(weftCommCount(comm, &nranks));
  if (nranks < 2) {
    std::fprintf(stderr, "run with 2 or more ranks\n");
    return 1;
  }
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const size_t n = 1 << 20, bytes = n * sizeof(float);
  float* buf;
  int* status;
  CHECK(weftMemAlloc(reinterpret_cast<void**>(&buf), 2 * bytes));
  cudaMalloc(reinterpret_cast<void**>(&status), sizeof(int));
  std::vector<float> host(n, static_cast<float>(rank));
  cudaMemcpy(buf, host.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemset(buf + n, 0xFF, bytes);  // poison: NaN never equals what arrives
  cudaDeviceSynchronize();

  size_t wrong = n;
  {
    // With two ranks the next rank is the previous one: one channel does both.
    std::vector<int> peers = next == prev ? std::vector<int>{next} : std::vector<int>{next, prev};
    std::vector<weft::MemoryChannel> ch = weft::connect_memory_channels(comm, peers, buf, 2 * bytes);
    // Every rank's buffer is ready before any kernel puts into it: connect returns only
    // after every rank has called it, and each filled its buffer first.
    ring_put<<<1, 512>>>(ch[0].device_handle(), ch.back().device_handle(), bytes, 60ull * 1000000000ull, status);
    cudaDeviceSynchronize();
    int st = -1;
    cudaMemcpy(&st, status, sizeof(int), cudaMemcpyDeviceToHost);
    if (st != 0) std::fprintf(stderr, "rank %d: the wait for rank %d ended with %d\n", rank, prev, st);
    cudaMemcpy(host.data(), buf + n, bytes, cudaMemcpyDeviceToHost);
    wrong = 0;
    for (float x : host) wrong += x != static_cast<float>(prev);
  }  // the channels go here: the previous rank's writes into our memory ended before its
     // signal, and ours into the next rank's before ours
  std::printf("rank %d of %d: %zu of %zu elements from rank %d wrong\n", rank, nranks, wrong, n, prev);
  cudaFree(status);
  weftMemFree(buf);
  CHECK(weftCommDestroy(comm));
  return wrong != 0;
}
