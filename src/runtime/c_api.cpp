// The extern "C" API of include/weft/weft.h. Every function body runs inside guard(),
// which turns weft::Error (and any other exception) into a weftResult_t and records the
// message for weftGetLastError; no exception crosses the C boundary.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "runtime/c_api_internal.hpp"
#include "runtime/communicator.hpp"
#include "util/cuda_check.hpp"
#include "bootstrap/env_init.hpp"
#include "ir/datatype.hpp"
#include "util/checked.hpp"
#include "util/handle_registry.hpp"
#include "util/log.hpp"
#include "util/secure_memory.hpp"
#include "weft/weft.h"

// The public enums and weft's one table of types and operators (ir/datatype.hpp) agree.
static_assert(weftInt8 == static_cast<int>(weft::DataType::Int8) && weftUint8 == static_cast<int>(weft::DataType::Uint8) &&
              weftInt32 == static_cast<int>(weft::DataType::Int32) && weftUint32 == static_cast<int>(weft::DataType::Uint32) &&
              weftInt64 == static_cast<int>(weft::DataType::Int64) && weftUint64 == static_cast<int>(weft::DataType::Uint64) &&
              weftFloat16 == static_cast<int>(weft::DataType::Float16) &&
              weftFloat32 == static_cast<int>(weft::DataType::Float32) &&
              weftFloat64 == static_cast<int>(weft::DataType::Float64) &&
              weftBfloat16 == static_cast<int>(weft::DataType::Bfloat16) && weftNumTypes == weft::kNumDataTypes);
static_assert(weftSum == weft::kOpSum && weftProd == weft::kOpProd && weftMax == weft::kOpMax && weftMin == weft::kOpMin &&
              weftAvg == weft::kOpAvg && weftNumOps == weft::kNumRedOps);

struct weftComm {
  std::unique_ptr<weft::Communicator> impl;
};

struct weftMemoryChannel {
  weft::exec::ChannelEnd channel;
};

namespace {

/// The weftComm_t handles made and not yet destroyed or aborted. A destroyed handle's small
/// weftComm object is never freed, so its address is never reused: using it again is an
/// error, never a use after free or a call on another communicator.
weft::HandleRegistry& live_comms() {
  static weft::HandleRegistry* r = new weft::HandleRegistry();  // never destroyed: used until exit
  return *r;
}

thread_local std::string t_last_error;
thread_local int t_group_depth = 0;
thread_local std::vector<std::pair<weftComm*, weft::P2POp>> t_pending;

template <typename F>
weftResult_t guard(const char* fn, F&& f) noexcept {
  return weft::api_guard(fn, std::forward<F>(f));
}

weft::Communicator& impl(weftComm_t comm) {
  if (comm == nullptr) weft::fail(weft::ErrorCode::InvalidArgument, "the communicator is null");
  if (!live_comms().live(comm) || !comm->impl)
    weft::fail(weft::ErrorCode::InvalidArgument, "the communicator was destroyed or aborted, or is not one");
  return *comm->impl;
}

/// Takes `comm` out of the live set (an error if it is not live) and returns what it owns;
/// the weftComm object itself stays allocated, marked dead.
std::unique_ptr<weft::Communicator> retire(weftComm_t comm) {
  if (!live_comms().retire(comm))
    weft::fail(weft::ErrorCode::InvalidArgument, "the communicator was destroyed or aborted, or is not one");
  return std::move(comm->impl);
}

template <typename T>
void need(T* p, const char* name) {
  if (p == nullptr) weft::fail(weft::ErrorCode::InvalidArgument, std::string(name) + " is null");
}

void flush_group() {
  auto pending = std::move(t_pending);
  t_pending.clear();
  // Per communicator, in call order.
  std::vector<weftComm*> order;
  std::map<weftComm*, std::vector<weft::P2POp>> by_comm;
  for (auto& [c, op] : pending) {
    if (!by_comm.count(c)) order.push_back(c);
    by_comm[c].push_back(op);
  }
  std::string first_error;
  weft::ErrorCode code = weft::ErrorCode::Success;
  for (weftComm* c : order) {
    try {
      impl(c).p2p(by_comm[c]);
    } catch (const weft::Error& e) {
      if (code == weft::ErrorCode::Success) {
        code = e.code();
        first_error = e.what();
      }
    }
  }
  if (code != weft::ErrorCode::Success) weft::fail(code, first_error);
}

void enqueue_p2p(weftComm_t comm, bool send, void* buf, size_t count, weftDataType_t type, int peer, cudaStream_t s) {
  impl(comm);
  size_t esz = weft::dtype_bytes(type);
  if (esz == 0) weft::fail(weft::ErrorCode::InvalidArgument, "unknown data type " + std::to_string(type));
  weft::P2POp op;
  op.send = send;
  op.peer = peer;
  op.buf = buf;
  op.bytes = weft::checked_mul(count, esz, send ? "weftSend: the count times the element size"
                                                : "weftRecv: the count times the element size");
  if (count > 0 && buf != nullptr) weft::check_span(buf, op.bytes, send ? "weftSend" : "weftRecv");
  op.stream = s;
  t_pending.emplace_back(comm, op);
  if (t_group_depth == 0) flush_group();
}

weftComm_t make_comm(const weft::UniqueId& id, int nranks, int rank, int device) {
  auto c = std::make_unique<weftComm>();
  c->impl = weft::Communicator::create(id, nranks, rank, device);
  live_comms().add(c.get());
  return c.release();
}

}  // namespace

namespace weft {
Communicator& communicator_of(weftComm_t comm) { return impl(comm); }
void set_last_error(std::string message) { t_last_error = std::move(message); }
}  // namespace weft

extern "C" {

weftResult_t weftGetVersion(int* version) {
  return guard("weftGetVersion", [&] {
    need(version, "version");
    *version = WEFT_VERSION_CODE;
  });
}

weftResult_t weftGetUniqueId(weftUniqueId* uniqueId) {
  return guard("weftGetUniqueId", [&] {
    need(uniqueId, "uniqueId");
    weft::UniqueId id = weft::start_bootstrap_root();
    id.serialize(uniqueId->internal);
  });
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId commId, int rank) {
  return guard("weftCommInitRank", [&] {
    need(comm, "comm");
    *comm = nullptr;
    int device = 0;
    WEFT_CUDA_CHECK(cudaGetDevice(&device));
    const weft::UniqueId id = weft::UniqueId::deserialize(commId.internal);
    weft::secure::wipe(commId.internal, sizeof(commId.internal));  // this call's copy; `id` wipes its own
    *comm = make_comm(id, nranks, rank, device);
  });
}

weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist) {
  return guard("weftCommInitAll", [&] {
    need(comms, "comms");
    if (ndev < 1) weft::fail(weft::ErrorCode::InvalidArgument, "ndev " + std::to_string(ndev) + " is not positive");
    weft::UniqueId id = weft::start_bootstrap_root(weft::net::resolve("127.0.0.1", 0));
    std::vector<weftComm_t> made(static_cast<size_t>(ndev), nullptr);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<weft::ErrorCode> codes(static_cast<size_t>(ndev), weft::ErrorCode::Success);
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i)
      threads.emplace_back([&, i] {
        try {
          made[static_cast<size_t>(i)] = make_comm(id, ndev, i, devlist ? devlist[i] : i);
        } catch (const weft::Error& e) {
          codes[static_cast<size_t>(i)] = e.code();
          errors[static_cast<size_t>(i)] = e.what();
        } catch (const std::exception& e) {
          codes[static_cast<size_t>(i)] = weft::ErrorCode::Internal;
          errors[static_cast<size_t>(i)] = e.what();
        }
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i)
      if (codes[static_cast<size_t>(i)] != weft::ErrorCode::Success) {
        for (weftComm_t c : made)
          if (c) retire(c)->abort();
        weft::fail(codes[static_cast<size_t>(i)], errors[static_cast<size_t>(i)]);
      }
    for (int i = 0; i < ndev; ++i) comms[i] = made[static_cast<size_t>(i)];
  });
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm) {
  return guard("weftCommInitFromEnv", [&] {
    need(comm, "comm");
    *comm = nullptr;
    weft::EnvLaunch e = weft::launch_from_env();
    WEFT_CUDA_CHECK(cudaSetDevice(e.device));
    *comm = make_comm(e.id, e.nranks, e.rank, e.device);
  });
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  return guard("weftCommDestroy", [&] {
    if (comm == nullptr) return;
    retire(comm)->destroy();
  });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  return guard("weftCommAbort", [&] {
    if (comm == nullptr) return;
    retire(comm)->abort();
  });
}

weftResult_t weftCommCount(const weftComm_t comm, int* count) {
  return guard("weftCommCount", [&] {
    need(count, "count");
    *count = impl(comm).nranks();
  });
}

weftResult_t weftCommCuDevice(const weftComm_t comm, int* device) {
  return guard("weftCommCuDevice", [&] {
    need(device, "device");
    *device = impl(comm).device();
  });
}

weftResult_t weftCommUserRank(const weftComm_t comm, int* rank) {
  return guard("weftCommUserRank", [&] {
    need(rank, "rank");
    *rank = impl(comm).rank();
  });
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* asyncError) {
  return guard("weftCommGetAsyncError", [&] {
    need(asyncError, "asyncError");
    std::string message;
    weft::ErrorCode c = impl(comm).async_error(&message);
    *asyncError = static_cast<weftResult_t>(c);
    if (c != weft::ErrorCode::Success) t_last_error = message;
  });
}

const char* weftGetErrorString(weftResult_t result) {
  switch (result) {
    case weftSuccess: return "no error";
    case weftUnhandledCudaError: return "unhandled cuda error";
    case weftSystemError: return "unhandled system error";
    case weftInternalError: return "internal error - please report this issue";
    case weftInvalidArgument: return "invalid argument";
    case weftInvalidUsage: return "invalid usage";
    case weftRemoteError: return "remote process exited or there was a network error";
    case weftInProgress: return "operation in progress";
    case weftTimeout: return "timeout: a peer did not answer within WEFT_TIMEOUT";
    case weftParseError: return "malformed input file";
    case weftVerifyError: return "algorithm or plan failed verification";
    default: return "unknown result code";
  }
}

const char* weftGetLastError(weftComm_t) { return t_last_error.c_str(); }

weftResult_t weftAllReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                           weftRedOp_t op, weftComm_t comm, weftStream_t stream) {
  return guard("weftAllReduce", [&] {
    impl(comm).collective(weft::Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, stream);
  });
}

weftResult_t weftAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, weftDataType_t datatype,
                           weftComm_t comm, weftStream_t stream) {
  return guard("weftAllGather", [&] {
    impl(comm).collective(weft::Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, weftSum, 0, stream);
  });
}

weftResult_t weftReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, weftDataType_t datatype,
                               weftRedOp_t op, weftComm_t comm, weftStream_t stream) {
  return guard("weftReduceScatter", [&] {
    impl(comm).collective(weft::Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, stream);
  });
}

weftResult_t weftBroadcast(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, int root,
                           weftComm_t comm, weftStream_t stream) {
  return guard("weftBroadcast", [&] {
    impl(comm).collective(weft::Collective::Broadcast, sendbuff, recvbuff, count, datatype, weftSum, root, stream);
  });
}

weftResult_t weftReduce(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype, weftRedOp_t op,
                        int root, weftComm_t comm, weftStream_t stream) {
  return guard("weftReduce", [&] {
    impl(comm).collective(weft::Collective::Reduce, sendbuff, recvbuff, count, datatype, op, root, stream);
  });
}

weftResult_t weftAllToAll(const void* sendbuff, void* recvbuff, size_t count, weftDataType_t datatype,
                          weftComm_t comm, weftStream_t stream) {
  return guard("weftAllToAll", [&] {
    impl(comm).collective(weft::Collective::AllToAll, sendbuff, recvbuff, count, datatype, weftSum, 0, stream);
  });
}

weftResult_t weftSend(const void* sendbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftStream_t stream) {
  return guard("weftSend", [&] { enqueue_p2p(comm, true, const_cast<void*>(sendbuff), count, datatype, peer, stream); });
}

weftResult_t weftRecv(void* recvbuff, size_t count, weftDataType_t datatype, int peer, weftComm_t comm,
                      weftStream_t stream) {
  return guard("weftRecv", [&] { enqueue_p2p(comm, false, recvbuff, count, datatype, peer, stream); });
}

weftResult_t weftGroupStart(void) {
  return guard("weftGroupStart", [&] { ++t_group_depth; });
}

weftResult_t weftGroupEnd(void) {
  return guard("weftGroupEnd", [&] {
    if (t_group_depth == 0) weft::fail(weft::ErrorCode::InvalidUsage, "weftGroupEnd without weftGroupStart");
    if (--t_group_depth == 0) flush_group();
  });
}

weftResult_t weftCommRegister(const weftComm_t comm, void* buff, size_t size, void** handle) {
  return guard("weftCommRegister", [&] {
    need(handle, "handle");
    *handle = impl(comm).register_buffer(buff, size);
  });
}

weftResult_t weftCommDeregister(const weftComm_t comm, void* handle) {
  return guard("weftCommDeregister", [&] { impl(comm).deregister_buffer(handle); });
}

weftResult_t weftCommConnectMemoryChannels(weftComm_t comm, const int* peers, int npeers, void* buff, size_t size,
                                           size_t packetBytes, weftMemoryChannel_t* channels) {
  return guard("weftCommConnectMemoryChannels", [&] {
    if (npeers < 0) weft::fail(weft::ErrorCode::InvalidArgument, "npeers is negative");
    if (npeers > 0) {
      need(peers, "peers");
      need(channels, "channels");
      std::fill(channels, channels + npeers, nullptr);
    }
    std::vector<int> list(peers, peers + npeers);
    std::vector<weft::exec::ChannelEnd> made = impl(comm).connect_memory_channels(list, buff, size, packetBytes);
    for (size_t i = 0; i < made.size(); ++i) channels[i] = new weftMemoryChannel{std::move(made[i])};
  });
}

weftResult_t weftMemoryChannelGetDeviceHandle(weftMemoryChannel_t channel, void* handle, size_t size) {
  return guard("weftMemoryChannelGetDeviceHandle", [&] {
    need(channel, "channel");
    need(handle, "handle");
    constexpr size_t want = sizeof(weft::device::MemoryChannelDeviceHandle);
    if (size != want)
      weft::fail(weft::ErrorCode::InvalidArgument, "size " + std::to_string(size) + " is not " + std::to_string(want) +
                                                       ", the size of this library's MemoryChannelDeviceHandle");
    std::memcpy(handle, &channel->channel.device_handle(), want);
  });
}

weftResult_t weftMemoryChannelDestroy(weftMemoryChannel_t channel) {
  return guard("weftMemoryChannelDestroy", [&] {
    need(channel, "channel");
    delete channel;
  });
}

weftResult_t weftMemAlloc(void** ptr, size_t size) {
  return guard("weftMemAlloc", [&] {
    need(ptr, "ptr");
    *ptr = nullptr;
    if (size == 0) return;
    WEFT_CUDA_CHECK(cudaMalloc(ptr, size));
  });
}

weftResult_t weftMemFree(void* ptr) {
  return guard("weftMemFree", [&] {
    if (ptr != nullptr) WEFT_CUDA_CHECK(cudaFree(ptr));
  });
}

}  // extern "C"
