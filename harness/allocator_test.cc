#include "harness/allocator.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>

namespace tmx {
namespace {

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)  // ASan has its own allocator
// glibc marks a block it mapped on its own with bit 1 (IS_MMAPPED) of the size word just before it.
bool Mapped(void* p) { return (reinterpret_cast<size_t*>(p)[-1] & 2) != 0; }

TEST(AllocatorTest, MidSizedBlocksComeFromTheHeapAfterConfiguring) {
  ::unsetenv("GLIBC_TUNABLES");
  void* before = std::malloc(size_t{4} << 20);
  EXPECT_TRUE(Mapped(before));  // glibc's default threshold starts at 128 KiB
  std::free(before);
  ASSERT_EQ(ConfigureAllocatorForTraining(), "");
  void* after = std::malloc(size_t{4} << 20);
  EXPECT_FALSE(Mapped(after));
  std::free(after);
  void* large = std::malloc(size_t{64} << 20);  // above the 32 MiB threshold: still mapped
  EXPECT_TRUE(Mapped(large));
  std::free(large);
}

TEST(AllocatorTest, TheUsersTunablesWin) {
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1);
  EXPECT_EQ(ConfigureAllocatorForTraining(), "GLIBC_TUNABLES sets glibc.malloc tunables; left as they are");
  ::unsetenv("GLIBC_TUNABLES");
}
#endif

}  // namespace
}  // namespace tmx
