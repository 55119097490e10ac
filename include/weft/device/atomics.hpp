// The inline PTX weft's device code uses, in one place: acquire loads and release stores
// at GPU and system scope, volatile 16-byte accesses for LL packets, the global timer.
// Every function here is called by a single thread unless its comment says otherwise.
#pragma once

#include <cstdint>

#include "weft/device/macros.hpp"

#if WEFT_DEVICE_CODE
namespace weft::device {

/// Load with acquire semantics at system scope (a value another GPU or the host wrote).
WEFT_DEVICE_INLINE uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
/// Load with acquire semantics at GPU scope (a value another thread block of this GPU wrote).
WEFT_DEVICE_INLINE uint64_t ld_acquire_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
/// Store with release semantics at system scope: every write this thread observed before
/// (its own, and those of its block ordered by a preceding __syncthreads) is visible to a
/// reader that acquires this value, on any GPU.
WEFT_DEVICE_INLINE void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
WEFT_DEVICE_INLINE void st_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
WEFT_DEVICE_INLINE uint32_t ld_volatile_u32(const volatile uint32_t* p) { return *p; }
/// Relaxed (not volatile, not ordered) 64-bit accesses at GPU and system scope: strong
/// accesses that a fence orders (the fence-then-relaxed-store pattern of release).
WEFT_DEVICE_INLINE uint64_t ld_relaxed_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
WEFT_DEVICE_INLINE void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/// Atomic add with release semantics at GPU scope (returns the old value): this thread's
/// earlier writes, remote ones included, come before the add for any block of this GPU that
/// sees it (and for whatever that block orders after it with a system fence).
WEFT_DEVICE_INLINE unsigned long long atomic_add_release_gpu(void* p, uint64_t v) {
  unsigned long long old;
  asm volatile("atom.add.release.gpu.global.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
/// Atomic max with release semantics at GPU scope (returns the old value): this thread's
/// earlier writes come before the new value for any block of this GPU that acquires it.
WEFT_DEVICE_INLINE unsigned long long atomic_max_release_gpu(void* p, uint64_t v) {
  unsigned long long old;
  asm volatile("atom.release.gpu.global.max.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
/// An acquire-release fence at system scope: every write this thread observed before it
/// (its block's, through a preceding __syncthreads) is visible to any GPU and the host before
/// any of its later writes. Lighter than __threadfence_system(), which is fence.sc.sys.
WEFT_DEVICE_INLINE void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
/// The same at GPU scope (other blocks of this GPU).
WEFT_DEVICE_INLINE void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

/// 16-byte volatile store and load (LL packets: data and flag land together).
WEFT_DEVICE_INLINE void st_volatile_v4(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d)
               : "memory");
}
WEFT_DEVICE_INLINE void ld_volatile_v4(const void* p, uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(p)
               : "memory");
}
/// 16-byte load that bypasses L1 (data another GPU wrote into this GPU's memory).
WEFT_DEVICE_INLINE uint4 ld_cg_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
  return v;
}

/// Nanoseconds of the GPU's global timer (coarse, about a microsecond, but monotonic).
WEFT_DEVICE_INLINE uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace weft::device
#endif
