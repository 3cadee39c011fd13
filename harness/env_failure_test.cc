#include "harness/env_failure.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace tmx {
namespace {

TEST(EnvFailureTest, ClassifiesErrnoByStage) {
  struct Case {
    int err;
    bool harness, exec, child;
  } cases[] = {
      {ENOSPC, true, true, true},    {EDQUOT, true, true, true},   {EROFS, true, true, true},
      {EACCES, true, true, true},    {EMFILE, true, true, true},   {ENOMEM, true, false, false},
      {EAGAIN, true, false, false},  {ENOENT, false, true, false}, {ENOEXEC, false, true, false},
      {EINVAL, false, false, false}, {EINTR, false, false, false}, {0, false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(DescribeErrno(c.err));
    EXPECT_EQ(IsEnvironmentErrno(c.err, FailureStage::kHarness), c.harness);
    EXPECT_EQ(IsEnvironmentErrno(c.err, FailureStage::kExec), c.exec);
    EXPECT_EQ(IsEnvironmentErrno(c.err, FailureStage::kChild), c.child);
  }
  EXPECT_EQ(DescribeErrno(ENOSPC), "ENOSPC (No space left on device)");
  EXPECT_EQ(DescribeErrno(1234567), "errno 1234567");
}

TEST(EnvFailureTest, FindsEnvironmentFailuresInAChildsOutput) {
  EXPECT_EQ(FindEnvironmentFailure("step 1 loss 2.3\n  error: runs/x/ckpt: cannot write (No space left on device)\n"),
            "error: runs/x/ckpt: cannot write (No space left on device)");
  EXPECT_EQ(FindEnvironmentFailure("OSError: [Errno 122] Disk quota exceeded: 'out'"),
            "OSError: [Errno 122] Disk quota exceeded: 'out'");
  EXPECT_EQ(FindEnvironmentFailure("mkdir /out: Read-only file system\n"), "mkdir /out: Read-only file system");
  EXPECT_FALSE(FindEnvironmentFailure("CUDA out of memory. Tried to allocate 2.00 GiB\n").has_value());
  EXPECT_FALSE(FindEnvironmentFailure("loss is nan at step 3\nSegmentation fault\n").has_value());
  EXPECT_FALSE(FindEnvironmentFailure("").has_value());
}

}  // namespace
}  // namespace tmx
