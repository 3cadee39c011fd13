// The tune-matrix command line where it decides exit statuses on its own: `compare`, and `report`'s --repo-url.
#include "matrix/matrix_cli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "base/file_util.h"
#include "matrix/html_report.h"
#include "matrix/journal.h"
#include "matrix/testdata/report_fixture.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

class CompareCliTest : public ::testing::Test {
 protected:
  // A journal of one cell that runs at `tps` tokens/s (a 2 s step, long enough to compare).
  std::string Journal(const std::string& name, CellStatus status, double tps) {
    std::string path = scratch_.path() + "/" + name;
    CellResult r = testing::FixtureRecord("tiny/lora", "lora_finetune_single_device", "cpu", status,
                                          "2026-11-1" + std::to_string(++day_) + "T10:00:00Z", tps, 1.0, "");
    EXPECT_TRUE(WriteFileAtomically(path, JournalLine(r) + "\n").ok());
    return path;
  }

  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunTuneMatrix(registry_, args, out_, err_);
  }

  test::ScratchDir scratch_{"compare_cli"};
  Registry registry_;
  std::ostringstream out_, err_;
  int day_ = 0;
};

TEST_F(CompareCliTest, ExitsOneOnARegressionAndZeroOtherwise) {
  std::string before = Journal("before.jsonl", CellStatus::kRuns, 1000);
  std::string same = Journal("same.jsonl", CellStatus::kRuns, 980);
  std::string slower = Journal("slower.jsonl", CellStatus::kRuns, 500);
  std::string broken = Journal("broken.jsonl", CellStatus::kFails, 0);
  EXPECT_EQ(Run({"compare", before, same}), 0) << err_.str();
  EXPECT_NE(out_.str().find("tune-matrix compare: no changes; 1 cell unchanged"), std::string::npos) << out_.str();
  EXPECT_EQ(Run({"compare", before, slower}), 1);
  EXPECT_NE(out_.str().find("slower (1):\n  tiny/lora  cpu (avx512_bf16, torch 2.11.0)  1000.0 -> 500.0 tok/s (-50.0%"),
            std::string::npos)
      << out_.str();
  EXPECT_EQ(Run({"compare", before, broken}), 1);
  EXPECT_NE(out_.str().find("newly broken (1):"), std::string::npos) << out_.str();
  // Fixed is not a regression; a looser threshold makes the slowdown noise.
  EXPECT_EQ(Run({"compare", broken, before}), 0);
  EXPECT_EQ(Run({"compare", before, slower, "--max-slowdown", "0.6"}), 0) << out_.str();
}

TEST_F(CompareCliTest, BadInputExitsTwoWithOneError) {
  std::string journal = Journal("a.jsonl", CellStatus::kRuns, 1000);
  std::string not_journal = scratch_.path() + "/config.yaml";
  ASSERT_TRUE(WriteFileAtomically(not_journal, "lr: 1\n").ok());
  EXPECT_EQ(Run({"compare", journal}), 2);
  EXPECT_NE(err_.str().find("give two journals or commits to compare"), std::string::npos) << err_.str();
  EXPECT_EQ(Run({"compare", journal, not_journal}), 2);
  // One line naming the file and line (the reason is ReadJournal's).
  EXPECT_EQ(err_.str().rfind("error: tune-matrix compare: " + not_journal + ":1: ", 0), 0u) << err_.str();
  std::string err = err_.str();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(Run({"compare", journal, journal, "--max-slowdown", "2"}), 2);
  EXPECT_NE(err_.str().find("--max-slowdown must be in [0, 1)"), std::string::npos) << err_.str();
  EXPECT_EQ(Run({"compare", journal, journal, "--bogus"}), 2);
}

// `report --repo-url` names the address the page links commits to; one that is no web address is refused
// before anything is written, '' asks for plain text.
TEST_F(CompareCliTest, ReportTakesTheRepositorysWebAddressOrRefusesIt) {
  const std::string dir = scratch_.path() + "/reports";
  EXPECT_EQ(Run({"report", "--reports-dir", dir, "--repo-url", "/srv/git/tune-matrix"}), 2);
  EXPECT_EQ(err_.str().rfind("error: tune-matrix report: --repo-url '/srv/git/tune-matrix' is no repository web "
                             "address; give one such as https://github.com/OWNER/REPO, or '' for commits as plain text\n",
                             0),
            0u)
      << err_.str();
  EXPECT_FALSE(PathExists(dir));
  ASSERT_EQ(Run({"report", "--reports-dir", dir, "--repo-url", "git@github.com:owner/tune-matrix.git"}), 0) << err_.str();
  StatusOr<std::string> page = ReadFile(dir + "/index.html");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(PageRepositoryUrl(*page), "https://github.com/owner/tune-matrix");
  ASSERT_EQ(Run({"report", "--reports-dir", dir, "--repo-url", ""}), 0) << err_.str();
  EXPECT_EQ(PageRepositoryUrl(*ReadFile(dir + "/index.html")), "");
}

}  // namespace
}  // namespace tmx::matrix
