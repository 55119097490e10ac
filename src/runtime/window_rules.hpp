// The rules of memory-window registration (weftCommWindowRegister, NCCL's
// ncclCommWindowRegister), as a pure function of what every rank told the others, so that
// every rank reaches the same verdict and the unit tests check it without a GPU.
//
// Registration is collective: each rank sends a record (its arguments checked locally, its
// window count, whether its buffer can be shared through CUDA IPC), every rank judges the
// same records. One rank's bad arguments fail every rank, naming that rank; ranks that
// disagree (flags, window count, or, for symmetric windows, size) fail every rank too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace weft {

/// Window flags, NCCL's values (NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC).
inline constexpr int kWinDefault = 0x00, kWinSymmetric = 0x01;

/// Why a rank refused its own arguments (the record's status).
enum class WindowRefusal : uint32_t {
  None = 0,
  NullOrEmpty = 1,    ///< buff NULL or size 0
  BadFlags = 2,       ///< winFlags neither default nor symmetric
  NotDevice = 3,      ///< not device memory of its process
  PastAllocation = 4  ///< runs past its allocation
};

/// What judge_window reads of each rank's record.
struct WindowClaim {
  WindowRefusal refusal = WindowRefusal::None;
  int32_t flags = 0;
  uint64_t seq = 0;       ///< windows the rank registered on this communicator before this one
  uint64_t bytes = 0;
  bool shareable = false; ///< its buffer has a CUDA IPC handle (or the rank lives in this process)
};

struct WindowVerdict {
  ErrorCode code = ErrorCode::Success;
  std::string message;  ///< why registration fails, naming the rank(s)
  bool map = false;     ///< every rank's window can be mapped by every peer
};

/// The verdict on `claims` (by rank). `can_map`: the communicator can reach peers' memory
/// by copy engines at all (one host, 2 to ce::kMaxRanks ranks).
WindowVerdict judge_window(const std::vector<WindowClaim>& claims, bool can_map);

/// The sentence for a refusal ("buff is NULL or size is 0", ...).
std::string refusal_text(WindowRefusal r);

}  // namespace weft
