#include "base/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "tests/scratch_dir.h"

namespace tmx {
namespace {

using ::testing::HasSubstr;

TEST(FileUtilTest, ParentDir) {
  EXPECT_EQ(ParentDir("a/b/c.txt"), "a/b");
  EXPECT_EQ(ParentDir("c.txt"), ".");
  EXPECT_EQ(ParentDir("/c.txt"), "/");
  EXPECT_EQ(ParentDir(""), ".");
}

// Every temporary file name in `dir`.
std::vector<std::string> TempFiles(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (const dirent* e = d ? ::readdir(d) : nullptr) {
    if (IsAtomicWriteTempName(e->d_name, nullptr)) names.push_back(e->d_name);
  }
  if (d) ::closedir(d);
  return names;
}

class FileUtilFilesTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  test::ScratchDir dir_{"file_util_test"};
};

TEST_F(FileUtilFilesTest, ReadingAnythingButARegularFileIsAnErrorNotAHang) {
  ASSERT_EQ(::mkfifo(Path("fifo.yaml").c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(Path("folder.yaml").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("fifo.yaml", Path("link.yaml").c_str()), 0);
  int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string sock_path = Path("sock.yaml");
  ASSERT_LT(sock_path.size(), sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, sock_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  struct Case {
    std::string path, kind;
  } cases[] = {{Path("fifo.yaml"), "a FIFO"},
               {Path("folder.yaml"), "a folder"},
               {Path("link.yaml"), "a FIFO"},
               {sock_path, "a socket"},
               {"/dev/null", "a character device"}};
  for (const Case& c : cases) {
    auto start = std::chrono::steady_clock::now();
    StatusOr<std::string> text = ReadFile(c.path);
    ASSERT_FALSE(text.ok()) << c.path;
    EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(text.status().message(), c.path + ": is " + c.kind + ", not a regular file; fix: pass a regular file");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  }
  ::close(sock);
  EXPECT_EQ(ReadFile(Path("missing")).status().code(), Status::Code::kNotFound);
}

TEST_F(FileUtilFilesTest, WritingThroughASymlinkReplacesItsTargetAndKeepsTheLink) {
  ASSERT_EQ(::mkdir(Path("real").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(Path("real/config.yaml"), "old\n").ok());
  ASSERT_EQ(::chmod(Path("real/config.yaml").c_str(), 0600), 0);
  ASSERT_EQ(::symlink("real/config.yaml", Path("link.yaml").c_str()), 0);          // relative, from another folder
  ASSERT_EQ(::symlink(Path("link.yaml").c_str(), Path("link2.yaml").c_str()), 0);  // a chain, absolute

  ASSERT_TRUE(WriteFileAtomically(Path("link2.yaml"), "new\n").ok());
  struct stat st;
  ASSERT_EQ(::lstat(Path("link.yaml").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link must stay a link";
  ASSERT_EQ(::lstat(Path("link2.yaml").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(ReadFile(Path("real/config.yaml")).value(), "new\n");
  ASSERT_EQ(::stat(Path("real/config.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the target's permissions are kept";
  EXPECT_TRUE(TempFiles(dir_.path()).empty());
  EXPECT_TRUE(TempFiles(Path("real")).empty());

  // A dangling link: the file it names is created.
  ASSERT_EQ(::symlink("real/new.yaml", Path("dangling.yaml").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(Path("dangling.yaml"), "x\n").ok());
  EXPECT_EQ(ReadFile(Path("real/new.yaml")).value(), "x\n");
}

TEST_F(FileUtilFilesTest, PiecesAreWrittenInOrderAsOneFile) {
  const std::string big(3 << 20, 'b');  // larger than one write may take
  ASSERT_TRUE(WriteFileAtomically(Path("pieces"), std::vector<std::string_view>{"head:", "", big, ":tail"}).ok());
  EXPECT_EQ(ReadFile(Path("pieces")).value(), "head:" + big + ":tail");
  ASSERT_TRUE(WriteFileAtomically(Path("pieces"), std::vector<std::string_view>{}).ok());
  EXPECT_EQ(ReadFile(Path("pieces")).value(), "");
  EXPECT_TRUE(TempFiles(dir_.path()).empty());
}

TEST_F(FileUtilFilesTest, WritingOverALinkLoopOrANonRegularFileChangesNothing) {
  ASSERT_EQ(::symlink("b", Path("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", Path("b").c_str()), 0);
  Status loop = WriteFileAtomically(Path("a"), "x");
  EXPECT_EQ(loop.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(loop.message(), HasSubstr("symbolic links in a row (a loop?)"));
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  Status fifo = WriteFileAtomically(Path("fifo"), "x");
  EXPECT_EQ(fifo.message(),
            Path("fifo") + ": is a FIFO, not a regular file; fix: nothing was written; remove it first");
  struct stat st;
  ASSERT_EQ(::lstat(Path("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(TempFiles(dir_.path()).empty());
}

TEST_F(FileUtilFilesTest, SameFileSeesThroughSpellingsAndLinks) {
  const std::string a = Path("a.jsonl"), link = Path("link.jsonl");
  ASSERT_TRUE(WriteFileAtomically(a, "x\n").ok());
  ASSERT_EQ(::symlink(a.c_str(), link.c_str()), 0);
  EXPECT_TRUE(SameFile(a, dir_.path() + "/./a.jsonl"));
  EXPECT_TRUE(SameFile(link, a));
  ASSERT_TRUE(WriteFileAtomically(Path("b.jsonl"), "x\n").ok());
  EXPECT_FALSE(SameFile(a, Path("b.jsonl")));  // same contents, another file
  EXPECT_FALSE(SameFile(a, Path("missing.jsonl")));
}

TEST(FileUtilTempNameTest, TemporaryNamesAreRecognisedWithTheirPid) {
  EXPECT_EQ(AtomicWriteTempName("lora.yaml", 4242, 3), ".lora.yaml.tm-tmp.4242.3");
  int64_t pid = 0;
  EXPECT_TRUE(IsAtomicWriteTempName(".lora.yaml.tm-tmp.4242.3", &pid));
  EXPECT_EQ(pid, 4242);
  EXPECT_TRUE(IsAtomicWriteTempName("lora.yaml.tmp.77", &pid));  // the form written before
  EXPECT_EQ(pid, 77);
  for (const char* not_temp : {"lora.yaml", ".lora.yaml", ".tm-tmp.1.2", ".x.tm-tmp.1", ".x.tm-tmp.a.1",
                               ".x.tm-tmp.1.b", "x.tmp.", "x.tmp.12a", ".tmp.12", "x.tmp.12345678901"}) {
    EXPECT_FALSE(IsAtomicWriteTempName(not_temp, nullptr)) << not_temp;
  }
}

}  // namespace
}  // namespace tmx
