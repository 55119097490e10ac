// NCCL's communicator, error and memory calls (see include/weft/nccl.h), each inside guard().
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "nccl/comm.hpp"
#include "nccl/fallback.hpp"
#include "nccl/group.hpp"
#include "nccl/guard.hpp"
#include "util/cuda_check.hpp"

using namespace weft::nccl;
using weft::ErrorCode;

namespace weft::nccl {
std::string& last_error() {
  thread_local std::string message;
  return message;
}
}  // namespace weft::nccl

namespace {

/// What ncclGetVersion reports: the NCCL release whose host ABI weft implements.
constexpr int kVersionCode = 22800;  // NCCL_VERSION(2, 28, 0)

void init_rank(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config,
               const char* where) {
  need(comm, "comm");
  *comm = nullptr;
  if (nranks < 1) fail(ErrorCode::InvalidArgument, "nranks " + std::to_string(nranks) + " is not positive");
  if (rank < 0 || rank >= nranks)
    fail(ErrorCode::InvalidArgument, "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  CommOptions options = parse_config(config, where);
  int device = 0;
  WEFT_CUDA_CHECK(cudaGetDevice(&device));
  auto* c = new ncclComm;
  c->options = options;
  if (in_group()) {
    defer_init(c, nranks, id, rank, device);
    *comm = c;
    return;
  }
  try {
    init_comm(c, nranks, id, rank, device);
  } catch (...) {
    try {
      release(c, true);
    } catch (...) {
    }
    throw;
  }
  *comm = c;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
  return guard("ncclGetVersion", [&] {
    need(version, "version");
    *version = kVersionCode;
  });
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  return guard("ncclGetUniqueId", [&] {
    need(uniqueId, "uniqueId");
    weftUniqueId id;
    check_weft(weftGetUniqueId(&id));
    std::memcpy(uniqueId->internal, id.internal, sizeof(uniqueId->internal));
  });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guard("ncclCommInitRank", [&] { init_rank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank"); });
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  return guard("ncclCommInitRankConfig",
               [&] { init_rank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig"); });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                                      ncclConfig_t* config) {
  return guard("ncclCommInitRankScalable", [&] {
    need(commIds, "commIds");
    if (nId < 1) fail(ErrorCode::InvalidArgument, "nId " + std::to_string(nId) + " is not positive");
    // weft's bootstrap root takes every rank; the roots of the other ids are not contacted
    // and give up after WEFT_BOOTSTRAP_TIMEOUT.
    init_rank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
  });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guard("ncclCommInitAll", [&] {
    need(comms, "comm");
    if (ndev < 1) fail(ErrorCode::InvalidArgument, "ndev " + std::to_string(ndev) + " is not positive");
    int saved = 0;
    WEFT_CUDA_CHECK(cudaGetDevice(&saved));
    weftUniqueId wid;
    check_weft(weftGetUniqueId(&wid));
    ncclUniqueId id;
    std::memcpy(id.internal, wid.internal, sizeof(id.internal));
    std::vector<ncclComm*> made(static_cast<size_t>(ndev));
    group_start();
    for (int i = 0; i < ndev; ++i) {
      made[static_cast<size_t>(i)] = new ncclComm;
      defer_init(made[static_cast<size_t>(i)], ndev, id, i, devlist ? devlist[i] : i);
    }
    try {
      group_end();
    } catch (...) {
      for (ncclComm* c : made) try {
          release(c, true);
        } catch (...) {
        }
      cudaSetDevice(saved);
      throw;
    }
    cudaSetDevice(saved);
    for (int i = 0; i < ndev; ++i) comms[i] = made[static_cast<size_t>(i)];
  });
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return guard("ncclCommSplit", [&] {
    need(newcomm, "newcomm");
    *newcomm = nullptr;
    ncclComm& parent = usable(comm, "ncclCommSplit");
    CommOptions options = config ? parse_config(config, "ncclCommSplit") : parent.options;
    std::lock_guard<std::recursive_mutex> lock(parent.mu);
    split(parent, color, key, newcomm, options);
  });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int*, int, ncclComm_t* newcomm, ncclConfig_t*, int) {
  return guard("ncclCommShrink", [&] {
    if (newcomm) *newcomm = nullptr;
    usable(comm, "ncclCommShrink");
    unsupported("weft does not shrink communicators; use ncclCommSplit with NCCL_SPLIT_NOCOLOR on the excluded ranks");
  });
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guard("ncclCommFinalize", [&] {
    ncclComm& c = known(comm, "ncclCommFinalize");
    std::lock_guard<std::recursive_mutex> lock(c.mu);
    finalize(c);
  });
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guard("ncclCommDestroy", [&] {
    if (comm == nullptr) return;
    ncclComm& c = handle(comm, "ncclCommDestroy");
    release(&c, c.state == ncclComm::State::Failed || c.state == ncclComm::State::Pending ||
                    c.state == ncclComm::State::Revoked);
  });
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guard("ncclCommAbort", [&] {
    if (comm == nullptr) return;
    release(&handle(comm, "ncclCommAbort"), true);
  });
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return guard("ncclCommRevoke", [&] {
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      fail(ErrorCode::InvalidArgument, "revokeFlags " + std::to_string(revokeFlags) + " is not NCCL_REVOKE_DEFAULT");
    ncclComm& c = known(comm, "ncclCommRevoke");
    // New work is refused from now on; work in flight ends by itself or within WEFT_TIMEOUT.
    c.state = ncclComm::State::Revoked;
  });
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guard("ncclCommGetAsyncError", [&] {
    need(asyncError, "asyncError");
    ncclComm& c = handle(comm, "ncclCommGetAsyncError");
    switch (c.state) {
      case ncclComm::State::Pending: *asyncError = ncclInProgress; return;
      case ncclComm::State::Failed:
        *asyncError = static_cast<ncclResult_t>(to_nccl_result(c.failure_code));
        last_error() = "ncclCommGetAsyncError: " + c.failure;
        return;
      default: break;
    }
    weftResult_t w = weftSuccess;
    check_weft(weftCommGetAsyncError(c.weft, &w));
    *asyncError = static_cast<ncclResult_t>(to_nccl_result(static_cast<ErrorCode>(w)));
    if (w != weftSuccess) {
      last_error() = std::string("ncclCommGetAsyncError: ") + weftGetLastError(nullptr);
      return;
    }
    if (c.real != nullptr)
      if (const RealNccl* real = real_nccl(nullptr)) {
        int r = 0;
        if (real->CommGetAsyncError(c.real, &r) == 0 && r != 0) {
          *asyncError = static_cast<ncclResult_t>(r);
          last_error() = std::string("ncclCommGetAsyncError: fallback NCCL: ") + real->GetLastError(c.real);
        }
      }
  });
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return guard("ncclCommCount", [&] {
    need(count, "count");
    *count = known(comm, "ncclCommCount").nranks;
  });
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return guard("ncclCommCuDevice", [&] {
    need(device, "device");
    *device = known(comm, "ncclCommCuDevice").device;
  });
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return guard("ncclCommUserRank", [&] {
    need(rank, "rank");
    *rank = known(comm, "ncclCommUserRank").rank;
  });
}

const char* ncclGetErrorString(ncclResult_t result) { return result_string(result); }

const char* ncclGetLastError(ncclComm_t) { return last_error().c_str(); }

void ncclResetDebugInit() {}
void ncclResetDebugInitInternal() {}

ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guard("ncclMemAlloc", [&] {
    need(ptr, "ptr");
    check_weft(weftMemAlloc(ptr, size));
  });
}

ncclResult_t ncclMemFree(void* ptr) {
  return guard("ncclMemFree", [&] { check_weft(weftMemFree(ptr)); });
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guard("ncclCommRegister", [&] {
    need(handle, "handle");
    ncclComm& c = usable(comm, "ncclCommRegister");
    check_weft(weftCommRegister(c.weft, buff, size, handle));
  });
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guard("ncclCommDeregister", [&] {
    ncclComm& c = known(comm, "ncclCommDeregister");
    check_weft(weftCommDeregister(c.weft, handle));
  });
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void*, size_t, ncclWindow_t* win, int) {
  return guard("ncclCommWindowRegister", [&] {
    if (win) *win = nullptr;
    usable(comm, "ncclCommWindowRegister");
    unsupported("weft has no symmetric memory windows; register buffers with ncclCommRegister instead");
  });
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t) {
  return guard("ncclCommWindowDeregister", [&] {
    known(comm, "ncclCommWindowDeregister");
    unsupported("weft has no symmetric memory windows (nothing was registered by ncclCommWindowRegister)");
  });
}

}  // extern "C"

WEFT_NCCL_ALIAS(ncclGetVersion)
WEFT_NCCL_ALIAS(ncclGetUniqueId)
WEFT_NCCL_ALIAS(ncclCommInitRank)
WEFT_NCCL_ALIAS(ncclCommInitRankConfig)
WEFT_NCCL_ALIAS(ncclCommInitRankScalable)
WEFT_NCCL_ALIAS(ncclCommInitAll)
WEFT_NCCL_ALIAS(ncclCommSplit)
WEFT_NCCL_ALIAS(ncclCommShrink)
WEFT_NCCL_ALIAS(ncclCommFinalize)
WEFT_NCCL_ALIAS(ncclCommDestroy)
WEFT_NCCL_ALIAS(ncclCommAbort)
WEFT_NCCL_ALIAS(ncclCommRevoke)
WEFT_NCCL_ALIAS(ncclCommGetAsyncError)
WEFT_NCCL_ALIAS(ncclCommCount)
WEFT_NCCL_ALIAS(ncclCommCuDevice)
WEFT_NCCL_ALIAS(ncclCommUserRank)
WEFT_NCCL_ALIAS(ncclGetErrorString)
WEFT_NCCL_ALIAS(ncclGetLastError)
WEFT_NCCL_ALIAS(ncclResetDebugInit)
WEFT_NCCL_ALIAS(ncclMemAlloc)
WEFT_NCCL_ALIAS(ncclMemFree)
WEFT_NCCL_ALIAS(ncclCommRegister)
WEFT_NCCL_ALIAS(ncclCommDeregister)
WEFT_NCCL_ALIAS(ncclCommWindowRegister)
WEFT_NCCL_ALIAS(ncclCommWindowDeregister)
