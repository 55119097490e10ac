// The memory budget of the compiler and the simulator: each estimates what an input will
// take before allocating it, and refuses one that would exceed the budget with an error
// naming both figures, instead of running until the allocator fails ("std::bad_alloc" after
// many gigabytes). `weft compile`, `weft simulate` and `weft bench` take --memory-budget;
// WEFT_MEMORY_BUDGET sets the default (for the runtime's compilations too).
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>

#include "util/config.hpp"
#include "util/error.hpp"
#include "util/text.hpp"

namespace weft {

/// What the process has mapped (VmSize) and its data segment (data + stack), in bytes,
/// from /proc/self/statm; 0 where it cannot be read.
inline void memory_in_use(uint64_t& address_space, uint64_t& data) {
  address_space = data = 0;
  unsigned long size = 0, resident = 0, shared = 0, text = 0, lib = 0, data_pages = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return;
  const int got = std::fscanf(f, "%lu %lu %lu %lu %lu %lu", &size, &resident, &shared, &text, &lib, &data_pages);
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  if (got != 6 || page <= 0) return;
  address_space = static_cast<uint64_t>(size) * static_cast<uint64_t>(page);
  data = static_cast<uint64_t>(data_pages) * static_cast<uint64_t>(page);
}

/// WEFT_MEMORY_BUDGET when set (a byte size, e.g. 64G); else three quarters of this
/// machine's physical memory, lowered to what is left of the address-space or data limit
/// (ulimit -v / -d) when one is set: the limit less what the process holds already.
inline uint64_t default_memory_budget() {
  if (const std::string env = config::get_string("WEFT_MEMORY_BUDGET"); !env.empty()) {
    uint64_t bytes = 0;
    try {
      bytes = text::parse_bytes(env);
    } catch (const Error& e) {
      fail(ErrorCode::InvalidArgument, std::string("WEFT_MEMORY_BUDGET: ") + e.what());
    }
    if (bytes == 0) fail(ErrorCode::InvalidArgument, "WEFT_MEMORY_BUDGET: the budget must be at least 1 byte");
    return bytes;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t budget = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) / 4 * 3 * static_cast<uint64_t>(page)
                                          : uint64_t{16} << 30;
  uint64_t mapped = 0, data = 0;
  memory_in_use(mapped, data);
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit lim{};
    if (getrlimit(resource, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) continue;
    const uint64_t limit = static_cast<uint64_t>(lim.rlim_cur), used = resource == RLIMIT_AS ? mapped : data;
    budget = std::min<uint64_t>(budget, limit > used ? limit - used : 1);
  }
  return budget;
}

/// Throws InvalidArgument when `need` bytes exceed `budget` (0: default_memory_budget()):
/// "<what> needs about 34.2 GiB of memory, more than the budget of 16.0 GiB (raise it ...)".
inline void check_memory_budget(double need, uint64_t budget, const std::string& what) {
  if (budget == 0) budget = default_memory_budget();
  if (need <= static_cast<double>(budget)) return;
  auto size = [](double bytes) { return text::format_bytes(static_cast<uint64_t>(std::min(bytes, 1.8e19))); };
  fail(ErrorCode::InvalidArgument,
       text::format("%s needs about %s of memory, more than the budget of %s (raise it with --memory-budget BYTES, "
                    "e.g. --memory-budget 64G, or WEFT_MEMORY_BUDGET)",
                    what.c_str(), size(need).c_str(), size(static_cast<double>(budget)).c_str()));
}

}  // namespace weft
