// The one guard every extern "C" function of the NCCL-compatible library runs in: it turns
// weft::Error (and any other exception) into an ncclResult_t, records the message for
// ncclGetLastError, and logs it, so that no exception crosses the C boundary.
#pragma once

#include <new>
#include <string>

#include "nccl/route.hpp"
#include "util/error.hpp"
#include "util/log.hpp"
#include "weft/nccl.h"

namespace weft::nccl {

/// This thread's last error message ("" if none).
std::string& last_error();

template <typename F>
ncclResult_t guard(const char* fn, F&& f) noexcept {
  try {
    f();
    return ncclSuccess;
  } catch (const Error& e) {
    last_error() = std::string(fn) + ": " + e.what();
    WEFT_LOG(Warn, "NCCL", last_error());
    return static_cast<ncclResult_t>(to_nccl_result(e.code()));
  } catch (const std::bad_alloc&) {
    last_error() = std::string(fn) + ": out of host memory";
    return ncclSystemError;
  } catch (const std::exception& e) {
    last_error() = std::string(fn) + ": internal error: " + e.what();
    WEFT_LOG(Warn, "NCCL", last_error());
    return ncclInternalError;
  } catch (...) {
    last_error() = std::string(fn) + ": internal error (unknown exception)";
    return ncclInternalError;
  }
}

/// Throws InvalidArgument naming `name` when `p` is null.
inline void need(const void* p, const char* name) {
  if (p == nullptr) fail(ErrorCode::InvalidArgument, std::string(name) + " is NULL");
}

/// Throws InvalidUsage: `what` is not something weft does, and why.
[[noreturn]] inline void unsupported(const std::string& what) { fail(ErrorCode::InvalidUsage, what); }

}  // namespace weft::nccl

/// Declares pncclX as an alias of ncclX (the profiling entry points, as MPI's PMPI).
#define WEFT_NCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"))) decltype(name) p##name __attribute__((alias(#name)));
