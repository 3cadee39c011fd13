#include "matrix/machine.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "harness/device_hooks.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

const std::string kA = "0123456789abcdef0123456789abcdef01234567";
const std::string kB = "89abcdef0123456789abcdef0123456789abcdef";

class GitCommitTest : public ::testing::Test {
 protected:
  void Write(const std::string& rel, const std::string& text) {
    std::string path = dir_ + "/" + rel;
    ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/'))).ok());
    ASSERT_TRUE(WriteFileAtomically(path, text).ok());
  }
  test::ScratchDir scratch_{"git_commit"};
  const std::string dir_ = scratch_.path();
};

TEST_F(GitCommitTest, DetachedHeadLooseAndPackedRefs) {
  EXPECT_EQ(GitCommit(dir_), "") << "no .git at all";
  Write(".git/HEAD", kA + "\n");
  EXPECT_EQ(GitCommit(dir_), kA);  // detached, as CI checkouts of pull requests are
  Write(".git/HEAD", "ref: refs/heads/main\n");
  EXPECT_EQ(GitCommit(dir_), "") << "a branch with no commit yet";
  Write(".git/packed-refs",
        "# pack-refs with: peeled fully-peeled sorted\n" + kB + " refs/heads/main\n" + kA + " refs/heads/main-old\n");
  EXPECT_EQ(GitCommit(dir_), kB);
  Write(".git/refs/heads/main", kA + "\n");
  EXPECT_EQ(GitCommit(dir_), kA) << "a loose ref wins over the packed one";
  Write(".git/HEAD", "not a commit\n");
  EXPECT_EQ(GitCommit(dir_), "");
}

TEST_F(GitCommitTest, WorkTreeWithAGitFile) {
  Write("main/.git/packed-refs", kB + " refs/heads/feature\n");
  Write("main/.git/worktrees/wt/HEAD", "ref: refs/heads/feature\n");
  Write("main/.git/worktrees/wt/commondir", "../..\n");
  Write("wt/.git", "gitdir: " + dir_ + "/main/.git/worktrees/wt\n");
  EXPECT_EQ(GitCommit(dir_ + "/wt"), kB);
  Write("sub/.git", "gitdir: ../main/.git/worktrees/wt\n");
  EXPECT_EQ(GitCommit(dir_ + "/sub"), kB) << "a relative gitdir";
}

TEST(ParseDeviceListTest, FindsTheListAfterOtherOutputAndRejectsGarbage) {
  StatusOr<std::vector<DeviceInfo>> none = ParseDeviceList("warning: something\n[]\n");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  for (const char* bad : {"", "no list here", "[{\"id\": 3}]", "[1, 2"}) {
    EXPECT_FALSE(ParseDeviceList(bad).ok()) << bad;
  }
  DeviceInfo cpu;
  cpu.id = "cpu";
  cpu.name = "Test CPU";
  cpu.total_memory_bytes = 1 << 30;
  StatusOr<std::vector<DeviceInfo>> one = ParseDeviceList(
      "[W init.cpp:12] a torch warning\n[\n" + DeviceInfoToJson(cpu).dump(2) + "\n]\n[W exit.cpp:3] another one [x]\n");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].id, "cpu");
  EXPECT_EQ((*one)[0].total_memory_bytes, 1 << 30);
}

TEST(LocalProvenanceTest, NamesThisHostTheJobAndTheLinkedTorch) {
  Provenance p = LocalProvenance("nightly");
  EXPECT_EQ(p.job, "nightly");
  EXPECT_EQ(p.host, Hostname());
  EXPECT_FALSE(p.host.empty());
  EXPECT_EQ(p.torch_version, TorchVersion());
}

TEST(MachineTest, ThePeakLineSaysTheMatmulPeakAndTheMemoryBandwidth) {
  DeviceInfo cpu;
  cpu.id = "cpu";
  EXPECT_EQ(DescribeMatmulPeak(cpu), "");
  cpu.matmul_peak_flops = {{"bf16", 829e9}, {"fp32", 206e9}};
  cpu.matmul_peak_threads = 2;
  EXPECT_EQ(DescribeMatmulPeak(cpu), "cpu: matmul peak bf16 829 GFLOP/s, fp32 206 GFLOP/s at 2 threads");
  cpu.memory_bandwidth = {{"copy", 21.3e9}, {"triad", 23.04e9}};
  EXPECT_EQ(DescribeMatmulPeak(cpu), "cpu: matmul peak bf16 829 GFLOP/s, fp32 206 GFLOP/s at 2 threads; memory "
                                     "bandwidth copy 21.3 GB/s, triad 23.0 GB/s");
}

}  // namespace
}  // namespace tmx::matrix
