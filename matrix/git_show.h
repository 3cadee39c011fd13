// Reading files as a git commit of this checkout holds them, through a `git` child process (an argv vector
// run by SubprocessSet, never a shell string).
#pragma once

#include <string>

#include "base/status.h"

namespace tmx::matrix {

// The full commit id `revision` names in the repository at `repo_dir` (`git rev-parse --verify`), e.g. for
// "HEAD~1", a branch, a tag or an abbreviated id. InvalidArgument when it names no commit (or starts with
// '-', which git would read as an option); Unavailable when git cannot be started.
StatusOr<std::string> ResolveCommit(const std::string& repo_dir, const std::string& revision);

// The bytes of `path` (relative to the repository's root) at `commit` (`git show <commit>:<path>`).
// NotFound when the commit has no such file; Unavailable when git cannot be started.
StatusOr<std::string> FileAtCommit(const std::string& repo_dir, const std::string& commit, const std::string& path);

// The web address of a git remote's URL, for links to commits: "git@github.com:o/r.git" and
// "https://user:token@github.com/o/r.git" give "https://github.com/o/r" (credentials and ".git" dropped);
// "ssh://git@host/o/r" gives "https://host/o/r". "" for what is no such address (a local path, file://).
std::string RepositoryWebUrl(const std::string& remote);

// RepositoryWebUrl of the `origin` remote of the repository holding `dir`; "" when there is none (no git, not
// a repository, no such remote).
std::string OriginWebUrl(const std::string& dir);

}  // namespace tmx::matrix
