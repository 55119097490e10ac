// Per-block copy rate of the interpreter's data mover (move_simple, exec/executor_kernel.cuh)
// within one GPU: a plain copy (a Send or Recv's data path), a copy to two outputs (the
// RecvCopySend path: the user buffer and the next staging slot) and a reduction of two
// inputs (RecvReduceCopy), each for 1, 2, 4, 8, 16 and 24 blocks of 512 threads over
// 256 MiB (every block moves its own contiguous share), for U / R independent 16-byte loads
// in flight per thread (U for a copy, R of each input for a reduction): 4 / 4 (weft before
// this bench), 6 / 3 (exec_kernel now) and 16 / 8, beside cudaMemcpyAsync of the same bytes.
// GB/s counts the payload (the bytes of the source buffer) once, as cudaMemcpy's rate does.
//
//   exec_copy_bench [--mib 256] [--iters 5] [--threads 512]
//
// Prints a table and asserts only that the copies are right (a wrong element is reported
// and the exit status is 1).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exec/executor_kernel.cuh"

namespace {

#define CK(call)                                                                                         \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) {                                                                             \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      std::exit(2);                                                                                      \
    }                                                                                                    \
  } while (0)

enum Mode { kCopyOne = 0, kCopyTwo = 1, kReduceTwo = 2 };
const char* kModeName[] = {"copy", "copy->2 outputs", "reduce (a+b)"};

/// Block i moves elements [i * per, min(n, (i + 1) * per)).
template <int M, uint32_t U, uint32_t R>
__global__ void __launch_bounds__(weft::exec::kMaxThreads) mover(const float* a, const float* b, float* o1, float* o2,
                                                                  uint64_t n) {
  const uint64_t per = ((n + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;  // whole 16-byte vectors, covering n
  const uint64_t lo = blockIdx.x * per;
  if (lo >= n) return;
  const uint64_t cnt = n - lo < per ? n - lo : per;
  weft::exec::move_simple<float, 0, U, R>(a + lo, M == kReduceTwo ? b + lo : nullptr, o1 + lo,
                                       M == kCopyTwo ? o2 + lo : nullptr, cnt, threadIdx.x, blockDim.x);
}

template <int M, uint32_t U, uint32_t R>
double time_mover(int blocks, int threads, int iters, const float* a, const float* b, float* o1, float* o2,
                  uint64_t n) {
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  mover<M, U, R><<<blocks, threads>>>(a, b, o1, o2, n);  // warm-up
  CK(cudaGetLastError());
  CK(cudaEventRecord(t0));
  for (int i = 0; i < iters; ++i) mover<M, U, R><<<blocks, threads>>>(a, b, o1, o2, n);
  CK(cudaEventRecord(t1));
  CK(cudaEventSynchronize(t1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, t0, t1));
  CK(cudaEventDestroy(t0));
  CK(cudaEventDestroy(t1));
  return static_cast<double>(n) * sizeof(float) * iters / (ms * 1e-3) / 1e9;
}

bool check(int mode, const std::vector<float>& ha, const std::vector<float>& hb, const float* o1, const float* o2,
           uint64_t n) {
  std::vector<float> h1(n), h2;
  CK(cudaMemcpy(h1.data(), o1, n * sizeof(float), cudaMemcpyDeviceToHost));
  if (mode == kCopyTwo) {
    h2.resize(n);
    CK(cudaMemcpy(h2.data(), o2, n * sizeof(float), cudaMemcpyDeviceToHost));
  }
  for (uint64_t i = 0; i < n; ++i) {
    const float want = mode == kReduceTwo ? ha[i] + hb[i] : ha[i];
    if (h1[i] != want || (mode == kCopyTwo && h2[i] != want)) {
      std::printf("WRONG: %s, element %llu: %g, want %g\n", kModeName[mode], static_cast<unsigned long long>(i),
                  static_cast<double>(h1[i]), static_cast<double>(want));
      return false;
    }
  }
  return true;
}

template <int M>
bool run_mode(int threads, int iters, const std::vector<float>& ha, const std::vector<float>& hb, const float* a,
              const float* b, float* o1, float* o2, uint64_t n) {
  bool ok = true;
  for (int blocks : {1, 2, 4, 8, 16, 24}) {
    CK(cudaMemset(o1, 0, n * sizeof(float)));
    CK(cudaMemset(o2, 0, n * sizeof(float)));
    const double g4 = time_mover<M, 4, 4>(blocks, threads, iters, a, b, o1, o2, n);
    const double g16 = time_mover<M, 16, 8>(blocks, threads, iters, a, b, o1, o2, n);
    const double g8 = time_mover<M, 6, 3>(blocks, threads, iters, a, b, o1, o2, n);
    ok &= check(M, ha, hb, o1, o2, n);
    std::printf("%-16s %6d %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f\n", kModeName[M], blocks, g4, g4 / blocks, g8,
                g8 / blocks, g16, g16 / blocks);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 256;
  int iters = 5, threads = weft::exec::kMaxThreads;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "exec_copy_bench: %s needs a value\n", s.c_str());
        std::exit(2);
      }
      return std::atol(argv[++i]);
    };
    if (s == "--mib") mib = static_cast<uint64_t>(next());
    else if (s == "--iters") iters = static_cast<int>(next());
    else if (s == "--threads") threads = static_cast<int>(next());
    else {
      std::fprintf(stderr, "usage: exec_copy_bench [--mib 256] [--iters 5] [--threads 512]\n");
      return 2;
    }
  }
  if (mib == 0 || iters <= 0 || threads <= 0 || threads > weft::exec::kMaxThreads || threads % 32 != 0) {
    std::fprintf(stderr, "exec_copy_bench: --mib and --iters must be > 0, --threads a multiple of 32 up to %d\n",
                 weft::exec::kMaxThreads);
    return 2;
  }
  const uint64_t n = (mib << 20) / sizeof(float);
  std::vector<float> ha(n), hb(n);
  for (uint64_t i = 0; i < n; ++i) {
    ha[i] = static_cast<float>(i % 1000);
    hb[i] = static_cast<float>(i % 7);
  }
  float *a, *b, *o1, *o2;
  CK(cudaMalloc(&a, n * sizeof(float)));
  CK(cudaMalloc(&b, n * sizeof(float)));
  CK(cudaMalloc(&o1, n * sizeof(float)));
  CK(cudaMalloc(&o2, n * sizeof(float)));
  CK(cudaMemcpy(a, ha.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %llu MiB, %d threads per block, %d iterations; GB/s of payload (source bytes)\n", prop.name,
              static_cast<unsigned long long>(mib), threads, iters);
  {
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaMemcpyAsync(o1, a, n * sizeof(float), cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t0));
    for (int i = 0; i < iters; ++i) CK(cudaMemcpyAsync(o1, a, n * sizeof(float), cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    std::printf("# cudaMemcpyAsync D2D: %.1f GB/s\n", static_cast<double>(n) * sizeof(float) * iters / (ms * 1e-3) / 1e9);
  }
  std::printf("%-16s %6s %10s %10s %10s %10s %10s %10s\n", "mover", "blocks", "4/4 GB/s", "per block", "6/3 GB/s",
              "per block", "16/8 GB/s", "per block");
  bool ok = run_mode<kCopyOne>(threads, iters, ha, hb, a, b, o1, o2, n);
  ok &= run_mode<kCopyTwo>(threads, iters, ha, hb, a, b, o1, o2, n);
  ok &= run_mode<kReduceTwo>(threads, iters, ha, hb, a, b, o1, o2, n);
  CK(cudaFree(a));
  CK(cudaFree(b));
  CK(cudaFree(o1));
  CK(cudaFree(o2));
  return ok ? 0 : 1;
}
