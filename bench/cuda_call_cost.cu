// What the CUDA calls on the partitioned paths' critical path cost on the host, and how long
// after the call the GPU's work is seen done from the host (issue 28: where an epoch's floor
// goes). One process, one GPU, the stream idle before every measured call (each repetition
// waits for the last one), so the figures are a lone call's, as an epoch makes them.
//
//   cuda_call_cost [--reps N] [--device D]
//
// Rows (host us per call: mean, median, min over N; "to done": from the call's start until
// the host sees its effect, mean and median):
//   launch            an empty 1-block kernel (cudaLaunchKernel)
//   launch+flag       a 1-block kernel storing a word into host-mapped memory; to done: the
//                     host sees the word
//   memcpy d2d 8K     cudaMemcpyAsync of 8 KiB within the GPU
//   memcpy h2d 8B     cudaMemcpyAsync of one word from page-locked memory (a flag copy)
//   batch 1 / 8       cudaMemcpyBatchAsync of 1 and 8 copies of 8 KiB (source order: the stream)
//   batch 8 any       the same with cudaMemcpySrcAccessOrderAny
//   memcpy d2d 8K x8  eight cudaMemcpyAsync of 8 KiB; memcpy d2d 64K: one of 64 KiB
//   event record      cudaEventRecord; event query: cudaEventQuery of a completed event
//   write value       cuStreamWriteValue64 into host-mapped memory; to done: the host sees it
//   batch memop 1/32  cuStreamBatchMemOp of 1 and 32 64-bit writes
//   pass, events      one engine pass as WEFT_PART_MEMOPS=0 makes it: batch of 1 copy, a flag
//                     copy, an event; to done: cudaEventQuery says done
//   pass, memops      as WEFT_PART_MEMOPS=1: batch of 1 copy, one batch memop of the flag and
//                     the mark word; to done: the host sees the mark
// Prints one table; asserts nothing (a benchmark). Run it beside CUDA MPS or without to see
// what a shared GPU adds.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "util/driver_entry.hpp"

namespace {

using Clock = std::chrono::steady_clock;

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_call_cost: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using BatchMemOp = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);
using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

template <class F>
F driver_function(const char* name) {
  F f = weft::driver_entry<F>(name);
  if (f == nullptr) {
    std::fprintf(stderr, "cuda_call_cost: no %s in this driver\n", name);
    std::exit(1);
  }
  return f;
}

__global__ void empty_kernel() {}

__global__ void flag_kernel(volatile unsigned long long* word, unsigned long long v) {
  __threadfence_system();
  *word = v;
}

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

struct Stats {
  double mean = 0, median = 0, min = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  s.median = v[v.size() / 2];
  s.min = v.front();
  return s;
}

struct Row {
  std::string name;
  Stats call, done;
  bool has_done = false;
};

/// Times `call` (host time of the call) `reps` times; `done`, when given, polls until the
/// effect is seen and the time from the call's start is recorded too. The stream is drained
/// between repetitions.
Row measure(const std::string& name, int reps, cudaStream_t s, const std::function<void(int)>& call,
            const std::function<bool(int)>& done = {}) {
  std::vector<double> c, d;
  for (int i = -20; i < reps; ++i) {
    ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const Clock::time_point t0 = Clock::now();
    call(i + 100);
    const double tc = us_since(t0);
    double td = 0;
    if (done) {
      while (!done(i + 100)) {
      }
      td = us_since(t0);
    }
    if (i >= 0) {
      c.push_back(tc);
      d.push_back(td);
    }
  }
  ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  Row r;
  r.name = name;
  r.call = stats(c);
  r.has_done = static_cast<bool>(done);
  if (r.has_done) r.done = stats(d);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200, device = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--device" && i + 1 < argc) device = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: cuda_call_cost [--reps N] [--device D]\n");
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("cuda_call_cost: no GPU: skipped\n");
    return 77;
  }
  ok(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t s = nullptr;
  ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  const BatchMemOp batch_memop = driver_function<BatchMemOp>("cuStreamBatchMemOp");
  const WriteValue64 write_value = driver_function<WriteValue64>("cuStreamWriteValue64");
  constexpr size_t kBytes = 8192;
  char *a = nullptr, *b = nullptr;
  ok(cudaMalloc(&a, 8 * kBytes), "cudaMalloc");
  ok(cudaMalloc(&b, 8 * kBytes), "cudaMalloc");
  unsigned long long* host = nullptr;  // [0] flag, [1] mark, [2..] page-locked flag values
  ok(cudaHostAlloc(&host, 64 * sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc");
  std::memset(host, 0, 64 * sizeof(unsigned long long));
  unsigned long long* host_dev = nullptr;
  ok(cudaHostGetDevicePointer(reinterpret_cast<void**>(&host_dev), host, 0), "cudaHostGetDevicePointer");
  unsigned long long* flags_dev = nullptr;  // device words the flag copies land in
  ok(cudaMalloc(&flags_dev, 64 * sizeof(unsigned long long)), "cudaMalloc");
  cudaEvent_t ev = nullptr;
  ok(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  volatile unsigned long long* seen = host;

  std::vector<void*> dst(8), src(8);
  std::vector<size_t> sizes(8, kBytes);
  for (int i = 0; i < 8; ++i) {
    dst[static_cast<size_t>(i)] = b + i * kBytes;
    src[static_cast<size_t>(i)] = a + i * kBytes;
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_index = 0;
  auto batch = [&](size_t count) {
    ok(cudaMemcpyBatchAsync(dst.data(), src.data(), sizes.data(), count, &attr, &attr_index, 1, s),
       "cudaMemcpyBatchAsync");
  };
  auto writes = [&](unsigned count, CUdeviceptr first, unsigned long long v) {
    CUstreamBatchMemOpParams ops[32];
    std::memset(ops, 0, sizeof(ops));
    for (unsigned i = 0; i < count; ++i) {
      ops[i].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
      ops[i].writeValue.address = first + i * sizeof(unsigned long long);
      ops[i].writeValue.value64 = v;
      ops[i].writeValue.flags = 0;
    }
    if (batch_memop(reinterpret_cast<CUstream>(s), count, ops, 0) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuda_call_cost: cuStreamBatchMemOp failed\n");
      std::exit(1);
    }
  };
  const auto flag_dev = reinterpret_cast<CUdeviceptr>(flags_dev);
  const auto mark_dev = reinterpret_cast<CUdeviceptr>(host_dev + 1);

  std::vector<Row> rows;
  rows.push_back(measure("launch", reps, s, [&](int) { empty_kernel<<<1, 32, 0, s>>>(); }));
  rows.push_back(measure(
      "launch+flag", reps, s, [&](int v) { flag_kernel<<<1, 32, 0, s>>>(host_dev, static_cast<unsigned long long>(v)); },
      [&](int v) { return *seen == static_cast<unsigned long long>(v); }));
  rows.push_back(measure("memcpy d2d 8K", reps, s, [&](int) {
    ok(cudaMemcpyAsync(b, a, kBytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  }));
  rows.push_back(measure("memcpy h2d 8B", reps, s, [&](int) {
    ok(cudaMemcpyAsync(flags_dev, host + 2, sizeof(unsigned long long), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  }));
  rows.push_back(measure("batch 1", reps, s, [&](int) { batch(1); }));
  rows.push_back(measure("batch 8", reps, s, [&](int) { batch(8); }));
  rows.push_back(measure("batch 8 any", reps, s, [&](int) {
    cudaMemcpyAttributes any{};
    any.srcAccessOrder = cudaMemcpySrcAccessOrderAny;
    ok(cudaMemcpyBatchAsync(dst.data(), src.data(), sizes.data(), 8, &any, &attr_index, 1, s), "cudaMemcpyBatchAsync");
  }));
  rows.push_back(measure("memcpy d2d 8K x8", reps, s, [&](int) {
    for (size_t i = 0; i < 8; ++i)
      ok(cudaMemcpyAsync(dst[i], src[i], kBytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  }));
  rows.push_back(measure("memcpy d2d 64K", reps, s, [&](int) {
    ok(cudaMemcpyAsync(b, a, 8 * kBytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
  }));
  rows.push_back(measure("event record", reps, s, [&](int) { ok(cudaEventRecord(ev, s), "cudaEventRecord"); }));
  rows.push_back(measure("event query", reps, s, [&](int) { (void)cudaEventQuery(ev); }));
  rows.push_back(measure(
      "write value", reps, s,
      [&](int v) {
        if (write_value(reinterpret_cast<CUstream>(s), mark_dev, static_cast<cuuint64_t>(v), 0) != CUDA_SUCCESS) {
          std::fprintf(stderr, "cuda_call_cost: cuStreamWriteValue64 failed\n");
          std::exit(1);
        }
      },
      [&](int v) { return seen[1] == static_cast<unsigned long long>(v); }));
  rows.push_back(measure("batch memop 1", reps, s, [&](int v) { writes(1, flag_dev, static_cast<unsigned long long>(v)); }));
  rows.push_back(measure("batch memop 32", reps, s, [&](int v) { writes(32, flag_dev, static_cast<unsigned long long>(v)); }));
  rows.push_back(measure(
      "pass, events", reps, s,
      [&](int v) {
        batch(1);
        host[2] = static_cast<unsigned long long>(v);
        ok(cudaMemcpyAsync(flags_dev, host + 2, sizeof(unsigned long long), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
        ok(cudaEventRecord(ev, s), "cudaEventRecord");
      },
      [&](int) { return cudaEventQuery(ev) == cudaSuccess; }));
  rows.push_back(measure(
      "pass, memops", reps, s,
      [&](int v) {
        batch(1);
        CUstreamBatchMemOpParams ops[2];
        std::memset(ops, 0, sizeof(ops));
        ops[0].writeValue.operation = ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
        ops[0].writeValue.address = flag_dev;
        ops[1].writeValue.address = mark_dev;
        ops[0].writeValue.value64 = ops[1].writeValue.value64 = static_cast<cuuint64_t>(v);
        if (batch_memop(reinterpret_cast<CUstream>(s), 2, ops, 0) != CUDA_SUCCESS) {
          std::fprintf(stderr, "cuda_call_cost: cuStreamBatchMemOp failed\n");
          std::exit(1);
        }
      },
      [&](int v) { return seen[1] == static_cast<unsigned long long>(v); }));

  cudaDeviceProp prop{};
  ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("# cuda_call_cost: %s, %d repetitions, the stream idle before each call; us\n", prop.name, reps);
  std::printf("%-16s %9s %9s %9s %11s %11s\n", "call", "mean", "median", "min", "done mean", "done median");
  for (const Row& r : rows) {
    std::printf("%-16s %9.2f %9.2f %9.2f", r.name.c_str(), r.call.mean, r.call.median, r.call.min);
    if (r.has_done) std::printf(" %11.2f %11.2f\n", r.done.mean, r.done.median);
    else std::printf(" %11s %11s\n", "-", "-");
  }
  cudaEventDestroy(ev);
  cudaFree(flags_dev);
  cudaFreeHost(host);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s);
  return 0;
}
