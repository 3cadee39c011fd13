// A git repository in a scratch folder for tests that read files at commits (git_show_test, compare_test).
// git runs as an argv vector through SubprocessSet, with an identity of its own and no user configuration.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/file_util.h"
#include "base/subprocess.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix::testing {

class GitRepo {
 public:
  GitRepo() { Git({"init", "-q", "-b", "main"}); }

  const std::string& dir() const { return scratch_.path(); }

  // Runs git in the repository; returns its merged output. Fails the test when git fails.
  std::string Git(const std::vector<std::string>& args) const {
    SubprocessSet set;
    SubprocessOptions o;
    o.argv = {"git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.working_dir = dir();
    o.timeout_s = 60;
    o.env = {{"GIT_CONFIG_GLOBAL", "/dev/null"}, {"GIT_CONFIG_NOSYSTEM", "1"}};
    StatusOr<Subprocess*> child = set.Add(o);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return "";
    while (set.running() > 0) set.DoWork(1000);
    SubprocessResult r = set.NextFinished()->result();
    EXPECT_TRUE(r.Succeeded()) << "git " << args.front() << ": " << r.output_tail;
    return r.output_tail;
  }

  // Writes `text` to `path` in the work tree and commits it; returns the new commit's id.
  std::string Commit(const std::string& path, const std::string& text) const {
    EXPECT_TRUE(MakeDirs(ParentDir(dir() + "/" + path)).ok());
    EXPECT_TRUE(WriteFileAtomically(dir() + "/" + path, text).ok());
    Git({"add", path});
    Git({"commit", "-q", "-m", "change " + path});
    std::string id = Git({"rev-parse", "HEAD"});
    return id.substr(0, 40);
  }

 private:
  test::ScratchDir scratch_{"git_repo"};
};

}  // namespace tmx::matrix::testing
