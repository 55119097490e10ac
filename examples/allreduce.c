/* AllReduce with weft's C API, one process per GPU.
 *
 *   mpirun -np 2 ./allreduce               (or: torchrun --nproc-per-node 2 --no-python ./allreduce)
 *
 * weftCommInitFromEnv reads the launcher's rank, size and local rank, picks the GPU and
 * finds the other ranks; every rank then sums a vector of floats with the others. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft/weft.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    weftResult_t r = (call);                                                         \
    if (r != weftSuccess) {                                                          \
      fprintf(stderr, "%s failed: %s\n", #call, weftGetLastError(NULL));             \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  weftComm_t comm;
  CHECK(weftCommInitFromEnv(&comm));
  int rank, nranks;
  CHECK(weftCommUserRank(comm, &rank));
  CHECK(weftCommCount(comm, &nranks));

  const size_t count = 1 << 20;
  float* host = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) host[i] = (float)(rank + 1);
  float* buf;
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaMalloc((void**)&buf, count * sizeof(float));
  cudaMemcpy(buf, host, count * sizeof(float), cudaMemcpyHostToDevice);

  /* In place: sendbuff == recvbuff. */
  CHECK(weftAllReduce(buf, buf, count, weftFloat32, weftSum, comm, (weftStream_t)stream));
  cudaStreamSynchronize(stream);
  weftResult_t async;
  CHECK(weftCommGetAsyncError(comm, &async));
  if (async != weftSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, weftGetLastError(comm));
    weftCommAbort(comm);
    return 1;
  }

  cudaMemcpy(host, buf, count * sizeof(float), cudaMemcpyDeviceToHost);
  const float want = (float)nranks * (nranks + 1) / 2;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += host[i] != want;
  printf("rank %d of %d: %zu of %zu elements wrong\n", rank, nranks, wrong, count);

  cudaFree(buf);
  free(host);
  CHECK(weftCommDestroy(comm));
  return wrong != 0;
}
