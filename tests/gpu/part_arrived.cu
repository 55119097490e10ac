// `weft_part_gpu_tests arrived [--epochs E]` (gpu_part_arrived): device parrived's cache of the
// started epoch (arrived_cached, weft/part/common.hpp: the flag block's kFlagStartedSeen for a
// receive request, finished[partitions] for a collective) on one GPU without communication.
// A PrecvDeviceHandle and a PcollDeviceHandle are built over memory the test owns (flag block,
// finished words and partition data in device memory; the host words page-locked and mapped),
// and the producing blocks of the test's kernel stand in for the sender.
//
// Epochs e = 0..E, each: the host stores e into the started host word (as start does; e = 0:
// never started), picks which partitions arrive in e (random; none in e = 0 and every 5th
// epoch, all in every 7th), poisons the partition data and the answers, then runs one kernel
// of 8 blocks. Its first 4 blocks produce: after a random pause (up to 20 us) each thread
// writes its partition's words for epoch e and releases the partition's flag and finished
// word = e. The other 4 check, one thread per partition, against the host's epoch: a
// partition that arrives must turn parrived true on both handles within 2 s and then hold
// e's words; one that does not must answer false on both, 64 times while the producers run
// (its flag holds an older epoch, often the cache's own: the answer a stale cache would get
// wrong). Epochs alternate between plain launches and replays of one CUDA graph (the kernel
// captured once; its epoch and plan come from mapped host memory). Checked on the host after
// each epoch: every partition's answer, and both caches at most e (at e after an epoch with
// an arrival).
#include <cuda_runtime.h>

#include <cstdio>
#include <random>

#include "weft/part/device.hpp"

namespace {

using weft::part::PcollDeviceHandle;
using weft::part::PrecvDeviceHandle;

constexpr uint32_t kParts = 512, kThreads = 128, kWords = 32;  // words (8 B) per partition
constexpr uint32_t kProducerBlocks = kParts / kThreads, kBlocks = 2 * kProducerBlocks;
constexpr uint32_t kAbsentPolls = 64;
constexpr uint64_t kArriveNs = 2000000000ull;

/// One partition's answer (out[p]); the poison is none of them.
enum : unsigned long long {
  kArrivedRight = 1,  // arrived: parrived true on both handles, every word e's
  kAbsentRight,       // not in this epoch: every answer false
  kRecvTimedOut,      // arrived, but the receive handle's parrived stayed false for 2 s
  kCollTimedOut,      // arrived, but the collective's parrived stayed false for 2 s
  kDataWrong,         // parrived true, a word not e's (true before the data)
  kRecvAbsentTrue,    // not in this epoch, the receive handle's parrived said true
  kCollAbsentTrue,    // not in this epoch, the collective's parrived said true
};
const char* kCodeNames[] = {"poison (not written)", "arrived, right", "absent, right",
                            "arrived, receive parrived false for 2 s", "arrived, collective parrived false for 2 s",
                            "parrived true before the epoch's data", "absent, receive parrived true",
                            "absent, collective parrived true"};

/// Mapped host memory: what the host decided for this epoch.
struct Plan {
  uint64_t epoch;
  uint32_t arrives[kParts];
  uint32_t pause_ns[kParts];
};

__host__ __device__ uint64_t word_of(uint64_t e, uint32_t p, uint32_t i) {
  return (e << 40) ^ (uint64_t{p} << 20) ^ i ^ 0x5a5a5a5a5ull;
}

__device__ bool poll(const PrecvDeviceHandle* r, const PcollDeviceHandle* c, uint32_t p) {
  const auto ready = [&] { return r != nullptr ? r->parrived(p) : c->parrived(p); };
  return weft::device::spin_until(ready, weft::device::deadline_after(kArriveNs)) == weft::device::WaitResult::Ok;
}

__global__ void epoch_kernel(PrecvDeviceHandle r, PcollDeviceHandle c, uint64_t* flags, uint64_t* data,
                             const Plan* plan, unsigned long long* out) {
  const volatile Plan* pl = plan;
  const uint64_t e = pl->epoch;
  if (blockIdx.x < kProducerBlocks) {  // the sender
    const uint32_t p = blockIdx.x * kThreads + threadIdx.x;
    if (!pl->arrives[p]) return;
    __nanosleep(pl->pause_ns[p]);
    for (uint32_t i = 0; i < kWords; ++i) data[uint64_t{p} * kWords + i] = word_of(e, p, i);
    weft::device::st_release_sys(flags + weft::part::kFlagFirst + p, e);  // threshold 1
    weft::device::st_release_gpu(c.finished + p, e);
    return;
  }
  const uint32_t p = (blockIdx.x - kProducerBlocks) * kThreads + threadIdx.x;
  unsigned long long code = kAbsentRight;
  if (pl->arrives[p]) {
    code = kArrivedRight;
    if (!poll(&r, nullptr, p)) code = kRecvTimedOut;
    else if (!poll(nullptr, &c, p)) code = kCollTimedOut;
    for (uint32_t i = 0; code == kArrivedRight && i < kWords; ++i)
      if (reinterpret_cast<const volatile uint64_t*>(data)[uint64_t{p} * kWords + i] != word_of(e, p, i)) code = kDataWrong;
  } else {
    for (uint32_t k = 0; k < kAbsentPolls && code == kAbsentRight; ++k) {
      if (r.parrived(p)) code = kRecvAbsentTrue;
      else if (c.parrived(p)) code = kCollAbsentTrue;
      __nanosleep(256);
    }
  }
  out[p] = code;
}

#define ACHECK(cond, ...)                        \
  do {                                           \
    if (!(cond)) {                               \
      std::printf("gpu_part_arrived: FAILED: "); \
      std::printf(__VA_ARGS__);                  \
      std::printf("\n");                         \
      return 1;                                  \
    }                                            \
  } while (0)
#define ACUDA(call) ACHECK((call) == cudaSuccess, "%s: %s", #call, cudaGetErrorString(cudaGetLastError()))

/// The device memory of one run (freed by the destructor).
struct Memory {
  uint64_t *host = nullptr, *flags = nullptr, *finished = nullptr, *data = nullptr;
  Plan* plan = nullptr;
  unsigned long long* out = nullptr;
  ~Memory() {
    cudaFreeHost(host);
    cudaFreeHost(plan);
    cudaFree(flags);
    cudaFree(finished);
    cudaFree(data);
    cudaFree(out);
  }
};

/// The host's plan for epoch e (which partitions arrive, each producer's pause).
void plan_epoch(Plan& plan, uint64_t e, std::mt19937_64& rng) {
  const bool none = e == 0 || e % 5 == 0, all = !none && e % 7 == 0;
  for (uint32_t p = 0; p < kParts; ++p) {
    plan.arrives[p] = none ? 0 : all ? 1 : static_cast<uint32_t>(rng() & 1);
    plan.pause_ns[p] = static_cast<uint32_t>(rng() % 20000);
  }
  plan.epoch = e;
}

/// Checks epoch e's answers and both caches; returns the partitions that arrived.
int check_epoch(const Memory& m, uint64_t e, bool graphed, uint32_t* arrived) {
  static unsigned long long out[kParts];
  ACUDA(cudaMemcpy(out, m.out, sizeof(out), cudaMemcpyDeviceToHost));
  *arrived = 0;
  for (uint32_t p = 0; p < kParts; ++p) {
    const unsigned long long want = m.plan->arrives[p] ? kArrivedRight : kAbsentRight;
    const unsigned long long got = out[p];
    ACHECK(got == want, "epoch %llu (%s), partition %u: %s, expected %s", static_cast<unsigned long long>(e),
           graphed ? "graph replay" : "launch", p, got <= kCollAbsentTrue ? kCodeNames[got] : "poison (not written)",
           kCodeNames[want]);
    *arrived += m.plan->arrives[p];
  }
  uint64_t seen = 0, coll_seen = 0;
  ACUDA(cudaMemcpy(&seen, m.flags + weft::part::kFlagStartedSeen, sizeof(seen), cudaMemcpyDeviceToHost));
  ACUDA(cudaMemcpy(&coll_seen, m.finished + kParts, sizeof(coll_seen), cudaMemcpyDeviceToHost));
  for (uint64_t s : {seen, coll_seen}) {
    ACHECK(s <= e, "epoch %llu: a cache of started holds %llu, above the host's epoch",
           static_cast<unsigned long long>(e), static_cast<unsigned long long>(s));
    ACHECK(*arrived == 0 || s == e, "epoch %llu: partitions arrived but a cache of started holds %llu",
           static_cast<unsigned long long>(e), static_cast<unsigned long long>(s));
  }
  return 0;
}

/// Allocates and sets up the memory and both handles.
int setup(Memory& m, PrecvDeviceHandle& r, PcollDeviceHandle& c, Plan** plan_dev, uint64_t** host_dev) {
  ACUDA(cudaHostAlloc(reinterpret_cast<void**>(&m.host), weft::part::kSlotWords * sizeof(uint64_t),
                      cudaHostAllocMapped));
  for (uint32_t w = 0; w < weft::part::kSlotWords; ++w) m.host[w] = 0;
  ACUDA(cudaHostAlloc(reinterpret_cast<void**>(&m.plan), sizeof(Plan), cudaHostAllocMapped));
  ACUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(host_dev), m.host, 0));
  ACUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(plan_dev), m.plan, 0));
  const size_t flag_bytes = (weft::part::kFlagFirst + kParts) * sizeof(uint64_t);
  ACUDA(cudaMalloc(&m.flags, flag_bytes));
  ACUDA(cudaMemset(m.flags, 0, flag_bytes));
  const uint64_t threshold = 1;
  ACUDA(cudaMemcpy(m.flags + weft::part::kFlagThreshold, &threshold, sizeof(threshold), cudaMemcpyHostToDevice));
  ACUDA(cudaMalloc(&m.finished, (kParts + 1) * sizeof(uint64_t)));
  ACUDA(cudaMemset(m.finished, 0, (kParts + 1) * sizeof(uint64_t)));
  ACUDA(cudaMalloc(&m.data, uint64_t{kParts} * kWords * sizeof(uint64_t)));
  ACUDA(cudaMalloc(&m.out, kParts * sizeof(unsigned long long)));
  r.buf = reinterpret_cast<const char*>(m.data);
  r.flags = m.flags;
  r.host = *host_dev;
  r.partitions = kParts;
  r.partition_bytes = kWords * sizeof(uint64_t);
  c.partitions = kParts;
  c.finished = m.finished;
  c.host = *host_dev;
  return 0;
}

}  // namespace

int arrived_epochs(long long epochs) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("skipped: no GPU\n");
    return 77;
  }
  Memory m;
  PrecvDeviceHandle r;
  PcollDeviceHandle c;
  Plan* plan_dev = nullptr;
  uint64_t* host_dev = nullptr;
  if (setup(m, r, c, &plan_dev, &host_dev) != 0) return 1;
  cudaStream_t s;
  ACUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ACUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  epoch_kernel<<<kBlocks, kThreads, 0, s>>>(r, c, m.flags, m.data, plan_dev, m.out);
  ACUDA(cudaStreamEndCapture(s, &graph));
  ACUDA(cudaGraphInstantiate(&exec, graph, 0));
  std::mt19937_64 rng(2811);
  unsigned long long arrivals = 0, replays = 0;
  int rc = 0;
  for (long long e = 0; rc == 0 && e <= epochs; ++e) {
    const uint64_t ep = static_cast<uint64_t>(e);
    __atomic_store_n(&m.host[weft::part::kWordStarted], ep, __ATOMIC_RELEASE);  // start (e = 0: never)
    plan_epoch(*m.plan, ep, rng);
    ACUDA(cudaMemsetAsync(m.data, 0xA5, uint64_t{kParts} * kWords * sizeof(uint64_t), s));
    ACUDA(cudaMemsetAsync(m.out, 0xA5, kParts * sizeof(unsigned long long), s));
    const bool graphed = e % 2 == 1;
    if (graphed) ACUDA(cudaGraphLaunch(exec, s));
    else epoch_kernel<<<kBlocks, kThreads, 0, s>>>(r, c, m.flags, m.data, plan_dev, m.out);
    ACUDA(cudaGetLastError());
    ACUDA(cudaStreamSynchronize(s));
    uint32_t arrived = 0;
    rc = check_epoch(m, ep, graphed, &arrived);
    arrivals += arrived;
    replays += graphed;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  if (rc != 0) return rc;
  std::printf("gpu_part_arrived: %lld epochs (%llu graph replays), %llu partitions arrived, %llu answers right\n",
              epochs, replays, arrivals, static_cast<unsigned long long>(epochs + 1) * kParts);
  return 0;
}
