#include "base/process_info.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tmx {
namespace {

TEST(ProcessInfoTest, TellsLiveFromGoneProcesses) {
  EXPECT_TRUE(ProcessIsAlive(::getpid()));
  EXPECT_TRUE(ProcessIsAlive(1));  // init: alive, maybe not ours to signal
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  // Ended but not reaped: a zombie, which ProcessIsAlive still counts and ProcessEnded does not.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  EXPECT_TRUE(ProcessIsAlive(child));
  EXPECT_TRUE(ProcessEnded(child));
  EXPECT_FALSE(ProcessEnded(::getpid()));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_FALSE(ProcessIsAlive(child));
  EXPECT_TRUE(ProcessEnded(child));
  for (int64_t impossible : {int64_t{0}, int64_t{-1}, int64_t{1} << 40}) EXPECT_FALSE(ProcessIsAlive(impossible));
  EXPECT_FALSE(HostName().empty());
}

}  // namespace
}  // namespace tmx
