// Data-parallel loss + AllReduce in one kernel (paper 002 §VI-D), one process per GPU:
//
//   mpirun -np 2 ./example_part_loss_allreduce
//
// Each rank holds a local batch of predictions and labels. One kernel computes the binary
// cross-entropy gradient of each element, (sigmoid(x) - y) / N, block by block, and each
// block then runs the partitioned AllReduce of its partition right there
// (PcollDeviceHandle::pready_block): the reduction happens on the device inside the
// kernel, with no second kernel, no stream synchronize and no NCCL call. The averaged
// gradient is checked against the host.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include <weft/partitioned.h>
#include <weft/partitioned.hpp>
#include <weft/weft.h>

#define CHECK(call)                                                                \
  do {                                                                             \
    weftResult_t r_ = (call);                                                      \
    if (r_ != weftSuccess) {                                                       \
      std::fprintf(stderr, "%s failed: %s\n", #call, weftGetLastError(nullptr));   \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

using weft::part::PcollDeviceHandle;

constexpr int kBlock = 512, kParts = 64;
constexpr size_t kN = static_cast<size_t>(kBlock) * kParts;

double input(int rank, size_t i) { return std::sin(0.001 * static_cast<double>(i) + rank); }
double label(int rank, size_t i) { return static_cast<double>((i * 7 + static_cast<size_t>(rank)) % 2); }

__global__ void loss_grad_allreduce(const double* x, const double* y, double* grad, double scale, PcollDeviceHandle h) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  grad[i] = (1.0 / (1.0 + exp(-x[i])) - y[i]) * scale;
  h.pready_block(blockIdx.x);  // AllReduce of this block's partition, on the device, now
}

int main() {
  weftComm_t comm;
  CHECK(weftCommInitFromEnv(&comm));
  int rank = 0, nranks = 1;
  CHECK(weftCommUserRank(comm, &rank));
  CHECK(weftCommCount(comm, &nranks));
  weftPartComm_t pc;
  CHECK(weftPartCommCreate(comm, &pc));
  std::vector<double> hx(kN), hy(kN);
  for (size_t i = 0; i < kN; ++i) {
    hx[i] = input(rank, i);
    hy[i] = label(rank, i);
  }
  double *x, *y, *grad;
  cudaMalloc(&x, kN * 8);
  cudaMalloc(&y, kN * 8);
  cudaMalloc(&grad, kN * 8);
  cudaMemcpy(x, hx.data(), kN * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy.data(), kN * 8, cudaMemcpyHostToDevice);
  weftPcoll_t coll;
  CHECK(weftPallreduceInit(grad, kParts, kBlock, weftFloat64, weftSum, 0, pc, &coll));
  const void* dh = nullptr;
  CHECK(weftPcollDeviceHandle(coll, &dh));
  PcollDeviceHandle h;
  cudaMemcpy(&h, dh, sizeof(h), cudaMemcpyDeviceToHost);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const double scale = 1.0 / (static_cast<double>(kN) * nranks);
  for (int step = 0; step < 10; ++step) {  // a training loop: start and pbuf_prepare each step
    CHECK(weftPcollStart(coll));
    CHECK(weftPcollPbufPrepare(coll));
    loss_grad_allreduce<<<kParts, kBlock, 0, stream>>>(x, y, grad, scale, h);
    CHECK(weftPcollWait(coll));
  }
  cudaStreamSynchronize(stream);
  std::vector<double> got(kN);
  cudaMemcpy(got.data(), grad, kN * 8, cudaMemcpyDeviceToHost);
  double worst = 0;
  for (size_t i = 0; i < kN; ++i) {
    double want = 0;
    for (int r = 0; r < nranks; ++r) want += (1.0 / (1.0 + std::exp(-input(r, i))) - label(r, i)) * scale;
    worst = std::fmax(worst, std::fabs(got[i] - want));
  }
  std::printf("rank %d: averaged BCE gradient of %zu elements over %d ranks, largest error %.3g\n", rank, kN, nranks,
              worst);
  CHECK(weftPcollFree(coll));
  CHECK(weftAllReduce(x, x, 1, weftFloat64, weftSum, comm, reinterpret_cast<weftStream_t>(stream)));  // all done
  cudaStreamSynchronize(stream);
  CHECK(weftPartCommDestroy(pc));
  CHECK(weftCommDestroy(comm));
  return worst < 1e-12 ? 0 : 1;
}
