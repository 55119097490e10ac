// Port channels within a host (label gpu): a kernel posts triggers, the proxy moves the
// data with copy engines into another buffer (on a second GPU where there is one), a
// second kernel waits for the signals and checks every byte. Also: capture in a CUDA
// graph and replay, a refused trigger ending the kernel's flush with Aborted, and the
// copy rate of one channel. Exits 77 (skipped) without a GPU.
//
// `ucx`: the network path in one process: a UCX worker connected to itself, GPU memory
// put (staged through page-locked buffers where this UCX has no CUDA support) into
// page-locked memory the waiting kernel reads through its mapping; skipped without UCX.
//
// `mesh N`: N rank processes sharing the GPUs as 2 emulated nodes (WEFT_EMULATE_NODES=2);
// each kernel writes its block, sends it through PortMesh channels (UCX) to the ranks of
// the other node, waits for theirs and checks every byte. Buffers are page-locked mapped
// host memory, which UCX reaches with or without CUDA support.
//
// On one GPU the receiver and the sender share a context: every kernel is loaded before the
// first round (load_kernels), since under CUDA's lazy loading (the default since 12.2) the
// first launch of the sender could wait for the spinning receiver to end. A failed round
// prints the signal counters and a host recount of the destination, telling "the data never
// arrived" from "the receiver read before the data was visible", and re-synchronizes the
// counters so the next round tests only itself.
//
//   weft_gpu_port_tests [correct|graph|refused|rate|ucx|mesh N]
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/node_layout.hpp"
#include "net/port_mesh.hpp"
#include "net/ucx_transport.hpp"
#include "proxy/copy_engine.hpp"
#include "proxy/proxy.hpp"
#include "proxy/staging.hpp"
#include "bootstrap/bootstrap.hpp"
#include "weft/device/port_channel.hpp"

using namespace weft;
using namespace weft::device;

#define CHECK(x)                                                                            \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

constexpr uint64_t kTimeoutNs = 10'000'000'000ull;

__global__ void fill(uint8_t* p, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    p[i] = static_cast<uint8_t>(i * 131 + seed);
}

/// One thread: `pieces` puts with a signal each, then a flush.
__global__ void sender(PortChannelDeviceHandle ch, uint64_t bytes, int pieces, int* status) {
  Deadline d = deadline_after(kTimeoutNs);
  uint64_t piece = bytes / pieces;
  WaitResult r = WaitResult::Ok;
  for (int i = 0; i < pieces && r == WaitResult::Ok; ++i) r = ch.put_with_signal(i * piece, i * piece, piece, d);
  if (r == WaitResult::Ok) r = ch.flush(d);
  *status = static_cast<int>(r);
}

/// One thread waits for `pieces` signals; then the block counts bytes that differ.
__global__ void receiver(PortChannelDeviceHandle ch, const uint8_t* dst, uint64_t bytes, int pieces, uint32_t seed,
                         int* status, unsigned long long* wrong) {
  __shared__ int result;
  if (threadIdx.x == 0) {
    Deadline d = deadline_after(kTimeoutNs);
    WaitResult r = WaitResult::Ok;
    for (int i = 0; i < pieces && r == WaitResult::Ok; ++i) r = ch.wait(d);
    result = static_cast<int>(r);
    *status = result;
  }
  __syncthreads();
  if (result != 0) return;
  unsigned long long bad = 0;
  for (uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) bad += dst[i] != static_cast<uint8_t>(i * 131 + seed);
  atomicAdd(wrong, bad);
}

/// A kernel's status word: -1 (set before the launch) when it did not write one.
const char* status_name(int s) {
  switch (s) {
    case -1: return "did not report";
    case static_cast<int>(WaitResult::Ok): return "Ok";
    case static_cast<int>(WaitResult::Timeout): return "Timeout";
    case static_cast<int>(WaitResult::Aborted): return "Aborted";
    default: return "unknown status";
  }
}

/// Loads the kernels in the current device's context now. Under lazy loading a kernel's
/// first launch may wait for the context to go idle: a sender launched for the first time
/// while the receiver spins on the same GPU would start only after the receiver timed out.
void load_kernels() {
  cudaFuncAttributes fa;
  CHECK(cudaFuncGetAttributes(&fa, fill));
  CHECK(cudaFuncGetAttributes(&fa, sender));
  CHECK(cudaFuncGetAttributes(&fa, receiver));
}

struct Rig {
  int src_dev = 0, dst_dev = 0;
  uint64_t bytes;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  uint64_t* counters = nullptr;  // on dst_dev: [0] inbound, [1] waited by the receiver, [2] the sender's inbound
  uint64_t* send_waited = nullptr;
  uint64_t signals = 0;          // signals the proxy has sent on this channel (after each round)
  int* status = nullptr;         // managed: [0] sender, [1] receiver
  unsigned long long* wrong = nullptr;
  std::shared_ptr<proxy::CopyEngineEndpoint> conn;
  std::unique_ptr<proxy::Proxy> proxy;
  PortChannelDeviceHandle send, recv;

  explicit Rig(uint64_t b) : bytes(b) {
    int n = 0;
    CHECK(cudaGetDeviceCount(&n));
    dst_dev = n > 1 ? 1 : 0;
    CHECK(cudaSetDevice(dst_dev));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMemset(dst, 0, bytes));
    CHECK(cudaMalloc(&counters, 64));
    CHECK(cudaMemset(counters, 0, 64));
    load_kernels();
    CHECK(cudaSetDevice(src_dev));
    load_kernels();
    if (dst_dev != src_dev) cudaDeviceEnablePeerAccess(dst_dev, 0);
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&send_waited, 8));
    CHECK(cudaMemset(send_waited, 0, 8));
    CHECK(cudaMallocManaged(&status, 2 * sizeof(int)));
    CHECK(cudaMallocManaged(&wrong, sizeof(unsigned long long)));
    conn = std::make_shared<proxy::CopyEngineEndpoint>(src_dev, "GPU " + std::to_string(dst_dev), 10);
    proxy = std::make_unique<proxy::Proxy>(proxy::ProxyOptions{"proxy of GPU 0", 256, 10, proxy::cuda_fifo_memory(src_dev)});
    uint32_t s = proxy->add_local_memory(src, bytes);
    uint32_t d = proxy->add_remote_memory(conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(dst), bytes, nullptr});
    uint32_t c = proxy->add_remote_memory(conn, proxy::RemoteMemory{reinterpret_cast<uint64_t>(counters), 64, nullptr});
    send = proxy->make_port_channel(proxy::PortChannelSpec{conn, s, d, c, 0, counters + 2, send_waited});
    recv = send;  // the receiving side of this one-way channel: the counter the signals land in
    recv.inbound = counters;
    recv.waited = counters + 1;
    proxy->start();
  }
};

/// After both streams of a round have synchronized: checks the statuses, the device's count
/// of wrong bytes and the signal counters (the receiver must have consumed exactly the
/// signals the proxy sent, `pieces` more than before). On failure, prints the host's recount
/// of the destination and what it means, and re-synchronizes the receiver's counter with
/// the inbound one so that the next round waits for its own signals. Returns 0 or 1.
int finish_round(Rig& r, const std::string& label, int pieces, uint32_t seed) {
  uint64_t c[2] = {0, 0};  // inbound, waited
  CHECK(cudaMemcpy(c, r.counters, sizeof(c), cudaMemcpyDeviceToHost));
  r.signals += static_cast<uint64_t>(pieces);
  const int snd = r.status[0], rcv = r.status[1];
  const bool checked = rcv == static_cast<int>(WaitResult::Ok);
  const bool ok = snd == 0 && rcv == 0 && *r.wrong == 0 && c[0] == r.signals && c[1] == r.signals;
  std::printf("%s: sender %s, receiver %s, device check: ", label.c_str(), status_name(snd), status_name(rcv));
  if (checked) std::printf("%llu bytes wrong", *r.wrong);
  else std::printf("skipped");
  std::printf("; signals landed %llu, consumed %llu, expected %llu\n", static_cast<unsigned long long>(c[0]),
              static_cast<unsigned long long>(c[1]), static_cast<unsigned long long>(r.signals));
  if (ok) return 0;
  std::vector<uint8_t> host(r.bytes);
  CHECK(cudaMemcpy(host.data(), r.dst, r.bytes, cudaMemcpyDeviceToHost));
  uint64_t bad = 0, first = r.bytes;
  for (uint64_t i = 0; i < r.bytes; ++i)
    if (host[i] != static_cast<uint8_t>(i * 131 + seed)) {
      ++bad;
      if (first == r.bytes) first = i;
    }
  std::printf("  host recount after synchronizing: %llu of %llu bytes wrong", static_cast<unsigned long long>(bad),
              static_cast<unsigned long long>(r.bytes));
  if (bad > 0) std::printf(" (first at byte %llu)", static_cast<unsigned long long>(first));
  std::printf("\n");
  auto err = r.proxy->error();
  if (err) std::printf("  proxy: %s\n", err->c_str());
  if (bad > 0)
    std::printf("  diagnosis: the data never arrived (the proxy's copies did not deliver it)\n");
  else if (checked && *r.wrong > 0)
    std::printf("  diagnosis: the data arrived, but the receiver read it before it was visible: its waits ended %s\n",
                c[1] == r.signals ? "before the data behind the signals had landed"
                                  : "on signals of an earlier round (consumed count behind the landed one)");
  else if (rcv == static_cast<int>(WaitResult::Timeout) && c[0] >= r.signals)
    std::printf("  diagnosis: every signal landed, but not before the receiver's deadline (did the sender start late?)\n");
  else if (c[0] < r.signals)
    std::printf("  diagnosis: %llu signals never landed\n", static_cast<unsigned long long>(r.signals - c[0]));
  if (c[1] != c[0] || r.signals != c[0]) {  // the next round must not start with a debt or a surplus
    CHECK(cudaMemcpy(r.counters + 1, r.counters, sizeof(uint64_t), cudaMemcpyDeviceToDevice));
    r.signals = c[0];
    std::printf("  re-synchronized: the receiver has now consumed all %llu landed signals\n",
                static_cast<unsigned long long>(c[0]));
  }
  return 1;
}

int run_round(Rig& r, cudaStream_t a, cudaStream_t b, int pieces, uint32_t seed) {
  *r.wrong = 0;
  r.status[0] = r.status[1] = -1;
  fill<<<256, 256, 0, a>>>(r.src, r.bytes, seed);
  CHECK(cudaSetDevice(r.dst_dev));
  receiver<<<1, 1024, 0, b>>>(r.recv, r.dst, r.bytes, pieces, seed, r.status + 1, r.wrong);
  CHECK(cudaSetDevice(r.src_dev));
  sender<<<1, 1, 0, a>>>(r.send, r.bytes, pieces, r.status);
  CHECK(cudaStreamSynchronize(a));
  CHECK(cudaStreamSynchronize(b));
  return finish_round(r, std::to_string(pieces) + " x " + std::to_string(r.bytes / pieces) + " bytes", pieces, seed);
}

/// The UCX path (see the header comment). Returns 0, 1 (failed) or 77 (no UCX).
int ucx_round() {
  std::string why = net::ucx_unavailable_reason();
  if (!why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return 77;
  }
  const uint64_t bytes = 64ull << 20;
  CHECK(cudaSetDevice(0));
  load_kernels();  // the receiver spins while the sender is launched, on the same GPU
  // Rank 0 of 2 whose rank 1 is itself: the exchange copies its own block to the peer's.
  // RMA puts: in active-message mode the receiver refuses messages that name itself as the
  // sender (a peer never does), which is every message here.
  setenv("WEFT_NET_PROTO", "put", 1);
  net::UcxTransport ucx(0, 2, [](void* d, size_t n) { std::memcpy(static_cast<char*>(d) + n, d, n); }, 10);
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;      // page-locked, mapped: the network writes it, the kernel reads it
  uint64_t* sig = nullptr;     // page-locked, mapped: [0] inbound, [1] waited, [2] sender's
  int* status = nullptr;
  unsigned long long* wrong = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaHostAlloc(&dst, bytes, cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&sig, 64, cudaHostAllocMapped));
  std::memset(dst, 0, bytes);
  std::memset(sig, 0, 64);
  CHECK(cudaMallocManaged(&status, 2 * sizeof(int)));
  CHECK(cudaMallocManaged(&wrong, sizeof(unsigned long long)));
  auto dst_mem = ucx.register_memory(dst, bytes)[1];
  auto sig_mem = ucx.register_memory(sig, 64)[1];
  std::shared_ptr<proxy::Endpoint> conn = ucx.endpoint(1);
  std::printf("UCX %s CUDA memory\n", ucx.supports_cuda_memory() ? "registers" : "cannot register: staging");
  if (!ucx.supports_cuda_memory()) conn = std::make_shared<proxy::StagingEndpoint>(conn, 0, 4 << 20, 4, 10);
  proxy::Proxy px(proxy::ProxyOptions{"proxy of GPU 0", 256, 10, proxy::cuda_fifo_memory(0)});
  uint32_t s = px.add_local_memory(src, bytes);
  uint32_t d = px.add_remote_memory(conn, dst_mem);
  uint32_t c = px.add_remote_memory(conn, sig_mem);
  uint64_t* sig_dev = nullptr;
  uint8_t* dst_dev = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&sig_dev), sig, 0));
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dst_dev), dst, 0));
  PortChannelDeviceHandle send = px.make_port_channel(proxy::PortChannelSpec{conn, s, d, c, 0, sig_dev + 2, sig_dev + 2});
  PortChannelDeviceHandle recv = send;
  recv.inbound = sig_dev;
  recv.waited = sig_dev + 1;
  px.start();
  cudaStream_t a, b;
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  *wrong = 0;
  status[0] = status[1] = -1;
  fill<<<256, 256, 0, a>>>(src, bytes, 9);
  receiver<<<1, 1024, 0, b>>>(recv, dst_dev, bytes, 8, 9, status + 1, wrong);
  auto t0 = std::chrono::steady_clock::now();
  sender<<<1, 1, 0, a>>>(send, bytes, 8, status);
  CHECK(cudaStreamSynchronize(a));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(cudaStreamSynchronize(b));
  auto err = px.error();
  std::printf("sender %s, receiver %s, %llu bytes wrong, %.2f GB/s; proxy: %s\n", status_name(status[0]),
              status_name(status[1]), *wrong, bytes / secs / 1e9, err ? err->c_str() : "ok");
  px.stop();
  return (status[0] == 0 && status[1] == 0 && *wrong == 0) ? 0 : 1;
}

/// One thread block: writes this rank's block, sends it to every peer, waits for theirs and
/// counts wrong bytes in them.
__global__ void mesh_kernel(const PortChannelDeviceHandle* chans, const int* peers, int npeers, uint8_t* buf,
                            uint64_t block, int rank, int* status, unsigned long long* wrong) {
  __shared__ int result;
  for (uint64_t i = threadIdx.x; i < block; i += blockDim.x) buf[rank * block + i] = static_cast<uint8_t>(i * 7 + rank);
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();  // the block's writes reach host memory before the proxy reads them
    Deadline d = deadline_after(kTimeoutNs);
    PortChannelDeviceHandle c[8];
    for (int p = 0; p < npeers; ++p) c[p] = chans[p];
    WaitResult r = WaitResult::Ok;
    for (int p = 0; p < npeers && r == WaitResult::Ok; ++p) r = c[p].put_with_signal(rank * block, rank * block, block, d);
    for (int p = 0; p < npeers && r == WaitResult::Ok; ++p) r = c[p].flush(d);
    for (int p = 0; p < npeers && r == WaitResult::Ok; ++p) r = c[p].wait(d);
    result = static_cast<int>(r);
    *status = result;
  }
  __syncthreads();
  if (result != 0) return;
  unsigned long long bad = 0;
  for (int p = 0; p < npeers; ++p)
    for (uint64_t i = threadIdx.x; i < block; i += blockDim.x)
      bad += buf[peers[p] * block + i] != static_cast<uint8_t>(i * 7 + peers[p]);
  atomicAdd(wrong, bad);
}

/// One rank of `mesh`. Returns 0, 1 (failed), 77 (no GPU or no UCX).
int mesh_rank(const UniqueId& id, int rank, int nranks) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 77;
  if (!net::ucx_unavailable_reason().empty()) return 77;
  CHECK(cudaSetDevice(rank % ndev));
  setenv("WEFT_EMULATE_NODES", "2", 1);
  auto boot = Bootstrap::join(id, rank, nranks, 30);
  net::NodeLayout nodes = net::node_layout(std::vector<uint64_t>(static_cast<size_t>(nranks), 0));
  const uint64_t block = 8ull << 20;
  uint8_t* buf = nullptr;
  uint64_t* sig = nullptr;
  CHECK(cudaHostAlloc(&buf, block * nranks, cudaHostAllocMapped));
  CHECK(cudaHostAlloc(&sig, 64ull * nranks, cudaHostAllocMapped));
  std::memset(buf, 0, block * nranks);
  std::memset(sig, 0, 64ull * nranks);
  net::PortMeshOptions o;
  o.name = "proxy of rank " + std::to_string(rank);
  o.timeout_s = 20;
  o.fifo_memory = proxy::cuda_fifo_memory(rank % ndev);
  o.device_pointer = [](uint64_t* p) {
    void* d = nullptr;
    CHECK(cudaHostGetDevicePointer(&d, p, 0));
    return static_cast<uint64_t*>(d);
  };
  auto mesh = std::make_unique<net::PortMesh>(*boot, nodes, buf, block * nranks, sig, o);
  std::vector<PortChannelDeviceHandle> hs;
  for (int q : mesh->peers()) hs.push_back(mesh->channel(q));
  const int np = static_cast<int>(hs.size());
  if (np == 0 || np > 8) return 1;
  PortChannelDeviceHandle* d_chans = nullptr;
  int* d_peers = nullptr;
  int* status = nullptr;
  unsigned long long* wrong = nullptr;
  CHECK(cudaMalloc(&d_chans, sizeof(PortChannelDeviceHandle) * np));
  CHECK(cudaMalloc(&d_peers, sizeof(int) * np));
  CHECK(cudaMemcpy(d_chans, hs.data(), sizeof(PortChannelDeviceHandle) * np, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_peers, mesh->peers().data(), sizeof(int) * np, cudaMemcpyHostToDevice));
  CHECK(cudaMallocManaged(&status, sizeof(int)));
  CHECK(cudaMallocManaged(&wrong, sizeof(unsigned long long)));
  *status = -1;
  *wrong = 0;
  uint8_t* d_buf = nullptr;
  CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_buf), buf, 0));
  mesh_kernel<<<1, 512>>>(d_chans, d_peers, np, d_buf, block, rank, status, wrong);
  CHECK(cudaDeviceSynchronize());
  auto err = mesh->proxy().error();
  std::printf("rank %d: %d peers over the network, status %d, %llu bytes wrong; proxy: %s\n", rank, np, *status, *wrong,
              err ? err->c_str() : "ok");
  const int rc = (*status == 0 && *wrong == 0) ? 0 : 1;
  boot->barrier(30);
  mesh->proxy().stop();
  boot->barrier(30);
  mesh.reset();
  return rc;
}

/// `mesh N`: forks N rank processes (the parent touches neither CUDA nor UCX).
int mesh(int nranks) {
  UniqueId id = start_bootstrap_root(net::resolve("127.0.0.1", 0), 0, 60);
  std::vector<pid_t> pids;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int rc = 2;
      try {
        rc = mesh_rank(id, r, nranks);
      } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  int worst = 0, skipped = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    const int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 3;
    if (rc == 77) ++skipped;
    else if (rc != 0) worst = 1;
  }
  if (skipped == nranks) {
    std::printf("skipped: no GPU or no UCX\n");
    return 77;
  }
  std::printf("mesh %d: %s\n", nranks, worst == 0 && skipped == 0 ? "ok" : "FAILED");
  return worst == 0 && skipped == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "mesh") return mesh(argc > 2 ? std::atoi(argv[2]) : 2);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  std::string what = argc > 1 ? argv[1] : "correct";
  if (what == "ucx") return ucx_round();
  Rig r(what == "rate" ? (256ull << 20) : (64ull << 20));
  cudaStream_t a, b;
  CHECK(cudaSetDevice(r.dst_dev));
  CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  CHECK(cudaSetDevice(r.src_dev));
  CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  int rc = 0;
  if (what == "correct") {
    rc |= run_round(r, a, b, 16, 1);
    rc |= run_round(r, a, b, 1, 2);  // the counters only grow: a second round waits for its own signals
  } else if (what == "graph") {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
    sender<<<1, 1, 0, a>>>(r.send, r.bytes, 8, r.status);
    CHECK(cudaStreamEndCapture(a, &g));
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    fill<<<256, 256, 0, a>>>(r.src, r.bytes, 3);
    for (int i = 0; i < 3; ++i) {
      *r.wrong = 0;
      r.status[0] = r.status[1] = -1;
      CHECK(cudaSetDevice(r.dst_dev));
      receiver<<<1, 1024, 0, b>>>(r.recv, r.dst, r.bytes, 8, 3, r.status + 1, r.wrong);
      CHECK(cudaSetDevice(r.src_dev));
      CHECK(cudaGraphLaunch(ge, a));
      CHECK(cudaStreamSynchronize(a));
      CHECK(cudaStreamSynchronize(b));
      rc |= finish_round(r, "replay " + std::to_string(i), 8, 3);
    }
  } else if (what == "refused") {
    PortChannelDeviceHandle bad = r.send;
    bad.dst_mem = bad.src_mem;  // a local memory as destination: the proxy must refuse it
    r.status[0] = -1;
    auto t0 = std::chrono::steady_clock::now();
    sender<<<1, 1, 0, a>>>(bad, r.bytes, 1, r.status);
    CHECK(cudaStreamSynchronize(a));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto err = r.proxy->error();
    std::printf("sender %s after %.2f s; proxy: %s\n", status_name(r.status[0]), s, err ? err->c_str() : "(no error)");
    rc = (r.status[0] == static_cast<int>(WaitResult::Aborted) && s < 5 && err) ? 0 : 1;
  } else if (what == "rate") {
    rc |= run_round(r, a, b, 1, 4);  // warm
    auto t0 = std::chrono::steady_clock::now();
    const int reps = 10;
    for (int i = 0; i < reps; ++i) rc |= run_round(r, a, b, 4, 5 + i);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("copy engine, GPU %d -> GPU %d: %.1f GB/s (256 MiB rounds incl. fill and check)\n", r.src_dev,
                r.dst_dev, reps * double(r.bytes) / s / 1e9);
  } else {
    std::printf("unknown scenario %s\n", what.c_str());
    return 2;
  }
  r.proxy->stop();
  std::printf("%s: %s\n", what.c_str(), rc == 0 ? "ok" : "FAILED");
  return rc;
}
