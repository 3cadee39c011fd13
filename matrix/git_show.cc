#include "matrix/git_show.h"

#include <memory>
#include <vector>

#include "base/subprocess.h"
#include "matrix/escape.h"

namespace tmx::matrix {
namespace {

// Journals are text of some megabytes; this bounds what a file at a commit may take in memory.
constexpr size_t kMaxFileBytes = size_t{256} << 20;

// Runs git with `args` in `repo_dir`; the output is stdout and stderr merged.
StatusOr<SubprocessResult> RunGit(const std::string& repo_dir, const std::vector<std::string>& args) {
  SubprocessSet set;
  SubprocessOptions o;
  o.argv = {"git"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.working_dir = repo_dir;
  o.timeout_s = 120;
  o.tail_bytes = kMaxFileBytes + 1;
  // No pager, no prompt for credentials, the same messages whatever the user's locale.
  o.env = {{"GIT_PAGER", "cat"}, {"GIT_TERMINAL_PROMPT", "0"}, {"LC_ALL", "C"}};
  StatusOr<Subprocess*> child = set.Add(o);
  if (!child.ok()) {
    return Status::Unavailable("cannot run git (" + child.status().message() +
                               "); fix: install git, or compare journal files instead of commits");
  }
  while (set.running() > 0) {
    if (set.DoWork(1000)) return Status::Internal("interrupted while running git");
  }
  SubprocessResult r = set.NextFinished()->result();
  if (r.output_tail.size() > kMaxFileBytes) {
    return Status::InvalidArgument("git " + args.front() + ": output larger than " +
                                   std::to_string(kMaxFileBytes >> 20) + " MiB");
  }
  return r;
}

// git's message, one line.
std::string Message(const SubprocessResult& r) {
  std::string text = CollapseLineBreaks(r.output_tail);
  return text.empty() ? r.Describe() : text;
}

}  // namespace

StatusOr<std::string> ResolveCommit(const std::string& repo_dir, const std::string& revision) {
  if (revision.empty() || revision[0] == '-') {
    return Status::InvalidArgument("'" + revision + "' is not a git revision");
  }
  StatusOr<SubprocessResult> r = RunGit(repo_dir, {"rev-parse", "--verify", "--quiet", revision + "^{commit}"});
  if (!r.ok()) return r.status();
  std::string id = r->output_tail;
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  if (!r->Succeeded() || id.find_first_not_of("0123456789abcdef") != std::string::npos || id.size() < 40) {
    std::string said = CollapseLineBreaks(r->output_tail);
    return Status::InvalidArgument("'" + revision + "' is not a commit of the git repository at " + repo_dir +
                                   (r->Succeeded() || said.empty() ? "" : " (git: " + said + ")"));
  }
  return id;
}

StatusOr<std::string> FileAtCommit(const std::string& repo_dir, const std::string& commit, const std::string& path) {
  StatusOr<SubprocessResult> r = RunGit(repo_dir, {"show", "--no-textconv", commit + ":" + path});
  if (!r.ok()) return r.status();
  if (!r->Succeeded()) {
    return Status::NotFound(commit.substr(0, 12) + ":" + path + ": not in that commit (git show: " + Message(*r) + ")");
  }
  return r->output_tail;
}

std::string RepositoryWebUrl(const std::string& remote) {
  std::string url = remote;
  while (!url.empty() && (url.back() == '\n' || url.back() == '\r' || url.back() == '/')) url.pop_back();
  if (url.size() > 4 && url.compare(url.size() - 4, 4, ".git") == 0) url.resize(url.size() - 4);
  std::string host_path;
  for (const char* scheme : {"https://", "http://", "ssh://", "git://"}) {
    if (url.rfind(scheme, 0) == 0) host_path = url.substr(std::string(scheme).size());
  }
  if (host_path.empty()) {  // scp-like: [user@]host:path
    const size_t colon = url.find(':');
    if (colon == std::string::npos || url.find('/') < colon || url.find("://") != std::string::npos ||
        url.compare(colon + 1, 1, "/") == 0) {
      return "";  // a local path, or a scheme with no web address (file://)
    }
    host_path = url.substr(0, colon) + "/" + url.substr(colon + 1);
  }
  const size_t slash = host_path.find('/');
  const size_t at = host_path.rfind('@', slash);
  if (at != std::string::npos) host_path = host_path.substr(at + 1);  // no user or token in a page
  const size_t port = host_path.find(':');
  if (port != std::string::npos && port < host_path.find('/')) {
    host_path.erase(port, host_path.find('/') - port);  // an ssh port is not the web server's
  }
  if (host_path.find('/') == std::string::npos || host_path[0] == '/') return "";
  for (char c : host_path) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '<' || c == '>' || c == '\\') return "";
  }
  return "https://" + host_path;
}

std::string OriginWebUrl(const std::string& dir) {
  StatusOr<SubprocessResult> r = RunGit(dir, {"config", "--get", "remote.origin.url"});
  if (!r.ok() || !r->Succeeded()) return "";
  return RepositoryWebUrl(r->output_tail);
}

}  // namespace tmx::matrix
