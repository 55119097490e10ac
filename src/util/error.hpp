// weft::Error: the one error type of weft's host code.
//
// Every failure inside weft's C++ code is a weft::Error carrying an ErrorCode and a
// message that says what failed and where (file:line:column for front-end errors,
// rank / thread block / slot for runtime errors). The C API and the NCCL-compatible
// API turn it into a result code at their boundary (guard() in runtime/c_api.cpp and nccl/guard.hpp).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace weft {

/// Error categories; the numeric values are those of weftResult_t in include/weft/weft.h.
enum class ErrorCode : int {
  Success = 0,
  UnhandledCuda = 1,   ///< a CUDA call failed
  System = 2,          ///< an OS call failed (socket, file, thread)
  Internal = 3,        ///< a bug in weft
  InvalidArgument = 4, ///< a caller passed a bad value
  InvalidUsage = 5,    ///< a call that is not allowed in this state or unsupported
  Remote = 6,          ///< a peer failed, vanished or disagrees (version, size)
  InProgress = 7,      ///< an asynchronous operation has not finished
  Timeout = 8,         ///< a bounded wait ran out (host or device)
  Parse = 9,           ///< an input file (ResCCLang, XML, JSON, topology) is malformed
  Verify = 10,         ///< an algorithm or plan fails verification
};

std::string_view error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message)
      : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

/// Throws weft::Error(code, message). Kept out of line so call sites stay small.
[[noreturn]] void fail(ErrorCode code, std::string message);

}  // namespace weft

/// Checks a condition that only a bug in weft can break.
#define WEFT_ASSERT(cond, msg)                                                               \
  do {                                                                                       \
    if (!(cond))                                                                             \
      ::weft::fail(::weft::ErrorCode::Internal,                                              \
                   std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + (msg));   \
  } while (0)
