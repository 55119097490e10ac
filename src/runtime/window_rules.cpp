#include "runtime/window_rules.hpp"

namespace weft {

std::string refusal_text(WindowRefusal r) {
  switch (r) {
    case WindowRefusal::None: return "none";
    case WindowRefusal::NullOrEmpty: return "buff is NULL or size is 0";
    case WindowRefusal::BadFlags: return "winFlags is neither NCCL_WIN_DEFAULT (0) nor NCCL_WIN_COLL_SYMMETRIC (1)";
    case WindowRefusal::NotDevice:
      return "the buffer is not device memory of its process (windows take cudaMalloc, ncclMemAlloc or weftMemAlloc "
             "memory)";
    case WindowRefusal::PastAllocation: return "[buff, buff + size) runs past the allocation holding buff";
  }
  return "unknown refusal " + std::to_string(static_cast<uint32_t>(r));
}

WindowVerdict judge_window(const std::vector<WindowClaim>& claims, bool can_map) {
  WindowVerdict v;
  const int R = static_cast<int>(claims.size());
  for (int q = 0; q < R; ++q)
    if (claims[static_cast<size_t>(q)].refusal != WindowRefusal::None) {
      v.code = ErrorCode::InvalidArgument;
      v.message = "rank " + std::to_string(q) + " refused its arguments: " +
                  refusal_text(claims[static_cast<size_t>(q)].refusal) + "; no rank registered the window";
      return v;
    }
  const WindowClaim& first = claims.front();
  for (int q = 1; q < R; ++q) {
    const WindowClaim& c = claims[static_cast<size_t>(q)];
    std::string what;
    if (c.seq != first.seq)
      what = "rank 0 had registered " + std::to_string(first.seq) + " windows before this one, rank " +
             std::to_string(q) + " " + std::to_string(c.seq) + " (every rank registers its windows in the same order)";
    else if (c.flags != first.flags)
      what = "rank 0 passed winFlags " + std::to_string(first.flags) + ", rank " + std::to_string(q) + " " +
             std::to_string(c.flags) + " (every rank passes the same flags)";
    else if ((first.flags & kWinSymmetric) && c.bytes != first.bytes)
      what = "NCCL_WIN_COLL_SYMMETRIC windows have one size on every rank: rank 0 passed " +
             std::to_string(first.bytes) + " bytes, rank " + std::to_string(q) + " " + std::to_string(c.bytes);
    if (!what.empty()) {
      v.code = ErrorCode::InvalidUsage;
      v.message = "the ranks disagree: " + what + "; no rank registered the window";
      return v;
    }
  }
  v.map = can_map && R > 1;
  for (const WindowClaim& c : claims) v.map = v.map && c.shareable;
  return v;
}

}  // namespace weft
