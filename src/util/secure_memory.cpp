#include "util/secure_memory.hpp"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace weft::secure {

namespace {

struct Pool {
  std::mutex mu;
  std::vector<uint8_t*> free;
  Stats stats;
};

/// Never destroyed: secrets in objects with static storage may be given back during exit.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}

/// Maps one more page and puts its slots on the free list (the caller holds the lock).
void grow(Pool& p) {
  const long page_size = sysconf(_SC_PAGESIZE);
  const size_t bytes = page_size > 0 ? static_cast<size_t>(page_size) : 4096;
  void* page = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED)
    fail(ErrorCode::System, std::string("cannot map a page for secret memory: ") + std::strerror(errno));
  if (::madvise(page, bytes, MADV_DONTDUMP) != 0) {
    const int err = errno;
    ::munmap(page, bytes);
    fail(ErrorCode::System,
         std::string("cannot exclude secret memory from core dumps (madvise MADV_DONTDUMP): ") + std::strerror(err));
  }
  // Best effort: beyond RLIMIT_MEMLOCK the page stays unlocked (still out of core dumps).
  if (::mlock(page, bytes) == 0) ++p.stats.locked_pages;
  ++p.stats.pages;
  auto* base = static_cast<uint8_t*>(page);
  for (size_t off = bytes; off >= kSlotBytes; off -= kSlotBytes) p.free.push_back(base + off - kSlotBytes);
}

}  // namespace

uint8_t* take_slot() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.free.empty()) grow(p);
  uint8_t* s = p.free.back();
  p.free.pop_back();
  ++p.stats.slots_in_use;
  return s;
}

void give_slot(uint8_t* slot) {
  if (slot == nullptr) return;
  wipe(slot, kSlotBytes);
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.free.push_back(slot);
  --p.stats.slots_in_use;
}

void wipe(void* ptr, size_t n) {
  if (ptr != nullptr && n > 0) explicit_bzero(ptr, n);
}

Stats stats() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.stats;
}

}  // namespace weft::secure
