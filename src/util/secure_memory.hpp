// Memory for secrets (the bootstrap's key): page-aligned anonymous mmap pages marked
// MADV_DONTDUMP, so that a core dump leaves them out, locked in RAM with mlock where
// RLIMIT_MEMLOCK allows (so they are not written to swap; without the allowance they stay
// unlocked and still out of dumps), handed out in small slots that are wiped with
// explicit_bzero when given back. Pages are never unmapped: a process keeps a handful of
// secrets at a time, and a wiped page is as good as a freed one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft::secure {

/// Bytes of one slot.
inline constexpr size_t kSlotBytes = 64;

/// A zeroed slot of kSlotBytes in secret memory. Throws System when no page can be mapped
/// or excluded from core dumps.
uint8_t* take_slot();
/// Wipes `slot` and gives it back; nullptr is ignored.
void give_slot(uint8_t* slot);
/// Overwrites `n` bytes with zeros in a way the compiler cannot leave out (explicit_bzero).
void wipe(void* p, size_t n);

/// The pool's state, for tests and logs.
struct Stats {
  size_t pages = 0;         ///< pages mapped
  size_t locked_pages = 0;  ///< of them, locked by mlock
  size_t slots_in_use = 0;
};
Stats stats();

}  // namespace weft::secure
