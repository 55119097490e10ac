#include "nccl/comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "nccl/fallback.hpp"
#include "nccl/group.hpp"
#include "nccl/premul.hpp"
#include "util/cuda_check.hpp"
#include "bootstrap/socket.hpp"
#include "util/config.hpp"
#include "util/log.hpp"
#include "util/secure_memory.hpp"

namespace weft::nccl {

// As NCCL does, the bootstrap binds the interface NCCL_SOCKET_IFNAME names (when
// WEFT_SOCKET_IFNAME is unset): set once, when this library is loaded.
[[maybe_unused]] const bool kHonourNcclSocketIfname = (net::honour_nccl_socket_ifname(), true);

namespace {

}  // namespace

HandleRegistry& live_comms() {
  static HandleRegistry* r = new HandleRegistry();  // never destroyed: used until exit
  return *r;
}

ncclComm& handle(ncclComm_t c, const char*) {
  if (c == nullptr) fail(ErrorCode::InvalidArgument, "the communicator is NULL");
  if (!live_comms().live(c) || c->magic != ncclComm::kAlive)
    fail(ErrorCode::InvalidArgument, "the communicator was destroyed or is not one");
  return *c;
}

namespace {

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

// The private stream, ordered after the communicator's last call.
cudaStream_t internal_stream(ncclComm& c) {
  DeviceGuard g(c.device);
  if (c.internal == nullptr) WEFT_CUDA_CHECK(cudaStreamCreateWithFlags(&c.internal, cudaStreamNonBlocking));
  if (c.used && c.last_stream != c.internal) {
    if (capturing(c.last_stream))
      fail(ErrorCode::InvalidUsage, "rank " + std::to_string(c.rank) +
                                        ": this call cannot run while the communicator's stream is being captured");
    cudaEvent_t ev = nullptr;
    WEFT_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    cudaError_t e1 = cudaEventRecord(ev, c.last_stream);
    cudaError_t e2 = e1 == cudaSuccess ? cudaStreamWaitEvent(c.internal, ev, 0) : e1;
    cudaEventDestroy(ev);
    WEFT_CUDA_CHECK(e2);
  }
  return c.internal;
}

/// Device memory for one exchange, ordered on `s` (cudaMallocAsync / cudaFreeAsync). A plain
/// cudaFree waits for every kernel of the device: where ranks of this process share a GPU, it
/// would wait for a peer rank's kernel that waits for this rank's next call, a deadlock.
struct StreamBuffer {
  void* p = nullptr;
  cudaStream_t s;
  StreamBuffer(size_t bytes, cudaStream_t stream) : s(stream) { WEFT_CUDA_CHECK(cudaMallocAsync(&p, bytes, s)); }
  ~StreamBuffer() {
    if (p != nullptr) cudaFreeAsync(p, s);
  }
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
};

// Rank 0 makes the fallback NCCL's unique id and broadcasts it (with a validity byte).
void share_fallback_id(ncclComm& c) {
  if (config::get_string("WEFT_NCCL_FALLBACK").empty()) return;
  unsigned char msg[1 + NCCL_UNIQUE_ID_BYTES] = {};
  if (c.rank == 0) {
    std::string why;
    const RealNccl* real = real_nccl(&why);
    ncclUniqueId id{};
    if (real != nullptr && real->GetUniqueId(&id) == 0) {
      msg[0] = 1;
      std::memcpy(msg + 1, id.internal, NCCL_UNIQUE_ID_BYTES);
    }
  }
  if (c.nranks > 1) {
    DeviceGuard g(c.device);
    cudaStream_t s = internal_stream(c);
    StreamBuffer buf(sizeof(msg), s);
    WEFT_CUDA_CHECK(cudaMemcpyAsync(buf.p, msg, sizeof(msg), cudaMemcpyHostToDevice, s));
    check_weft(weftBroadcast(buf.p, buf.p, sizeof(msg), weftUint8, 0, c.weft, s));
    WEFT_CUDA_CHECK(cudaMemcpyAsync(msg, buf.p, sizeof(msg), cudaMemcpyDeviceToHost, s));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  c.fallback_id_valid = msg[0] == 1;
  if (c.fallback_id_valid) std::memcpy(c.fallback_id.internal, msg + 1, NCCL_UNIQUE_ID_BYTES);
}

}  // namespace

void check_weft(weftResult_t r) {
  if (r == weftSuccess) return;
  fail(static_cast<ErrorCode>(r), weftGetLastError(nullptr));
}

ncclComm& known(ncclComm_t c, const char* where) {
  ncclComm& k = handle(c, where);
  // NCCL's answer to a communicator used before its initialization completed (a deferred or
  // non-blocking one): ncclInvalidArgument.
  if (k.state == ncclComm::State::Pending)
    fail(ErrorCode::InvalidArgument,
         "the communicator is not initialized yet (it is initialized at ncclGroupEnd; poll ncclCommGetAsyncError "
         "until it returns ncclSuccess)");
  if (k.state == ncclComm::State::Failed) fail(k.failure_code, "the communicator's initialization failed: " + k.failure);
  return k;
}

ncclComm& usable(ncclComm_t c, const char* where) {
  ncclComm& k = known(c, where);
  if (k.state == ncclComm::State::Finalized)
    fail(ErrorCode::InvalidUsage, "the communicator was finalized");
  if (k.state == ncclComm::State::Revoked)
    fail(ErrorCode::InvalidUsage, "the communicator was revoked");
  return k;
}

void init_comm(ncclComm* c, int nranks, const ncclUniqueId& id, int rank, int device, bool eager_fallback) {
  try {
    if (nranks < 1) fail(ErrorCode::InvalidArgument, "nranks " + std::to_string(nranks) + " is not positive");
    if (rank < 0 || rank >= nranks)
      fail(ErrorCode::InvalidArgument,
           "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
    DeviceGuard g(device);
    weftUniqueId wid;
    static_assert(sizeof(wid.internal) == sizeof(id.internal));
    std::memcpy(wid.internal, id.internal, sizeof(wid.internal));
    weftComm_t w = nullptr;
    // Before the collective init returns to any rank of this process (see preload_premul).
    preload_premul();
    const weftResult_t joined = weftCommInitRank(&w, nranks, wid, rank);
    secure::wipe(wid.internal, sizeof(wid.internal));  // the secret's copy made here
    check_weft(joined);
    c->weft = w;
    c->rank = rank;
    c->nranks = nranks;
    c->device = device;
    share_fallback_id(*c);
    if (eager_fallback && c->fallback_id_valid) ensure_real_comm(*c, "calls the fallback NCCL runs");
    // Last: another thread polling ncclCommGetAsyncError may use the communicator from here on.
    c->state = ncclComm::State::Ready;
    WEFT_LOG(Info, "NCCL", "rank " << rank << " of " << nranks << " on device " << device << " ready"
                                   << (c->options.name.empty() ? "" : " (" + c->options.name + ")")
                                   << (c->fallback_id_valid ? ", fallback NCCL available" : ""));
  } catch (const Error& e) {
    c->failure_code = e.code();
    c->failure = e.what();
    c->state = ncclComm::State::Failed;  // after the record it publishes
    throw;
  } catch (const std::exception& e) {
    // Any other failure also ends the Pending state: a caller polling ncclCommGetAsyncError
    // must see an error, never ncclInProgress forever.
    c->failure_code = ErrorCode::Internal;
    c->failure = std::string("rank ") + std::to_string(rank) + ": initialization failed: " + e.what();
    c->state = ncclComm::State::Failed;
    throw;
  }
}

void* ensure_real_comm(ncclComm& c, const std::string& kind) {
  if (c.real != nullptr) return c.real;
  std::string why;
  const RealNccl* r = real_nccl(&why);
  if (r == nullptr) fail(ErrorCode::InvalidUsage, "weft does not run " + kind + ", and " + why);
  if (!c.fallback_id_valid)
    fail(ErrorCode::InvalidUsage, "weft does not run " + kind +
                                      ", and the fallback NCCL's communicator cannot be made: rank 0 shared no "
                                      "unique id for it at initialization (set WEFT_NCCL_FALLBACK on every rank "
                                      "before ncclCommInitRank)");
  DeviceGuard g(c.device);
  void* rc = nullptr;
  if (r->CommInitRankConfig != nullptr) {
    // Non-blocking initialization polled up to WEFT_TIMEOUT, so a rank that never comes
    // is an error rather than a hang.
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    int res = r->CommInitRankConfig(&rc, c.nranks, c.fallback_id, c.rank, &cfg);
    if (res != 0 && res != ncclInProgress) check_real(*r, res, "ncclCommInitRankConfig", rc);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration<double>(config::wait_seconds(config::get_seconds("WEFT_TIMEOUT")));
    int state = ncclInProgress;
    while (true) {
      if (rc == nullptr || r->CommGetAsyncError(rc, &state) != 0) state = ncclInternalError;
      if (state != ncclInProgress) break;
      if (std::chrono::steady_clock::now() > deadline) {
        if (rc) r->CommAbort(rc);
        fail(ErrorCode::Timeout, "rank " + std::to_string(c.rank) +
                                     ": the fallback NCCL's communicator was not ready within WEFT_TIMEOUT (a rank "
                                     "did not make the forwarded call " + kind + ")");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state != 0) {
      std::string msg = r->GetLastError ? r->GetLastError(rc) : "";
      if (rc) r->CommAbort(rc);
      fail(ErrorCode::Remote, "rank " + std::to_string(c.rank) + ": the fallback NCCL's communicator failed: " + msg);
    }
  } else {
    check_real(*r, r->CommInitRank(&rc, c.nranks, c.fallback_id, c.rank), "ncclCommInitRank", nullptr);
  }
  c.real = rc;
  WEFT_LOG(Info, "NCCL", "rank " << c.rank << ": fallback NCCL communicator made for " << kind);
  return rc;
}

std::vector<unsigned char> all_gather_bytes(ncclComm& c, const void* mine, size_t bytes) {
  std::vector<unsigned char> all(bytes * static_cast<size_t>(c.nranks));
  DeviceGuard g(c.device);
  cudaStream_t s = internal_stream(c);
  StreamBuffer buf(all.size(), s);
  char* mine_dev = static_cast<char*>(buf.p) + bytes * static_cast<size_t>(c.rank);
  WEFT_CUDA_CHECK(cudaMemcpyAsync(mine_dev, mine, bytes, cudaMemcpyHostToDevice, s));
  check_weft(weftAllGather(mine_dev, buf.p, bytes, weftUint8, c.weft, s));
  WEFT_CUDA_CHECK(cudaMemcpyAsync(all.data(), buf.p, all.size(), cudaMemcpyDeviceToHost, s));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(s));
  return all;
}

void split(ncclComm& parent, int color, int key, ncclComm_t* newcomm, const CommOptions& options) {
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    fail(ErrorCode::InvalidArgument, "color " + std::to_string(color) + " is negative and not NCCL_SPLIT_NOCOLOR");
  // 1. Everyone's (color, key).
  int32_t mine[2] = {color, key};
  std::vector<unsigned char> raw = all_gather_bytes(parent, mine, sizeof(mine));
  std::vector<int32_t> ck(raw.size() / sizeof(int32_t));
  std::memcpy(ck.data(), raw.data(), raw.size());
  std::vector<int> members;
  for (int r = 0; r < parent.nranks; ++r)
    if (color != NCCL_SPLIT_NOCOLOR && ck[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return ck[2 * a + 1] < ck[2 * b + 1]; });
  // 2. Each group's first member makes a weft unique id; everyone gathers them.
  weftUniqueId wid{};
  const bool leader = !members.empty() && members[0] == parent.rank;
  if (leader) check_weft(weftGetUniqueId(&wid));
  std::vector<unsigned char> ids = all_gather_bytes(parent, wid.internal, sizeof(wid.internal));
  secure::wipe(wid.internal, sizeof(wid.internal));
  if (color == NCCL_SPLIT_NOCOLOR) {
    secure::wipe(ids.data(), ids.size());
    *newcomm = nullptr;
    return;
  }
  const int new_rank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  ncclUniqueId id;
  std::memcpy(id.internal, ids.data() + static_cast<size_t>(members[0]) * sizeof(wid.internal), sizeof(id.internal));
  secure::wipe(ids.data(), ids.size());
  auto* c = new ncclComm;
  c->options = options;
  try {
    init_comm(c, static_cast<int>(members.size()), id, new_rank, parent.device);
  } catch (...) {
    secure::wipe(id.internal, sizeof(id.internal));
    release(c, true);
    throw;
  }
  secure::wipe(id.internal, sizeof(id.internal));
  *newcomm = c;
}

void finalize(ncclComm& c) {
  if (c.used && c.last_stream != nullptr && !capturing(c.last_stream)) {
    DeviceGuard g(c.device);
    WEFT_CUDA_CHECK(cudaStreamSynchronize(c.last_stream));
  }
  c.state = ncclComm::State::Finalized;
}

void release(ncclComm* c, bool abort) {
  if (!live_comms().retire(c)) fail(ErrorCode::InvalidArgument, "the communicator was destroyed or is not one");
  forget_deferred(c);
  c->magic = 0;
  weftResult_t r = weftSuccess;
  std::string message;
  if (c->real != nullptr) {
    if (const RealNccl* real = real_nccl(nullptr)) abort ? real->CommAbort(c->real) : real->CommDestroy(c->real);
  }
  if (c->weft != nullptr) {
    r = abort ? weftCommAbort(c->weft) : weftCommDestroy(c->weft);
    if (r != weftSuccess) message = weftGetLastError(nullptr);
  }
  if (c->internal != nullptr) cudaStreamDestroy(c->internal);
  // The shell stays allocated (and dead): its address is never reused by a new handle.
  c->internal = nullptr;
  c->weft = nullptr;
  c->real = nullptr;
  c->ops.clear();
  c->failure.clear();
  if (r != weftSuccess) fail(static_cast<ErrorCode>(r), message);
}

}  // namespace weft::nccl
