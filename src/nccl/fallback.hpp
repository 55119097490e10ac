// The real NCCL behind weft: WEFT_NCCL_FALLBACK=/path/to/libnccl.so.2 names a library to
// which weft forwards what it does not run itself (reductions of fp8 types today). It is
// opened on first need with RTLD_LOCAL | RTLD_DEEPBIND, so that its own calls between
// its nccl* functions stay inside it instead of landing back in weft (both export the
// same names). Each kind of forwarded call is logged once per process.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "weft/nccl.h"

namespace weft::nccl {

/// The entry points of the real library, by NCCL's signatures with opaque communicators.
struct RealNccl {
  using Comm = void*;
  int version = 0;
  std::string path;
  int (*GetUniqueId)(void* id) = nullptr;
  int (*CommInitRank)(Comm* comm, int nranks, ncclUniqueId id, int rank) = nullptr;
  /// Optional (NCCL 2.14+): lets weft bound the real initialization by WEFT_TIMEOUT.
  int (*CommInitRankConfig)(Comm* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) = nullptr;
  int (*CommDestroy)(Comm) = nullptr;
  int (*CommAbort)(Comm) = nullptr;
  int (*CommGetAsyncError)(Comm, int*) = nullptr;
  const char* (*GetLastError)(Comm) = nullptr;
  int (*AllReduce)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  int (*Reduce)(const void*, void*, size_t, int, int, int, Comm, cudaStream_t) = nullptr;
  int (*ReduceScatter)(const void*, void*, size_t, int, int, Comm, cudaStream_t) = nullptr;
  int (*GroupStart)() = nullptr;
  int (*GroupEnd)() = nullptr;
  int (*RedOpCreatePreMulSum)(int* op, void* scalar, int type, int residence, Comm) = nullptr;
  int (*RedOpDestroy)(int op, Comm) = nullptr;
};

/// Opens the NCCL library at `path` and binds its entry points; nullptr with the reason in
/// *why when it cannot be opened, lacks a call, or is this library itself.
std::unique_ptr<RealNccl> open_real_nccl(const std::string& path, std::string* why);

/// The library named by WEFT_NCCL_FALLBACK, opened on first call; nullptr when WEFT_NCCL_FALLBACK is empty or the
/// library cannot be used, with the reason in *why (logged once).
const RealNccl* real_nccl(std::string* why);

/// Logs, once per process and kind ("AllReduce of float8e4m3 (sum)"), that weft forwards
/// that kind of call to the real NCCL.
void note_forwarded(const std::string& kind);

/// Throws weft::Error with the real library's result code (when it is not ncclSuccess)
/// and its last error message, naming the call.
void check_real(const RealNccl& real, int result, const char* call, void* comm);

/// As check_real, for a call on the fallback's communicators, which weft makes non-blocking
/// (so that a rank that never comes is an error, not a hang): ncclInProgress from `call` is
/// waited out by polling each of `comms` with ncclCommGetAsyncError until none is in
/// progress, at most WEFT_TIMEOUT; an error or the deadline fails with the call's name.
void finish_real(const RealNccl& real, int result, const char* call, void* const* comms, size_t ncomms);

}  // namespace weft::nccl
