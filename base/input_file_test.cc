#include "base/input_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "base/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

class InputFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string Put(const std::string& name, const std::string& text) {
    EXPECT_TRUE(WriteFileAtomically(Path(name), text).ok());
    return Path(name);
  }
  // A file of `bytes` bytes that takes no disk space (a hole), so limits can be tested on large sizes.
  std::string Sparse(const std::string& name, off_t bytes) {
    int fd = ::open(Path(name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, bytes), 0);
    ::close(fd);
    return Path(name);
  }
  test::ScratchDir dir_{"input_file_test"};
};

TEST_F(InputFileTest, ReadsARegularFileWholeOrInParts) {
  std::string path = Put("a.txt", "hello world");
  ASSERT_EQ(::symlink("a.txt", Path("link.txt").c_str()), 0);
  StatusOr<InputFile> file = InputFile::Open(Path("link.txt"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->size(), 11u);
  EXPECT_EQ(file->path(), Path("link.txt"));
  EXPECT_EQ(*file->ReadAll(), "hello world");
  char part[5];
  ASSERT_TRUE(file->ReadAt(6, part, 5).ok());
  EXPECT_EQ(std::string(part, 5), "world");
  Status past_end = file->ReadAt(8, part, 5);
  EXPECT_EQ(past_end.code(), Status::Code::kIoError);
  EXPECT_EQ(past_end.message(), Path("link.txt") +
                                    ": ends at byte 11, sooner than when it was opened; fix: do not change the "
                                    "file while it is read");
}

// A FIFO with no writer, a folder, a device: each refused from its kind, at once, never read from.
TEST_F(InputFileTest, RefusesWhatIsNotARegularFileWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("model.safetensors").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("model.safetensors", Path("link").c_str()), 0);
  ASSERT_EQ(::mkdir(Path("folder").c_str(), 0755), 0);
  struct Case {
    std::string path, kind;
  } cases[] = {{Path("model.safetensors"), "a FIFO"},
               {Path("link"), "a FIFO"},
               {Path("folder"), "a folder"},
               {"/dev/zero", "a character device"}};
  for (const Case& c : cases) {
    auto start = std::chrono::steady_clock::now();
    StatusOr<InputFile> file = InputFile::Open(c.path);
    ASSERT_FALSE(file.ok()) << c.path;
    EXPECT_EQ(file.status().code(), Status::Code::kInvalidArgument) << c.path;
    EXPECT_EQ(file.status().message(), c.path + ": is " + c.kind + ", not a regular file; fix: pass a regular file");
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << c.path;
  }
}

TEST_F(InputFileTest, MissingFilesAndLinkLoopsAreNamed) {
  ASSERT_EQ(::symlink("nowhere", Path("dangling").c_str()), 0);
  ASSERT_EQ(::symlink("b", Path("a").c_str()), 0);
  ASSERT_EQ(::symlink("a", Path("b").c_str()), 0);
  for (const std::string& missing : {Path("missing"), Path("dangling"), Path("missing/below")}) {
    StatusOr<InputFile> file = InputFile::Open(missing);
    EXPECT_EQ(file.status().code(), Status::Code::kNotFound) << missing;
    EXPECT_EQ(file.status().message(), missing + ": no such file");
  }
  StatusOr<InputFile> loop = InputFile::Open(Path("a"));
  EXPECT_EQ(loop.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(loop.status().message(), Path("a") + ": a loop of symbolic links (or a chain of more than 40); fix: "
                                                 "point the link at a regular file");
}

TEST_F(InputFileTest, AFileOverItsLimitIsRefusedBeforeItIsRead) {
  std::string path = Put("eleven", "12345678901");
  EXPECT_TRUE(InputFile::Open(path, InputFileOptions().MaxBytes(11)).ok());
  StatusOr<InputFile> over = InputFile::Open(path, InputFileOptions().MaxBytes(10));
  EXPECT_EQ(over.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(over.status().message(), path + ": 11 bytes, over the 10 B limit for an input file; fix: pass a smaller file");

  // A config over its kind's limit: refused from its size, so quickly and without reading 5 MiB of zeros.
  std::string config = Sparse("huge.yaml", 5 << 20);
  StatusOr<std::string> text = ReadFile(config, ConfigInput());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(), config +
                                         ": 5242880 bytes, over the 4.00 MiB limit for a config; fix: pass the config "
                                         "file itself (a config is a few KiB of YAML or JSON)");
  // The same file is within the default limit, and MaxBytes(0) takes any size.
  EXPECT_EQ(ReadFile(config)->size(), size_t{5} << 20);
  EXPECT_TRUE(InputFile::Open(Sparse("larger", off_t{3} << 30), InputFileOptions().MaxBytes(0)).ok());
  EXPECT_EQ(InputFile::Open(Path("larger")).status().code(), Status::Code::kInvalidArgument);  // over 1 GiB
}

TEST_F(InputFileTest, EachKindOfInputHasItsLimit) {
  EXPECT_EQ(InputFileOptions().max_bytes, int64_t{1} << 30);
  EXPECT_EQ(ConfigInput().max_bytes, int64_t{4} << 20);
  EXPECT_EQ(TokenizerInput().max_bytes, int64_t{256} << 20);
  EXPECT_EQ(DatasetInput().max_bytes, int64_t{2} << 30);
  EXPECT_EQ(CheckpointIndexInput().max_bytes, int64_t{64} << 20);
  for (const InputFileOptions& o : {ConfigInput(), TokenizerInput(), DatasetInput(), CheckpointIndexInput()}) {
    EXPECT_EQ(o.kind.rfind("a ", 0), 0u) << o.kind;  // reads "the ... limit for a config"
    EXPECT_FALSE(o.too_large_fix.empty()) << o.kind;
  }
}

TEST_F(InputFileTest, AFileThatGrowsPastItsLimitWhileReadIsRefused) {
  std::string path = Put("growing", "12345");
  StatusOr<InputFile> file = InputFile::Open(path, InputFileOptions().MaxBytes(10));
  ASSERT_TRUE(file.ok());
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  ASSERT_EQ(::write(fd, "6789012345", 10), 10);
  ::close(fd);
  StatusOr<std::string> text = file->ReadAll();
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(text.status().message(), path + ": 15 bytes, over the 10 B limit for an input file; fix: pass a smaller file");
}

TEST_F(InputFileTest, TheDescriptorIsClosedOnceByItsLastOwner) {
  StatusOr<InputFile> file = InputFile::Open(Put("a", "x"));
  ASSERT_TRUE(file.ok());
  int fd = file->fd();
  {
    InputFile moved = std::move(*file);
    EXPECT_EQ(file->fd(), -1);
    EXPECT_EQ(moved.fd(), fd);
    EXPECT_EQ(*moved.ReadAll(), "x");
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1);  // closed when `moved` went away
}

}  // namespace
}  // namespace tmx
