#include "harness/file_util.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(FileUtilTest, ParentDir) {
  EXPECT_EQ(ParentDir("a/b/c.txt"), "a/b");
  EXPECT_EQ(ParentDir("c.txt"), ".");
  EXPECT_EQ(ParentDir("/c.txt"), "/");
  EXPECT_EQ(ParentDir(""), ".");
}

}  // namespace
}  // namespace tmx
