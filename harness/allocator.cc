#include "harness/allocator.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tmx {

std::string ConfigureAllocatorForTraining(const AllocatorOptions& options) {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) {
    return "GLIBC_TUNABLES sets glibc.malloc tunables; left as they are";
  }
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(options.mmap_threshold_bytes)) != 1) {
    return "mallopt(M_MMAP_THRESHOLD, " + std::to_string(options.mmap_threshold_bytes) + ") was refused";
  }
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(options.trim_threshold_bytes)) != 1) {
    return "mallopt(M_TRIM_THRESHOLD, " + std::to_string(options.trim_threshold_bytes) + ") was refused";
  }
  return "";
#else
  (void)options;
  return "not glibc: the C library's allocator is left as it is";
#endif
}

}  // namespace tmx
