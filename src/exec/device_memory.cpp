#include "exec/device_memory.hpp"

#include <cuda_runtime_api.h>

#include "util/driver_entry.hpp"
#include "util/error.hpp"

namespace weft::exec {

bool allocation_range(const void* ptr, uint64_t* base, uint64_t* bytes) {
  // The allocation's base and size come from the driver, reached through the runtime so
  // that libweft needs no link-time dependency on libcuda.
  using GetRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  static const GetRange get_range = driver_entry<GetRange>("cuMemGetAddressRange");
  if (get_range == nullptr) fail(ErrorCode::UnhandledCuda, "the driver offers no cuMemGetAddressRange");
  unsigned long long b = 0;
  size_t size = 0;
  if (get_range(&b, &size, reinterpret_cast<unsigned long long>(ptr)) != 0) return false;
  *base = b;
  *bytes = size;
  return true;
}

}  // namespace weft::exec
