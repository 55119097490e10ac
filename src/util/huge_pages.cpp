#include "util/huge_pages.hpp"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__linux__) && defined(__GLIBC__)
#include <malloc.h>
#include <unistd.h>
#endif

namespace weft {

void reexec_with_huge_pages(char** argv) {
#if defined(__linux__) && defined(__GLIBC__)
  // Keep freed memory for the next phase rather than handing it back and having the kernel
  // clear fresh pages again (a third of the system time at 1,024 GPUs): blocks up to 32 MiB
  // come from the heap, which is trimmed only past 1 GiB free.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const char* current = std::getenv("GLIBC_TUNABLES");
  if (current != nullptr && std::strstr(current, "glibc.malloc.hugetlb") != nullptr) return;
  // Only in "madvise" mode: under "always" the heap gets huge pages anyway, under "never" not at all.
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(mode, line) || line.find("[madvise]") == std::string::npos) return;
  std::string value = current != nullptr && *current != '\0' ? std::string(current) + ":" : std::string();
  value += "glibc.malloc.hugetlb=1";
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc, say): carry on with ordinary pages, without the variable.
  if (current != nullptr) setenv("GLIBC_TUNABLES", current, 1);
  else unsetenv("GLIBC_TUNABLES");
#else
  (void)argv;
#endif
}

}  // namespace weft
