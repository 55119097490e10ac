// Device memory of this process as the driver sees it: the allocation holding a pointer
// (the communicator's buffer checks and the copy-engine runner's mappings use it).
#pragma once

#include <cstdint>

namespace weft::exec {

/// The allocation holding ptr (its base and size); false where ptr is not device memory
/// of this process. Throws UnhandledCuda when the driver offers no cuMemGetAddressRange.
bool allocation_range(const void* ptr, uint64_t* base, uint64_t* bytes);

}  // namespace weft::exec
