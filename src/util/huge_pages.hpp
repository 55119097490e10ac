// Transparent huge pages for the heap of a command-line process.
//
// A compiled plan at 1,024 GPUs holds 12.8 million slots (1.1 GiB) in tens of thousands of
// vectors, all from malloc's heap; with 4 KiB pages, TLB misses and page faults were half
// the compiler's time there. glibc (2.35 and later) backs its heap with transparent huge
// pages when the tunable glibc.malloc.hugetlb=1 is set, which can only be read from the
// environment at process start: so a program re-executes itself once with it set.
#pragma once

namespace weft {

/// Re-executes the running program (/proc/self/exe, same arguments) with
/// GLIBC_TUNABLES=...:glibc.malloc.hugetlb=1 when the kernel offers transparent huge pages
/// on request ("madvise" mode) and the environment does not already name that tunable (so
/// glibc.malloc.hugetlb=0 opts out). Returns normally whenever it does not re-execute,
/// including when exec fails. Also raises malloc's mmap threshold to 32 MiB and its trim
/// threshold to 1 GiB (freed memory is reused, not returned: fewer pages to fault in and
/// clear). Call first thing in main(), before any thread starts.
void reexec_with_huge_pages(char** argv);

}  // namespace weft
