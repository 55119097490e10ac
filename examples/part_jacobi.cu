// Jacobi halo exchange with partitioned communication (paper 002 §VI-D), one process per GPU:
//
//   mpirun -np 2 ./example_part_jacobi     (or torchrun --nproc-per-node 2 --no-python ...)
//
// A W x H grid is split into bands of rows, one per rank. Each iteration one kernel updates
// the band (4-point Jacobi); the blocks of its first and last rows copy their 256 cells into
// the edge buffers and pready them at once, so the halo leaves while the rest of the band is
// still being computed, without the kernel, synchronize, send sequence. The neighbours
// receive them into their ghost rows for the next iteration. At the end every rank checks
// its band against the same iterations computed on the host, cell by cell.
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

using weft::part::PsendDeviceHandle;

constexpr int kW = 4096, kRowsPerRank = 64, kBlock = 256, kIters = 50;

struct Halo {
  int has_up, has_down;           // neighbours exist
  PsendDeviceHandle up, down;     // send requests of the first and last row
  double *edge_up, *edge_down;    // what they send
  const double *ghost_up, *ghost_down;  // what arrived last iteration (or the fixed boundary)
};

__device__ double at(const double* cur, const Halo& h, int row, int col) {
  if (col < 0 || col >= kW) return 0.0;
  if (row < 0) return h.has_up ? h.ghost_up[col] : 0.0;
  if (row >= kRowsPerRank) return h.has_down ? h.ghost_down[col] : 0.0;
  return cur[row * kW + col];
}

__global__ void jacobi(const double* cur, double* next, Halo h) {
  const int row = blockIdx.y, col = blockIdx.x * kBlock + threadIdx.x;
  const double v = 0.25 * (((at(cur, h, row - 1, col) + at(cur, h, row + 1, col)) + at(cur, h, row, col - 1)) +
                           at(cur, h, row, col + 1));
  next[row * kW + col] = v;
  // Partition blockIdx.x of a halo row is these 256 cells: ready it as soon as they exist.
  if (row == 0 && h.has_up) {
    h.edge_up[col] = v;
    h.up.pready_block(blockIdx.x);
  }
  if (row == kRowsPerRank - 1 && h.has_down) {
    h.edge_down[col] = v;
    h.down.pready_block(blockIdx.x);
  }
}

int main() {
  weftComm_t comm;
  CHECK(weftCommInitFromEnv(&comm));
  int rank = 0, nranks = 1;
  CHECK(weftCommUserRank(comm, &rank));
  CHECK(weftCommCount(comm, &nranks));
  weftPartComm_t pc;
  CHECK(weftPartCommCreate(comm, &pc));
  const int parts = kW / kBlock;
  const size_t band = static_cast<size_t>(kW) * kRowsPerRank;
  // The initial grid: cell (global row g, col c) = (g * 31 + c * 17) % 101.
  std::vector<double> init(band);
  for (int r = 0; r < kRowsPerRank; ++r)
    for (int c = 0; c < kW; ++c) init[r * kW + c] = ((rank * kRowsPerRank + r) * 31 + c * 17) % 101;
  double *cur, *next, *edges, *ghosts;
  cudaMalloc(&cur, band * 8);
  cudaMalloc(&next, band * 8);
  cudaMalloc(&edges, 2 * kW * 8);
  cudaMalloc(&ghosts, 2 * kW * 8);
  cudaMemcpy(cur, init.data(), band * 8, cudaMemcpyHostToDevice);
  Halo h{};
  h.has_up = rank > 0;
  h.has_down = rank < nranks - 1;
  h.edge_up = edges;
  h.edge_down = edges + kW;
  h.ghost_up = ghosts;
  h.ghost_down = ghosts + kW;
  std::vector<weftPrequest_t> reqs;
  weftPdevRequest_t dup = nullptr, ddown = nullptr;
  const void *hup = nullptr, *hdown = nullptr;
  // Tag 0: data going down (to rank + 1), tag 1: going up.
  if (h.has_up) {
    weftPrequest_t s, r;
    CHECK(weftPsendInit(h.edge_up, parts, kBlock, weftFloat64, rank - 1, 1, pc, &s));
    CHECK(weftPrecvInit(ghosts, parts, kBlock, weftFloat64, rank - 1, 0, pc, &r));
    CHECK(weftPdevRequestCreate(s, 1, &dup, &hup));
    reqs.push_back(s);
    reqs.push_back(r);
  }
  if (h.has_down) {
    weftPrequest_t s, r;
    CHECK(weftPsendInit(h.edge_down, parts, kBlock, weftFloat64, rank + 1, 0, pc, &s));
    CHECK(weftPrecvInit(ghosts + kW, parts, kBlock, weftFloat64, rank + 1, 1, pc, &r));
    CHECK(weftPdevRequestCreate(s, 1, &ddown, &hdown));
    reqs.push_back(s);
    reqs.push_back(r);
  }
  // Ghost rows for the first iteration: the neighbours' initial edge rows.
  std::vector<double> g(kW);
  for (int side = 0; side < 2; ++side) {
    const int grow = side == 0 ? rank * kRowsPerRank - 1 : (rank + 1) * kRowsPerRank;
    for (int c = 0; c < kW; ++c) g[c] = (grow * 31 + c * 17) % 101;
    cudaMemcpy(ghosts + side * kW, g.data(), kW * 8, cudaMemcpyHostToDevice);
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  for (int it = 0; it < kIters; ++it) {
    for (weftPrequest_t q : reqs) CHECK(weftPstart(q));
    // This iteration's kernel reads the ghosts the last one received; the neighbours' new
    // halo may land as soon as ready-to-receive is sent.
    if (!reqs.empty()) {
      // Copy the ghosts the kernel reads aside, so the neighbours may overwrite them at once.
      static double* reading = nullptr;
      if (!reading) cudaMalloc(&reading, 2 * kW * 8);
      cudaMemcpyAsync(reading, ghosts, 2 * kW * 8, cudaMemcpyDeviceToDevice, stream);
      cudaStreamSynchronize(stream);
      h.ghost_up = reading;
      h.ghost_down = reading + kW;
      CHECK(weftPbufPrepareAll(static_cast<int>(reqs.size()), reqs.data()));
    }
    if (hup) cudaMemcpy(&h.up, hup, sizeof(h.up), cudaMemcpyDeviceToHost);
    if (hdown) cudaMemcpy(&h.down, hdown, sizeof(h.down), cudaMemcpyDeviceToHost);
    jacobi<<<dim3(parts, kRowsPerRank), kBlock, 0, stream>>>(cur, next, h);
    for (weftPrequest_t q : reqs) CHECK(weftPwait(q));
    cudaStreamSynchronize(stream);
    std::swap(cur, next);
  }
  // Check: the same iterations on the host over the whole grid.
  const int H = kRowsPerRank * nranks;
  std::vector<double> a(static_cast<size_t>(kW) * H), b(a.size());
  for (int r = 0; r < H; ++r)
    for (int c = 0; c < kW; ++c) a[r * kW + c] = (r * 31 + c * 17) % 101;
  auto get = [&](const std::vector<double>& x, int r, int c) {
    return r < 0 || r >= H || c < 0 || c >= kW ? 0.0 : x[r * kW + c];
  };
  for (int it = 0; it < kIters; ++it) {
    for (int r = 0; r < H; ++r)
      for (int c = 0; c < kW; ++c)
        b[r * kW + c] = 0.25 * (((get(a, r - 1, c) + get(a, r + 1, c)) + get(a, r, c - 1)) + get(a, r, c + 1));
    std::swap(a, b);
  }
  std::vector<double> got(band);
  cudaMemcpy(got.data(), cur, band * 8, cudaMemcpyDeviceToHost);
  long wrong = 0;
  for (size_t i = 0; i < band; ++i) wrong += got[i] != a[rank * band + i];
  std::printf("rank %d: %d iterations of a %dx%d Jacobi band, halo by partitioned pready: %ld wrong cells\n", rank,
              kIters, kW, kRowsPerRank, wrong);
  if (dup) CHECK(weftPdevRequestFree(dup));
  if (ddown) CHECK(weftPdevRequestFree(ddown));
  for (weftPrequest_t q : reqs) CHECK(weftPrequestFree(q));
  CHECK(weftAllReduce(cur, cur, 1, weftFloat64, weftSum, comm, reinterpret_cast<weftStream_t>(stream)));  // all done
  cudaStreamSynchronize(stream);
  CHECK(weftPartCommDestroy(pc));
  CHECK(weftCommDestroy(comm));
  return wrong == 0 ? 0 : 1;
}
