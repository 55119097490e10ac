#include "util/error.hpp"

namespace weft {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Success: return "success";
    case ErrorCode::UnhandledCuda: return "cuda error";
    case ErrorCode::System: return "system error";
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::InvalidUsage: return "invalid usage";
    case ErrorCode::Remote: return "remote error";
    case ErrorCode::InProgress: return "in progress";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Parse: return "parse error";
    case ErrorCode::Verify: return "verification failed";
  }
  return "unknown error";
}

void fail(ErrorCode code, std::string message) { throw Error(code, std::move(message)); }

}  // namespace weft
