#include "base/folder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class FolderTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  void Touch(const std::string& name, int64_t age_s = 0) {
    ASSERT_TRUE(MakeDirs(ParentDir(Path(name))).ok());
    ASSERT_TRUE(WriteFileAtomically(Path(name), "x").ok());
    if (age_s > 0) {
      struct timeval times[2];
      times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(UnixNow() - age_s);
      times[0].tv_usec = times[1].tv_usec = 0;
      ASSERT_EQ(::utimes(Path(name).c_str(), times), 0);
    }
  }
  test::ScratchDir dir_{"folder_test"};
};

TEST_F(FolderTest, ListsRegularFilesAndReportsTheRestWithoutOpeningThem) {
  Touch("b.yaml");
  Touch("a/x.yaml");
  Touch("a/notes.txt");
  ASSERT_EQ(::mkfifo(Path("a/fifo.yaml").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("b.yaml", Path("link.yaml").c_str()), 0);
  ASSERT_EQ(::symlink("missing.yaml", Path("dangling.yaml").c_str()), 0);
  ASSERT_EQ(::symlink(".", Path("a/loop").c_str()), 0);  // not entered
  std::vector<std::string> skipped;
  StatusOr<std::vector<std::string>> files = ListRegularFiles(dir_.path(), ".yaml", &skipped);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(*files, (std::vector<std::string>{Path("a/x.yaml"), Path("b.yaml"), Path("link.yaml")}));
  EXPECT_EQ(skipped, (std::vector<std::string>{Path("a/fifo.yaml") + ": is a FIFO, not a regular file",
                                               Path("dangling.yaml") + ": is a dangling link, not a regular file"}));
  EXPECT_EQ(ListRegularFiles(Path("nope"), ".yaml", nullptr).status().code(), Status::Code::kNotFound);
}

// Every entry WalkFolder passes to `visit`, relative to the walked folder; the walk's status in `status`.
std::vector<std::string> Walked(const std::string& dir, const WalkOptions& options, Status* status) {
  std::vector<std::string> seen;
  *status = WalkFolder(dir, options, [&](const FolderEntry& e) {
    seen.push_back(e.relative);
    return Status::OK();
  });
  return seen;
}

WalkOptions FollowingLinks() {
  WalkOptions options;
  options.follow_folder_links = true;
  options.skip_hidden = true;
  return options;
}

TEST_F(FolderTest, WalksSortedDepthFirstSkippingHiddenEntries) {
  Touch("d/b.jsonl");
  Touch("d/a/x.jsonl");
  Touch("d/.cache/y.jsonl");
  Touch("d/.hidden.jsonl");
  Touch("real/z.jsonl");
  ASSERT_EQ(::symlink("../real", Path("d/c").c_str()), 0);
  Status s;
  EXPECT_EQ(Walked(Path("d"), FollowingLinks(), &s), (std::vector<std::string>{"a/x.jsonl", "b.jsonl", "c/z.jsonl"}));
  EXPECT_TRUE(s.ok()) << s.ToString();
  // Without following links, the link is an entry; without skipping hidden ones, they are walked too.
  EXPECT_EQ(Walked(Path("d"), WalkOptions(), &s),
            (std::vector<std::string>{".cache/y.jsonl", ".hidden.jsonl", "a/x.jsonl", "b.jsonl", "c"}));
  WalkOptions flat;
  flat.recursive = false;
  EXPECT_EQ(Walked(Path("d"), flat, &s), (std::vector<std::string>{".cache", ".hidden.jsonl", "a", "b.jsonl", "c"}));
  Walked(Path("nope"), WalkOptions(), &s);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
}

// One link to its own folder used to read the folder 41 times (until the path was too long to resolve), two
// never ended: a folder met again is an error naming the link, before anything is read twice.
TEST_F(FolderTest, ALinkLoopIsAnErrorNamingTheLink) {
  Touch("d/a.jsonl");
  Touch("d/sub/b.jsonl");
  ASSERT_EQ(::symlink(".", Path("d/loop").c_str()), 0);
  Status s;
  EXPECT_EQ(Walked(Path("d"), FollowingLinks(), &s), (std::vector<std::string>{"a.jsonl"}));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), Path("d/loop") + ": is a symbolic link to " + Path("d") +
                             ", a folder that holds it (a loop); fix: remove the link");

  ASSERT_EQ(::unlink(Path("d/loop").c_str()), 0);
  ASSERT_EQ(::symlink("..", Path("d/sub/up").c_str()), 0);
  ASSERT_EQ(::symlink(".", Path("d/sub/zz").c_str()), 0);  // two links: the first met is named
  EXPECT_EQ(Walked(Path("d"), FollowingLinks(), &s), (std::vector<std::string>{"a.jsonl", "sub/b.jsonl"}));
  EXPECT_EQ(s.message(), Path("d/sub/up") + ": is a symbolic link to " + Path("d") +
                             ", a folder that holds it (a loop); fix: remove the link");
}

TEST_F(FolderTest, ASecondWayToAFolderIsAnErrorToo) {
  Touch("d/a/x.jsonl");
  ASSERT_EQ(::symlink("a", Path("d/b").c_str()), 0);
  Status s;
  EXPECT_EQ(Walked(Path("d"), FollowingLinks(), &s), (std::vector<std::string>{"a/x.jsonl"}));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), Path("d/b") + ": is the folder already read as " + Path("d/a") +
                             " (its files would be read twice); fix: remove the link");
}

TEST_F(FolderTest, DepthAndEntriesAreBounded) {
  Touch("d/1/2/3/deep.txt");
  Touch("d/other.txt");
  WalkOptions shallow;
  shallow.max_depth = 2;
  Status s;
  Walked(Path("d"), shallow, &s);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), Path("d/1/2/3") + ": more than 2 levels of folders below " + Path("d") +
                             "; fix: move the files to read nearer the top");
  WalkOptions few;
  few.max_entries = 4;
  EXPECT_EQ(Walked(Path("d"), few, &s), (std::vector<std::string>{"1/2/3/deep.txt"}));
  EXPECT_EQ(s.message(), Path("d") +
                             ": more than 4 files and folders; fix: point at the folder that holds only "
                             "the files to read");
  few.max_entries = 5;
  EXPECT_EQ(Walked(Path("d"), few, &s).size(), 2u);
  EXPECT_TRUE(s.ok());
}

TEST_F(FolderTest, RemovesOnlyOldTemporaryFilesOfDeadWriters) {
  const int64_t kDeadPid = 999999999;  // above any pid_max
  const std::string mine = std::to_string(::getpid());
  Touch("configs/lora.yaml", 7200);
  Touch("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".0", 7200);  // stale: old, writer gone
  Touch("configs/sub/full.yaml.tmp." + std::to_string(kDeadPid), 7200);         // the older name, stale
  Touch("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".1", 60);    // too recent
  Touch("configs/.lora.yaml.tm-tmp." + mine + ".2", 7200);                      // writer alive
  StatusOr<std::vector<std::string>> removed = RemoveStaleTempFiles(Path("configs"));
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<std::string>{Path("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".0"),
                                                Path("configs/sub/full.yaml.tmp." + std::to_string(kDeadPid))}));
  EXPECT_TRUE(PathExists(Path("configs/lora.yaml")));
  EXPECT_TRUE(PathExists(Path("configs/.lora.yaml.tm-tmp." + std::to_string(kDeadPid) + ".1")));
  EXPECT_TRUE(PathExists(Path("configs/.lora.yaml.tm-tmp." + mine + ".2")));

  StaleTempOptions top_only;
  top_only.recursive = false;
  top_only.min_age_s = 0;
  Touch("configs/sub/.x.tm-tmp." + std::to_string(kDeadPid) + ".0");
  removed = RemoveStaleTempFiles(Path("configs"), top_only);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->size(), 1u);  // the recent one at the top, not the one in sub/
  EXPECT_TRUE(RemoveStaleTempFiles(Path("nope")).value().empty());
}

}  // namespace
}  // namespace tmx
