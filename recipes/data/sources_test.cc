#include "recipes/data/sources.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/file_util.h"
#include "recipes/data/testdata/fixtures.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

class SourcesTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("TUNE_MATRIX_DATA", dir_.path().c_str(), 1); }
  void TearDown() override { unsetenv("TUNE_MATRIX_DATA"); }
  std::string Put(const std::string& relative, const std::string& text) {
    std::string path = dir_.path() + "/" + relative;
    EXPECT_TRUE(MakeDirs(ParentDir(path)).ok());
    test::WriteTextFile(path, text);
    return path;
  }
  test::ScratchDir dir_;
};

TEST_F(SourcesTest, HubIdReadsTheSplitFromTheDataFolder) {
  Put("yahma/alpaca-cleaned/data/train-00000-of-00001.jsonl", "{\"i\": 1}\n{\"i\": 2}\n{\"i\": 3}\n");
  Put("yahma/alpaca-cleaned/data/test.jsonl", "{\"i\": 9}\n");
  Put("yahma/alpaca-cleaned/README.md", "card");
  SourceOptions options;
  options.source = "yahma/alpaca-cleaned";
  auto records = LoadSource(options);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[2].value["i"], 3);
  options.split = "train[1:]";
  records = LoadSource(options);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 2u);
  options.split = "train[:34%]";
  EXPECT_EQ(LoadSource(options)->size(), 1u);
  options.split = "test";
  EXPECT_EQ((*LoadSource(options))[0].value["i"], 9);
}

TEST_F(SourcesTest, ResolvingFindsTheSplitsFilesWithoutReadingThem) {
  // A pre-flight check resolves; only loading reads (and here finds the broken record).
  const std::string train = Put("org/broken/data/train.jsonl", "{\"i\": 1}\nnot json\n");
  Put("org/broken/data/test.jsonl", "{\"i\": 9}\n");
  SourceOptions options;
  options.source = "org/broken";
  StatusOr<std::vector<SourceFile>> files = ResolveSource(options);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 1u);
  EXPECT_EQ((*files)[0].path, train);
  EXPECT_EQ((*files)[0].format, "jsonl");
  EXPECT_FALSE(LoadSource(options).ok());
  options.source = "org/absent";
  EXPECT_EQ(ResolveSource(options).status().code(), Status::Code::kNotFound);
}

TEST_F(SourcesTest, UnsplitFilesAreTheTrainSplit) {
  Put("org/plain/records.csv", "input,output\nq,a\n");
  SourceOptions options;
  options.source = "org/plain";
  auto records = LoadSource(options);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  EXPECT_EQ((*records)[0].value["output"], "a");
}

TEST_F(SourcesTest, MissingHubDatasetSaysWhereToPutIt) {
  SourceOptions options;
  options.source = "yahma/alpaca-cleaned";
  auto records = LoadSource(options);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), Status::Code::kNotFound);
  std::string dir = dir_.path() + "/yahma/alpaca-cleaned";
  EXPECT_EQ(records.status().message(),
            "dataset yahma/alpaca-cleaned is not on this machine: " + dir +
                "/ does not exist (runs never download); fix: `tune download yahma/alpaca-cleaned --repo-type "
                "dataset` fetches it there, or put the dataset's files there (.json, .jsonl, .csv or .txt), set "
                "$TUNE_MATRIX_DATA to the "
                "folder that holds yahma/alpaca-cleaned/, or use source: json with data_files: <your file>");
}

TEST_F(SourcesTest, ParquetOnlyIsNamed) {
  Put("org/pq/data/train-0.parquet", "PAR1");
  SourceOptions options;
  options.source = "org/pq";
  auto records = LoadSource(options);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(
      records.status().message(),
      "dataset folder " + dir_.path() +
          "/org/pq/ has only data/train-0.parquet (Parquet/Arrow are not read) for "
          "split train; fix: put the split's records there as train.jsonl (one JSON object per line), .json, .csv "
          "or .txt (e.g. python3 -c \"import pandas; pandas.read_parquet('data/train-0.parquet').to_json("
          "'train.jsonl', orient='records', lines=True)\")");
}

TEST_F(SourcesTest, LocalFormatsNeedDataFiles) {
  SourceOptions options;
  options.source = "json";
  auto records = LoadSource(options);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().message(),
            "source json needs data_files; fix: set data_files to the local file(s) to read");
  options.data_files = {dir_.path() + "/nope.json"};
  records = LoadSource(options);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().message(), "data_files " + dir_.path() +
                                            "/nope.json does not exist; fix: put the json "
                                            "file there, or set data_files to where it is");
  options.data_files = {test::SampleDatasetPath("alpaca_sample.json")};
  options.split = "train[:2]";
  records = LoadSource(options);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ(records->size(), 2u);
  options.split = "train[:x]";
  EXPECT_EQ(
      LoadSource(options).status().message(),
      "split \"train[:x]\": \"x\" is not a whole number or percentage; fix: write e.g. train[:100] or train[:10%]");
}

// A dataset folder holding a link to itself: one link read every record 41 times, two never ended. Now the
// walk stops at the link and names it, before a record is read.
TEST_F(SourcesTest, ALinkLoopInADatasetFolderIsNamedNotReadAgain) {
  Put("org/loop/train.jsonl", "{\"i\": 1}\n{\"i\": 2}\n");
  const std::string dir = dir_.path() + "/org/loop";
  ASSERT_EQ(::symlink(".", (dir + "/again").c_str()), 0);
  SourceOptions options;
  options.source = "org/loop";
  const std::string expected = "dataset folder " + dir + ": " + dir + "/again: is a symbolic link to " + dir +
                               ", a folder that holds it (a loop); fix: remove the link";
  auto records = LoadSource(options);
  ASSERT_FALSE(records.ok()) << records->size() << " records";
  EXPECT_EQ(records.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(records.status().message(), expected);
  ASSERT_EQ(::symlink(".", (dir + "/more").c_str()), 0);
  records = LoadSource(options);
  ASSERT_FALSE(records.ok()) << records->size() << " records";
  EXPECT_EQ(records.status().message(), expected);
  // Without the links, each record once.
  ASSERT_EQ(::unlink((dir + "/again").c_str()), 0);
  ASSERT_EQ(::unlink((dir + "/more").c_str()), 0);
  records = LoadSource(options);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  EXPECT_EQ(records->size(), 2u);
}

TEST_F(SourcesTest, TwoPathsToOneDataFileAreNamedNotReadTwice) {
  // A link beside its target, then two links to one file elsewhere: each would put the records in twice.
  Put("org/twice/train.jsonl", "{\"i\": 1}\n{\"i\": 2}\n");
  Put("elsewhere/data.jsonl", "{\"i\": 3}\n");
  const std::string dir = dir_.path() + "/org/twice";
  ASSERT_EQ(::symlink("train.jsonl", (dir + "/train_copy.jsonl").c_str()), 0);
  SourceOptions options;
  options.source = "org/twice";
  auto records = LoadSource(options);
  ASSERT_FALSE(records.ok()) << records->size() << " records";
  EXPECT_EQ(records.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(records.status().message(), "dataset folder " + dir + ": " + dir + "/train_copy.jsonl is the same file as " +
                                            dir + "/train.jsonl (a link), so its records would be read twice; fix: "
                                            "remove one of the two");
  ASSERT_EQ(::unlink((dir + "/train_copy.jsonl").c_str()), 0);
  ASSERT_EQ(::symlink((dir_.path() + "/elsewhere/data.jsonl").c_str(), (dir + "/train_a.jsonl").c_str()), 0);
  ASSERT_EQ(::symlink((dir_.path() + "/elsewhere/data.jsonl").c_str(), (dir + "/train_b.jsonl").c_str()), 0);
  records = LoadSource(options);
  ASSERT_FALSE(records.ok()) << records->size() << " records";
  EXPECT_EQ(records.status().message(), "dataset folder " + dir + ": " + dir + "/train_b.jsonl is the same file as " +
                                            dir + "/train_a.jsonl (a link), so its records would be read twice; fix: "
                                            "remove one of the two");
  // One link to a file outside the folder is read, once.
  ASSERT_EQ(::unlink((dir + "/train_b.jsonl").c_str()), 0);
  records = LoadSource(options);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  EXPECT_EQ(records->size(), 3u);
}

TEST_F(SourcesTest, AFifoOrAnOversizedDataFileIsRefusedByName) {
  const std::string fifo = dir_.path() + "/train.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  SourceOptions options;
  options.source = "jsonl";
  options.data_files = {fifo};
  EXPECT_EQ(LoadSource(options).status().message(), fifo + ": is a FIFO, not a regular file; fix: pass a regular file");

  // 2 GiB and one byte, as a hole: refused from its size, without reading it.
  const std::string huge = dir_.path() + "/huge.jsonl";
  int fd = ::open(huge.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, (off_t{2} << 30) + 1), 0);
  ::close(fd);
  options.data_files = {huge};
  auto records = LoadSource(options);
  EXPECT_EQ(records.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(records.status().message(), huge +
                                            ": 2147483649 bytes, over the 2.00 GiB limit for a dataset file; fix: "
                                            "split it into several files in the dataset's folder, or train on a "
                                            "slice of it");
}

}  // namespace
}  // namespace tmx::data
