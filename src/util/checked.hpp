// Overflow-checked size arithmetic for values that come from callers (counts, element
// sizes, rank counts, offsets into buffers): an overflow is an InvalidArgument error naming
// the operands, never a wrapped value and so a silently shorter transfer.
#pragma once

#include <cstdint>
#include <string>

#include "util/error.hpp"

namespace weft {

/// a x b; throws InvalidArgument ("`what`: a x b overflows 64 bits") when it does not fit.
inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    fail(ErrorCode::InvalidArgument, std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                                         " overflows 64 bits");
  return r;
}

/// Throws InvalidArgument when [p, p + bytes) runs past the end of the address space.
inline void check_span(const void* p, uint64_t bytes, const char* what) {
  const uint64_t base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  uint64_t end = 0;
  if (__builtin_add_overflow(base, bytes, &end))
    fail(ErrorCode::InvalidArgument, std::string(what) + ": a buffer of " + std::to_string(bytes) +
                                         " bytes at " + std::to_string(base) + " runs past the end of memory");
}

}  // namespace weft
