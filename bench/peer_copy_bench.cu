// What one thread block moves over NVLink, per way of moving: the ceiling a Simple
// message's block works under (docs/runtime.md, "One thread block's rate"). GPU 0 (and with
// --duplex GPU 1 at the same time, the other way) moves 256 MiB split evenly over 1 to 32
// blocks, each block a contiguous share:
//   push U     move_simple (the interpreter's mover) copies local memory into the peer's
//              with U 16-byte loads in flight per thread (a send; U = 6, 8, 16);
//   push+R     a reduction of two local inputs stored into the peer (a recvReduceSend; R of
//              each input in flight: 3, 8);
//   pull U     copies the peer's memory into local memory (reads over NVLink);
//   tma        one thread per block moves the share through shared memory with bulk copies
//              (cp.async.bulk: 4 stages of 32 KiB, global -> shared -> the peer; sm_90).
// GB/s is the payload (bytes of one source) per second over all blocks, and per block.
//
//   peer_copy_bench [--mib 256] [--iters 5] [--threads 512] [--duplex]
//
// Prints a table; every way's result is compared with the host's element by element (the
// exit status is 1 on a wrong element, 2 on a usage or CUDA error, 3 without two GPUs that
// reach each other).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "exec/executor_kernel.cuh"

namespace {

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

constexpr uint32_t kTmaStages = 4;
constexpr uint32_t kTmaChunk = 32 << 10;

/// Block i's share [lo, lo + cnt) of n elements (whole 16-byte vectors but the last).
struct Share {
  uint64_t lo, cnt;
};
__device__ Share block_share(uint64_t n) {
  const uint64_t per = ((n + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;
  const uint64_t lo = blockIdx.x * per;
  return {lo, lo >= n ? 0 : (n - lo < per ? n - lo : per)};
}

/// dst[i] = a[i] (+ b[i]) for the block's share, with the interpreter's mover.
template <uint32_t U, uint32_t R>
__global__ void __launch_bounds__(weft::exec::kMaxThreads) sm_move(const float* a, const float* b, float* dst,
                                                                   uint64_t n) {
  const Share s = block_share(n);
  if (s.cnt == 0) return;
  weft::exec::move_simple<float, 0, U, R>(a + s.lo, b != nullptr ? b + s.lo : nullptr, dst + s.lo, nullptr, s.cnt,
                                          threadIdx.x, blockDim.x);
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (ok == 0);
}
__device__ void tma_load(uint32_t smem, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
#endif

/// One thread per block: the share goes global -> shared -> dst in chunks of kTmaChunk through
/// kTmaStages buffers; a stage is loaded again once its store has read it.
__global__ void tma_move(const float* a, float* dst, uint64_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char stage[];
  __shared__ __align__(8) uint64_t bars[kTmaStages];
  const Share s = block_share(n);
  if (threadIdx.x != 0 || s.cnt == 0) return;
  const char* src = reinterpret_cast<const char*>(a + s.lo);
  char* out = reinterpret_cast<char*>(dst + s.lo);
  const uint64_t bytes = s.cnt * sizeof(float);  // a multiple of 16 (shares are whole vectors)
  const uint64_t chunks = (bytes + kTmaChunk - 1) / kTmaChunk;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(stage));
  const uint32_t bar0 = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  for (uint32_t i = 0; i < kTmaStages; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar0 + 8 * i));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto len = [&](uint64_t k) { return static_cast<uint32_t>(bytes - k * kTmaChunk < kTmaChunk ? bytes - k * kTmaChunk : kTmaChunk); };
  for (uint64_t k = 0; k < chunks && k < kTmaStages; ++k)
    tma_load(base + static_cast<uint32_t>(k) * kTmaChunk, src + k * kTmaChunk, len(k), bar0 + 8 * static_cast<uint32_t>(k));
  for (uint64_t k = 0; k < chunks; ++k) {
    const uint32_t st = static_cast<uint32_t>(k % kTmaStages);
    mbar_wait(bar0 + 8 * st, static_cast<uint32_t>(k / kTmaStages) & 1u);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(out + k * kTmaChunk),
                 "r"(base + st * kTmaChunk), "r"(len(k))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (k + kTmaStages < chunks) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // the stage is free again
      tma_load(base + st * kTmaChunk, src + (k + kTmaStages) * kTmaChunk, len(k + kTmaStages), bar0 + 8 * st);
    }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

enum Way { kPush6, kPush8, kPush16, kPushR3, kPushR8, kPull8, kPull16, kTma, kWays };
const char* kWayName[kWays] = {"push 6", "push 8", "push 16", "push+R3", "push+R8", "pull 8", "pull 16", "tma"};

/// Device d's buffers: a, b local sources, o local destination (pull), r the peer's
/// destination (push), each n floats; peer_src is the peer's a (pull reads it).
struct Side {
  int dev;
  cudaStream_t stream;
  float *a, *b, *o, *r, *peer_src;
};

void launch(Way w, const Side& s, int blocks, int threads, uint64_t n) {
  const size_t tma_smem = kTmaStages * kTmaChunk;
  CK(cudaSetDevice(s.dev));
  switch (w) {
    case kPush6: sm_move<6, 3><<<blocks, threads, 0, s.stream>>>(s.a, nullptr, s.r, n); break;
    case kPush8: sm_move<8, 8><<<blocks, threads, 0, s.stream>>>(s.a, nullptr, s.r, n); break;
    case kPush16: sm_move<16, 8><<<blocks, threads, 0, s.stream>>>(s.a, nullptr, s.r, n); break;
    case kPushR3: sm_move<6, 3><<<blocks, threads, 0, s.stream>>>(s.a, s.b, s.r, n); break;
    case kPushR8: sm_move<8, 8><<<blocks, threads, 0, s.stream>>>(s.a, s.b, s.r, n); break;
    case kPull8: sm_move<8, 8><<<blocks, threads, 0, s.stream>>>(s.peer_src, nullptr, s.o, n); break;
    case kPull16: sm_move<16, 8><<<blocks, threads, 0, s.stream>>>(s.peer_src, nullptr, s.o, n); break;
    default: tma_move<<<blocks, 32, tma_smem, s.stream>>>(s.a, s.r, n); break;
  }
  CK(cudaGetLastError());
}

void sync(const Side& s) {
  CK(cudaSetDevice(s.dev));
  CK(cudaStreamSynchronize(s.stream));
}

/// GB/s of payload per device (the mean over the sides that ran).
double time_way(Way w, const std::vector<Side>& sides, int blocks, int threads, int iters, uint64_t n) {
  for (const Side& s : sides) launch(w, s, blocks, threads, n);  // warm-up
  for (const Side& s : sides) sync(s);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    for (const Side& s : sides) launch(w, s, blocks, threads, n);
  for (const Side& s : sides) sync(s);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return static_cast<double>(n) * sizeof(float) * iters / sec / 1e9;
}

/// Side 0's destination of way w against the host's values (a = ha, b = hb on every device).
bool check(Way w, const Side& s, const std::vector<float>& ha, const std::vector<float>& hb, uint64_t n) {
  std::vector<float> got(n);
  const bool pull = w == kPull8 || w == kPull16;
  CK(cudaSetDevice(s.dev));
  CK(cudaMemcpy(got.data(), pull ? s.o : s.r, n * sizeof(float), cudaMemcpyDefault));
  for (uint64_t i = 0; i < n; ++i) {
    const float want = (w == kPushR3 || w == kPushR8) ? ha[i] + hb[i] : ha[i];
    if (got[i] != want) {
      std::printf("WRONG: %s, element %llu: %g, want %g\n", kWayName[w], static_cast<unsigned long long>(i),
                  static_cast<double>(got[i]), static_cast<double>(want));
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 256;
  int iters = 5, threads = weft::exec::kMaxThreads;
  bool duplex = false;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (f == "--duplex") { duplex = true; continue; }
    if (i + 1 >= argc || (f != "--mib" && f != "--iters" && f != "--threads")) {
      std::fprintf(stderr, "usage: peer_copy_bench [--mib 256] [--iters 5] [--threads 512] [--duplex]\n");
      return 2;
    }
    const long v = std::atol(argv[++i]);
    if (f == "--mib") mib = static_cast<uint64_t>(v);
    else if (f == "--iters") iters = static_cast<int>(v);
    else threads = static_cast<int>(v);
  }
  if (mib == 0 || iters <= 0 || threads <= 0 || threads > weft::exec::kMaxThreads || threads % 32 != 0) {
    std::fprintf(stderr, "peer_copy_bench: --mib and --iters must be > 0, --threads a multiple of 32 up to %d\n",
                 weft::exec::kMaxThreads);
    return 2;
  }
  int ndev = 0, p01 = 0, p10 = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) {
    std::printf("peer_copy_bench: needs two GPUs (found %d)\n", ndev);
    return 3;
  }
  CK(cudaDeviceCanAccessPeer(&p01, 0, 1));
  CK(cudaDeviceCanAccessPeer(&p10, 1, 0));
  if (!p01 || !p10) {
    std::printf("peer_copy_bench: GPUs 0 and 1 cannot map each other's memory\n");
    return 3;
  }
  const uint64_t n = (mib << 20) / sizeof(float);
  std::vector<float> ha(n), hb(n);
  for (uint64_t i = 0; i < n; ++i) {
    ha[i] = static_cast<float>(i % 1000);
    hb[i] = static_cast<float>(i % 7);
  }
  std::vector<Side> sides(2);
  for (int d = 0; d < 2; ++d) {
    Side& s = sides[d];
    s.dev = d;
    CK(cudaSetDevice(d));
    CK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CK(cudaMalloc(&s.a, n * sizeof(float)));
    CK(cudaMalloc(&s.b, n * sizeof(float)));
    CK(cudaMalloc(&s.o, n * sizeof(float)));
    CK(cudaMemcpy(s.a, ha.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.b, hb.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(tma_move, cudaFuncAttributeMaxDynamicSharedMemorySize, kTmaStages * kTmaChunk));
  }
  for (int d = 0; d < 2; ++d) {
    sides[d].r = sides[1 - d].o;  // a push lands in the peer's o
    sides[d].peer_src = sides[1 - d].a;
  }
  if (!duplex) sides.resize(1);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %s, %llu MiB per device, %d threads per block (tma: 1 thread, %u x %u KiB stages), "
              "%d iterations; GB/s per device (per block)\n",
              prop.name, duplex ? "both ways at once" : "GPU 0 -> GPU 1", static_cast<unsigned long long>(mib), threads,
              kTmaStages, kTmaChunk >> 10, iters);
  std::printf("%-7s", "blocks");
  for (int w = 0; w < kWays; ++w) std::printf(" %17s", kWayName[w]);
  std::printf("\n");
  bool ok = true;
  for (int blocks : {1, 2, 4, 8, 16, 24, 32}) {
    std::printf("%-7d", blocks);
    for (int w = 0; w < kWays; ++w) {
      CK(cudaSetDevice(sides[0].dev));
      CK(cudaMemset((w == kPull8 || w == kPull16) ? sides[0].o : sides[0].r, 0xff, n * sizeof(float)));
      const double g = time_way(static_cast<Way>(w), sides, blocks, threads, iters, n);
      if (blocks == 24) ok &= check(static_cast<Way>(w), sides[0], ha, hb, n);
      std::printf(" %8.1f (%6.2f)", g, g / blocks);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return ok ? 0 : 1;
}
