#include "base/lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file_util.h"
#include "base/process_info.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class LockTest : public ::testing::Test {
 protected:
  test::ScratchDir dir_{"lock_test"};
  std::string path_ = dir_.path() + "/" + kCheckoutLockName;
};

TEST_F(LockTest, ASecondHolderIsRefusedNamingTheFirst) {
  std::string notice = "stale";
  StatusOr<std::unique_ptr<CheckoutLock>> first = CheckoutLock::Acquire(path_, "tune-matrix run", &notice);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(notice, "");
  EXPECT_EQ((*first)->record().pid, ::getpid());
  EXPECT_EQ((*first)->record().command, "tune-matrix run");

  StatusOr<std::unique_ptr<CheckoutLock>> second = CheckoutLock::Acquire(path_, "tune-matrix merge", nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(second.status().message(),
              MatchesRegex(".*: another tune-matrix holds this checkout's lock \\(pid " + std::to_string(::getpid()) +
                           " on host .*, started 20[0-9-]+T[0-9:]+Z \\(tune-matrix run\\)\\); fix: wait for it to "
                           "finish, or stop it, then run again"));

  first->reset();  // released: the record is cleared and the next holder takes it without a notice
  EXPECT_FALSE(ReadLockRecord(path_).has_value());
  StatusOr<std::unique_ptr<CheckoutLock>> third = CheckoutLock::Acquire(path_, "tune-matrix report", &notice);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(notice, "");
}

TEST_F(LockTest, ALockLeftByAKilledHolderIsTakenOverWithANotice) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path_, "tune-matrix run --resume", nullptr);
    if (!lock.ok()) ::_exit(3);
    ::kill(::getpid(), SIGKILL);  // no destructor runs: the record stays, the kernel drops the flock
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the child could not take the lock";
  std::optional<LockRecord> left = ReadLockRecord(path_);
  ASSERT_TRUE(left.has_value());
  EXPECT_EQ(left->pid, child);
  EXPECT_FALSE(ProcessIsAlive(child));

  std::string notice;
  StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path_, "tune-matrix run", &notice);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_THAT(notice, HasSubstr("took over the checkout lock " + path_ + " left by pid " + std::to_string(child)));
  EXPECT_THAT(notice, HasSubstr("(tune-matrix run --resume), which is no longer running"));
  EXPECT_EQ(ReadLockRecord(path_)->pid, ::getpid());
}

TEST_F(LockTest, AHolderInAnotherProcessIsRefused) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path_, "tune-matrix run", nullptr);
    char c = lock.ok() ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();  // holds the lock until killed
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path_, "tune-matrix merge", nullptr);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("(pid " + std::to_string(child) + " on host "));
}

TEST_F(LockTest, ANonRegularLockFileIsRefused) {
  ASSERT_EQ(::mkfifo(path_.c_str(), 0644), 0);
  StatusOr<std::unique_ptr<CheckoutLock>> lock = CheckoutLock::Acquire(path_, "x", nullptr);
  ASSERT_FALSE(lock.ok());
  EXPECT_THAT(lock.status().message(), HasSubstr("the checkout lock is a FIFO, not a regular file"));
}

}  // namespace
}  // namespace tmx
