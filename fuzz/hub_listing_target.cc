#include "fuzz/hub_listing_target.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "base/text.h"
#include "harness/hub_listing.h"

namespace tmx::fuzz {
namespace {

[[noreturn]] void Broken(const std::string& what, const std::string& subject) {
  std::fprintf(stderr, "fuzz: invariant broken: %s: '%s'\n", what.c_str(), TerminalText(subject).c_str());
  std::abort();
}

// Whether `shown` could act on a terminal: a C0 control or DEL, a C1 control (U+0080-U+009F) or U+202E.
bool ActsOnTerminal(const std::string& shown) {
  for (size_t i = 0; i < shown.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(shown[i]);
    if (c < 0x20 || c == 0x7F) return true;
    const unsigned char next = i + 1 < shown.size() ? static_cast<unsigned char>(shown[i + 1]) : 0;
    if (c == 0xC2 && next >= 0x80 && next <= 0x9F) return true;
    if (shown.compare(i, 3, "\xe2\x80\xae") == 0) return true;
  }
  return false;
}

// A component git would take for ".git" on a case-insensitive file system, by the ASCII rules (case,
// trailing dots and spaces) and the zero-width joiners HFS+ ignores.
bool LooksLikeDotGit(std::string part) {
  for (const char* ignorable : {"\xe2\x80\x8c", "\xe2\x80\x8d", "\xef\xbb\xbf"}) {
    for (size_t at; (at = part.find(ignorable)) != std::string::npos;) part.erase(at, 3);
  }
  for (char& c : part) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!part.empty() && (part.back() == '.' || part.back() == ' ')) part.pop_back();
  return part == ".git" || part == "git~1";
}

void CheckAcceptedPath(const HubFile& f) {
  if (!CheckRepoPath(f.path, "o/r").ok()) return;
  if (f.path.empty() || f.path[0] == '/' || f.path.find('\\') != std::string::npos ||
      f.path.find('\0') != std::string::npos || f.path.size() > 4096) {
    Broken("CheckRepoPath accepted an absolute, empty, over-long or backslashed path", f.path);
  }
  for (const std::string& part : SplitList("/" + f.path + "/", '/')) {
    if (part == "." || part == ".." || LooksLikeDotGit(part)) {
      Broken("CheckRepoPath accepted a path leaving the folder or into .git", f.path);
    }
  }
  if (f.path.find("//") != std::string::npos || f.path.back() == '/') {
    Broken("CheckRepoPath accepted an empty component", f.path);
  }
}

void CheckUrl(const std::string& url) {
  const std::string shown = ShownUrl(url);
  if (ActsOnTerminal(shown)) Broken("ShownUrl left a control character", url);
  const std::string origin = UrlOrigin(url);
  if (origin.empty()) return;
  if ((origin.rfind("http://", 0) != 0 && origin.rfind("https://", 0) != 0) ||
      origin.find_first_of("@\\ /", origin.find("://") + 3) != std::string::npos ||
      origin.find_last_not_of("0123456789") != origin.rfind(':')) {
    Broken("UrlOrigin gave something other than scheme://host:port: " + origin, url);
  }
  if (UrlOrigin(shown) != origin) Broken("ShownUrl changed the URL's origin", url);
  const size_t authority = shown.find("://") + 3;
  if (shown.find('@') < std::min(shown.find_first_of("/?#", authority), shown.size())) {
    Broken("ShownUrl kept user information", url);
  }
  if (!SameOrigin(url, url)) Broken("a URL with an origin is not of its own origin", url);
}

}  // namespace

bool RunHubListing(const std::string& input) {
  int64_t entries = 0;
  StatusOr<std::vector<HubFile>> files = ParseTreeListing(input, "fuzz", 1000, &entries);
  if (ActsOnTerminal(files.status().message())) Broken("a listing's error leaves a control character", input);
  const std::string prefix = input.substr(0, 2048);
  CheckUrl(prefix);
  const std::string next = NextPageUrl(prefix, "https://hub.example/api/models/o/r/tree/main?recursive=true");
  if (!next.empty()) CheckUrl(next);
  Status repo = ValidateRepoId(prefix);
  if (ActsOnTerminal(repo.message())) Broken("a repo id's error leaves a control character", prefix);
  if (repo.ok()) {
    const std::string name = prefix.substr(prefix.rfind('/') + 1);
    if (name.empty() || name == "." || name == ".." || prefix.find("..") != std::string::npos) {
      Broken("ValidateRepoId accepted an id whose folder is not its own", prefix);
    }
  }
  if (!files.ok()) return false;
  if (entries < static_cast<int64_t>(files->size()) || entries > 1000) Broken("the entry count", input);
  for (const HubFile& f : *files) {
    if (f.size < 0) Broken("a listed file with a negative size was accepted", f.path);
    CheckAcceptedPath(f);
    Status s = CheckRepoPath(f.path, "o/r");
    if (ActsOnTerminal(s.message()) || ActsOnTerminal(TerminalText(f.path))) {
      Broken("a listed name reaches the terminal with a control character", f.path);
    }
  }
  return true;
}

std::vector<std::string> HubListingDictionary() {
  return {"\"type\"",
          "\"file\"",
          "\"directory\"",
          "\"path\"",
          "\"size\"",
          "\"oid\"",
          "\"lfs\"",
          "\"pointerSize\"",
          "[",
          "]",
          "{",
          "}",
          ",",
          ":",
          "\"",
          "\\u001b",
          "\\u0000",
          "\\\\",
          "\\/",
          ".git",
          ".GIT",
          "git~1",
          ".hg",
          "..",
          ".",
          "/",
          "//",
          ".incomplete",
          ".cache/huggingface/",
          "\xe2\x80\x8c",
          "\xef\xbb\xbf",
          "\xc2\x9b",
          "\xe2\x80\xae",
          "9223372036854775807",
          "-1",
          "1e400",
          "<https://",
          ">; rel=\"next\"",
          "http://",
          "@",
          ":",
          "[::1]",
          "%2e",
          "%40",
          "huggingface.co",
          "/api/models/o/r/tree/main?recursive=true&cursor=",
          "o/r"};
}

std::vector<std::string> HubListingSeeds() {
  const std::string file = R"({"type":"file","oid":"1111111111111111111111111111111111111111","size":12,"path":")";
  return {
      R"([{"type":"directory","oid":"d","size":0,"path":"original"},)" + file + R"(config.json"},)" + file +
          R"(original/w.pth","lfs":{"oid":"abc","size":9000,"pointerSize":134}}])",
      "[" + file + R"(.gitattributes"},)" + file + R"(.git/config"},)" + file + R"(sub/.GIT./hooks/x"}])",
      "[" + file + R"(a/../../b"},)" + file + R"(/etc/passwd"},)" + file + R"(x\\y"},)" + file + R"(./c"}])",
      "[" + file + R"(evil\u001b]0;t\u0007.txt"},)" + file + "two\\nlines\"}," + file + "c1\xc2\x9b\"}]",
      "[" + file + ".g\xe2\x80\x8cit/x\"}," + file + R"(git~1/config"},)" + file + R"(.cache/huggingface/x"}])",
      R"([{"type":"file","path":"a","size":-1},{"type":7},[],{"type":"file","path":["x"],"size":1}])",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      "<https://hub.example/api/models/o/r/tree/main?cursor=2>; rel=\"next\"",
      "<https://user:pw@evil.example\\@hub.example/x>; rel=\"prev\", </api/x?c=1>; rel=\"next\"",
      "https://a@b@hub.example:443/x\x1b[2J",
      "http://[::1]:65535/a?b#c",
      "meta-llama/Llama-3.2-1B-Instruct",
      "owner/.",
  };
}

}  // namespace tmx::fuzz
