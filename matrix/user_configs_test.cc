// A user's own config files in the matrix: which files a --configs item names, their names and recipes, and
// the places their records may not go.
#include "matrix/user_configs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/file_util.h"
#include "matrix/testdata/checkout.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

constexpr char kLoraComment[] = "# tune run lora_finetune_single_device --config mine\nbatch_size: 2\n";

class UserConfigsTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& relative, const std::string& text) {
    const std::string path = dir_ + "/" + relative;
    EXPECT_TRUE(MakeDirs(ParentDir(path)).ok());
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    return path;
  }
  StatusOr<std::vector<UserConfig>> Resolve(const std::vector<std::string>& items,
                                            const std::vector<std::string>& recipes = {}) {
    warnings_.clear();
    return ResolveUserConfigs(co_.registry, items, recipes, &warnings_);
  }

  testing::TestCheckout co_;
  test::ScratchDir scratch_{"user_configs_test"};
  const std::string dir_ = scratch_.path();
  std::vector<std::string> warnings_;
};

TEST_F(UserConfigsTest, PathsAreFilesAndFoldersNotBuiltInNames) {
  EXPECT_TRUE(IsConfigPath("my.yaml"));
  EXPECT_TRUE(IsConfigPath("/missing/too.yml"));
  EXPECT_TRUE(IsConfigPath(dir_));
  EXPECT_FALSE(IsConfigPath("tiny/*"));
  EXPECT_FALSE(IsConfigPath("llama3_2/1B_lora_single_device"));
  EXPECT_FALSE(IsConfigPath(dir_ + "/*"));  // a pattern, even where a folder of that spelling exists
}

TEST_F(UserConfigsTest, ACommaInsideAnExistingPathDoesNotSplitIt) {
  // "runs/a,b/mine.yaml" became "runs/a" and "b/mine.yaml", neither of which exists.
  ASSERT_TRUE(MakeDirs(dir_ + "/a,b").ok());
  const std::string inside = Write("a,b/mine.yaml", "# tune run full_finetune_single_device --config mine\n");
  const std::string other = Write("other.yaml", "# tune run full_finetune_single_device --config other\n");
  EXPECT_EQ(SplitConfigsList(inside + "," + other + ",tiny/*"),
            (std::vector<std::string>{inside, other, "tiny/*"}));
  EXPECT_EQ(SplitConfigsList(dir_ + "/a,b," + other), (std::vector<std::string>{dir_ + "/a,b", other}));
  EXPECT_EQ(SplitConfigsList("tiny/*,,llama3_2/*,"), (std::vector<std::string>{"tiny/*", "llama3_2/*"}));
}

TEST_F(UserConfigsTest, AFileTakesTheRecipeItsCommentNamesAndItsNameWithoutYaml) {
  const std::string path = Write("mine.yaml", "# tune run full_finetune_single_device --config mine\nlr: 1e-5\n");
  StatusOr<std::vector<UserConfig>> configs = Resolve({path});
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ(configs->front().name, "mine");
  EXPECT_EQ(configs->front().path, path);
  EXPECT_EQ(configs->front().recipe, "full_finetune_single_device");
  // The same file twice is one config.
  EXPECT_EQ(Resolve({path, path})->size(), 1u);
}

TEST_F(UserConfigsTest, AFolderGivesEveryConfigNamedByItsPathInsideAndLeavesOutWhatNoRecipeRuns) {
  Write("mine/team/a.yaml", kLoraComment);
  Write("mine/b.yml", "batch_size: 3\n");  // names no recipe
  Write("mine/dpo.yaml", "# tune run lora_dpo_single_device --config llama2/7B_lora_dpo\nbatch_size: 1\n");
  Write("mine/notes.txt", "not a config\n");
  StatusOr<std::vector<UserConfig>> configs = Resolve({dir_ + "/mine/"});
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ(configs->front().name, "team/a");
  EXPECT_EQ(configs->front().recipe, "lora_finetune_single_device");
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_NE(warnings_[0].find("mine/b.yml: names no recipe"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[0].find("; left out"), std::string::npos) << warnings_[0];
  EXPECT_NE(warnings_[1].find("mine/dpo.yaml: is for torchtune's recipe 'lora_dpo_single_device'"), std::string::npos)
      << warnings_[1];
  // --recipes naming one recipe gives it to the files that name none, and leaves other recipes' files out.
  configs = Resolve({dir_ + "/mine"}, {"full_finetune_single_device"});
  ASSERT_TRUE(configs.ok()) << configs.status().ToString();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ(configs->front().name, "b");
  EXPECT_EQ(configs->front().recipe, "full_finetune_single_device");
}

TEST_F(UserConfigsTest, EachProblemNamesTheFileAndTheFix) {
  const std::string bare = Write("bare.yaml", "batch_size: 3\n");
  Status s = Resolve({bare}).status();
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find(bare + ": names no recipe"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("fix: add a comment line such as `# tune run lora_finetune_single_device --config " +
                             dir_ + "/bare` at its top, or name the recipe with --recipes <recipe>"),
            std::string::npos)
      << s.message();

  s = Resolve({dir_ + "/absent.yaml"}).status();
  EXPECT_NE(s.message().find(dir_ + "/absent.yaml: no such file"), std::string::npos) << s.message();

  s = Resolve({Write("my config.yaml", kLoraComment)}).status();
  EXPECT_NE(s.message().find("its name 'my config' has the character ' '"), std::string::npos) << s.message();

  s = Resolve({Write("one/x.yaml", kLoraComment), Write("two/x.yaml", kLoraComment)}).status();
  EXPECT_NE(s.message().find("two configs would both be named 'x': " + dir_ + "/one/x.yaml and " + dir_ +
                             "/two/x.yaml"),
            std::string::npos)
      << s.message();

  s = Resolve({Write("lora.yaml", kLoraComment)}, {"full_finetune_single_device"}).status();
  EXPECT_NE(s.message().find("selects nothing: only configs of other recipes than --recipes "
                             "full_finetune_single_device: " + dir_ + "/lora.yaml (lora_finetune_single_device)"),
            std::string::npos)
      << s.message();

  ASSERT_TRUE(MakeDirs(dir_ + "/empty").ok());
  s = Resolve({dir_ + "/empty"}).status();
  EXPECT_NE(s.message().find("selects nothing: no config file with a recipe tune-matrix implements"),
            std::string::npos)
      << s.message();
}

TEST_F(UserConfigsTest, RecordsOfUserConfigsStayOutOfTheCheckoutsReportsAndConfigs) {
  const std::string reports = co_.dir() + "/reports";
  ASSERT_TRUE(MakeDirs(reports).ok());
  Status s = CheckUserDestinations(reports + "/journal.jsonl", dir_ + "/out");
  EXPECT_EQ(s.ExitCode(), 2);
  EXPECT_NE(s.message().find("--journal " + reports + "/journal.jsonl: resolves to "), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("; a run of your own configs keeps its records apart from the built-in configs'; fix: "
                             "leave the flag out (default matrix-results/) or name another folder"),
            std::string::npos)
      << s.message();
  s = CheckUserDestinations(dir_ + "/j.jsonl", co_.configs_dir() + "/tiny");
  EXPECT_NE(s.message().find("--reports-dir " + co_.configs_dir() + "/tiny: "), std::string::npos) << s.message();
  EXPECT_TRUE(CheckUserDestinations(dir_ + "/j.jsonl", dir_ + "/out").ok());
  EXPECT_TRUE(CheckUserDestinations("matrix-results/journal.jsonl", "matrix-results").ok());
}

// Each passed the guard, which compared the journal's folder with reports/ itself: a user-config run with the
// first compacted a built-in cell's history from 11 records to 2.
TEST_F(UserConfigsTest, NothingOfAUserRunResolvesIntoTheCheckoutsReportsOrConfigs) {
  const std::string reports = co_.dir() + "/reports";
  ASSERT_TRUE(MakeDirs(reports + "/history/tiny/lora").ok());
  ASSERT_TRUE(WriteFileAtomically(reports + "/journal.jsonl", "\n").ok());
  const std::string history_file = reports + "/history/tiny/lora/cpu.jsonl";
  EXPECT_FALSE(CheckUserDestinations(history_file, dir_ + "/out").ok()) << "a history file as the journal";
  Status s = CheckUserDestinations(dir_ + "/j.jsonl", reports + "/mine");
  EXPECT_NE(s.message().find("--reports-dir " + reports + "/mine: resolves to "), std::string::npos) << s.message();
  const std::string link = dir_ + "/journal.jsonl";
  ASSERT_EQ(::symlink((reports + "/journal.jsonl").c_str(), link.c_str()), 0);
  s = CheckUserDestinations(link, dir_ + "/out");
  EXPECT_NE(s.message().find("--journal " + link + ": resolves to "), std::string::npos) << s.message();
  // A link planted in the user's reports folder: its history would be written into the checkout's.
  ASSERT_TRUE(MakeDirs(dir_ + "/results").ok());
  ASSERT_EQ(::symlink((reports + "/history").c_str(), (dir_ + "/results/history").c_str()), 0);
  s = CheckUserDestinations(dir_ + "/j.jsonl", dir_ + "/results");
  EXPECT_NE(s.message().find("--reports-dir " + dir_ + "/results: holds " + dir_ + "/results/history, which resolves"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tmx::matrix
