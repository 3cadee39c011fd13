#include "harness/hub_listing.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/text.h"

namespace tmx {
namespace {

// `part` as a case-insensitive file system may take it: lower-case ASCII, without the code points HFS+
// ignores in names (U+200C-U+200F, U+202A-U+202E, U+206A-U+206F, U+FEFF), and without the trailing dots
// and spaces NTFS drops. (Git's verify_path folds the same way before it compares with ".git".)
std::string FoldedName(const std::string& part) {
  std::string folded;
  for (size_t i = 0; i < part.size(); ++i) {
    const auto b = [&](size_t k) { return i + k < part.size() ? static_cast<unsigned char>(part[i + k]) : 0; };
    const bool ignorable =
        (b(0) == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x8C && b(2) <= 0x8F) || (b(2) >= 0xAA && b(2) <= 0xAE))) ||
        (b(0) == 0xE2 && b(1) == 0x81 && b(2) >= 0xAA && b(2) <= 0xAF) ||
        (b(0) == 0xEF && b(1) == 0xBB && b(2) == 0xBF);
    if (ignorable) {
      i += 2;
      continue;
    }
    folded += static_cast<char>(std::tolower(b(0)));
  }
  while (!folded.empty() && (folded.back() == '.' || folded.back() == ' ')) folded.pop_back();
  return folded;
}

// Which control folder the component `part` of a listed path (at `depth`, 0 for the first; `next` the
// component after it) is, with why a download must not write into it; "" for an ordinary name.
std::string ControlFolder(const std::string& part, size_t depth, const std::string& next) {
  const std::string folded = FoldedName(part);
  if (folded == ".git" || folded == "git~1") {
    return "git's control folder (" + TerminalText(part) +
           ": a file there configures the git checkout it lands in, e.g. core.fsmonitor runs a command on the next "
           "`git status`; git refuses such paths in trees)";
  }
  if (folded == ".hg" || folded == ".svn" || folded == ".bzr") {
    return "a version-control tool's control folder (" + TerminalText(part) +
           ": a file there configures the checkout it lands in, e.g. Mercurial's hooks run commands)";
  }
  if (depth == 0 && folded == ".cache" && FoldedName(next) == "huggingface") {
    return "huggingface_hub's control folder (.cache/huggingface: its record of what a folder's downloads hold)";
  }
  return "";
}

// An entry of a listing as a message shows it: its JSON, cut to 200 bytes, with TerminalText's escapes.
std::string Excerpt(const nlohmann::json& entry) {
  std::string text = entry.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return TerminalText(text.size() > 200 ? text.substr(0, 200) + "..." : text);
}

// Whether the JSON `text` nests arrays and objects deeper than `limit` (brackets inside strings not counted).
bool NestedDeeperThan(const std::string& text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{') && ++depth > limit) {
      return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// Where the authority of `url` ("scheme://authority/...") starts and ends; npos when there is no "://".
std::pair<size_t, size_t> Authority(const std::string& url) {
  size_t start = url.find("://");
  if (start == std::string::npos) return {std::string::npos, std::string::npos};
  start += 3;
  return {start, std::min(url.find_first_of("/?#", start), url.size())};
}

}  // namespace

StatusOr<std::vector<HubFile>> ParseTreeListing(const std::string& json, const std::string& what, int64_t max_entries,
                                                int64_t* entries) {
  if (NestedDeeperThan(json, kMaxListingDepth)) {
    return Status::IoError(
        what + ": the Hub's file listing nests JSON deeper than " + std::to_string(kMaxListingDepth) +
        " levels (tune download's bound; a listing needs 3); refused, nothing downloaded; fix: check "
        "HF_ENDPOINT points at a trustworthy Hugging Face Hub");
  }
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    return Status::IoError(what + ": the Hub's file listing is not a JSON array (the start: '" +
                           TerminalText(json.substr(0, 80)) +
                           "'); fix: check HF_ENDPOINT points at a Hugging Face Hub");
  }
  const int64_t before = entries != nullptr ? *entries : 0;
  if (before + static_cast<int64_t>(j.size()) > max_entries) {
    return Status::IoError(what + ": the Hub's file listing has more than " + std::to_string(max_entries) +
                           " entries (tune download's bound on a listing, files and folders of all pages together); "
                           "refused, nothing downloaded; fix: check HF_ENDPOINT points at a trustworthy Hub (a repo "
                           "this large is beyond tune download)");
  }
  if (entries != nullptr) *entries = before + static_cast<int64_t>(j.size());
  std::vector<HubFile> files;
  for (const nlohmann::json& e : j) {
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string()) {
      return Status::IoError(what + ": an entry of the Hub's file listing has no \"type\": " + Excerpt(e));
    }
    if (e["type"] != "file") continue;
    if (!e.contains("path") || !e["path"].is_string() || !e.contains("size") || !e["size"].is_number_integer() ||
        e["size"].get<int64_t>() < 0) {
      return Status::IoError(what + ": a file of the Hub's file listing lacks a \"path\" or a \"size\": " + Excerpt(e));
    }
    HubFile f;
    f.path = e["path"].get<std::string>();
    f.size = e["size"].get<int64_t>();
    if (e.contains("oid") && e["oid"].is_string()) f.git_oid = e["oid"].get<std::string>();
    if (e.contains("lfs") && e["lfs"].is_object()) {
      const nlohmann::json& lfs = e["lfs"];
      if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lfs["oid"].get<std::string>();
      if (lfs.contains("size") && lfs["size"].is_number_integer()) {
        if (lfs["size"].get<int64_t>() < 0) {  // found by fuzzing: a negative size went on to the download
          return Status::IoError(what + ": a file of the Hub's file listing has a negative LFS size: " + Excerpt(e));
        }
        f.size = lfs["size"].get<int64_t>();
      }
    }
    files.push_back(std::move(f));
  }
  return files;
}

Status CheckRepoPath(const std::string& path, const std::string& repo_id) {
  auto refuse = [&](const std::string& why) {
    const std::string shown = TerminalText(path.size() > 300 ? path.substr(0, 300) + "..." : path);
    return Status::FailedPrecondition(repo_id + ": the Hub's file listing names '" + shown + "', which " + why +
                                      "; refused, nothing downloaded; fix: check HF_ENDPOINT points at a "
                                      "trustworthy Hub");
  };
  if (path.empty()) return refuse("is empty");
  if (path.size() > 4096) return refuse("is longer than 4096 bytes (a file system's path limit)");
  if (path[0] == '/') return refuse("is an absolute path");
  if (path.find('\\') != std::string::npos || path.find('\0') != std::string::npos) {
    return refuse("holds a backslash or NUL");
  }
  std::vector<std::string> parts = SplitList(path + "/x", '/');  // "/x": an empty last component stays visible
  if (parts.size() != static_cast<size_t>(std::count(path.begin(), path.end(), '/')) + 2) {
    return refuse("has an empty component (it could name the output folder itself)");
  }
  parts.pop_back();
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part == "." || part == "..")
      return refuse("has a '" + part + "' component (it could escape the output folder)");
    if (part.size() > 255) return refuse("has a component longer than 255 bytes (a file system's name limit)");
    std::string control = ControlFolder(part, i, i + 1 < parts.size() ? parts[i + 1] : "");
    if (!control.empty()) return refuse("lies in " + control);
  }
  if (path.size() > 11 && path.compare(path.size() - 11, 11, ".incomplete") == 0) {
    return refuse("ends in .incomplete, the name this download gives partial files");
  }
  return Status::OK();
}

Status ValidateRepoId(const std::string& repo_id) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("'" + TerminalText(repo_id) + "' is not a Hub repo id: " + why +
                                   "; fix: give it as on its Hub page, owner/name (letters, digits, '-', '_' and '.', "
                                   "each part starting and ending with a letter, digit or '_'), e.g. "
                                   "meta-llama/Llama-3.2-1B-Instruct");
  };
  const std::vector<std::string> parts = SplitList(repo_id, '/');
  if (parts.empty() || parts.size() > 2 || std::count(repo_id.begin(), repo_id.end(), '/') != parts.size() - 1) {
    return refuse("it must be one name or owner/name");
  }
  if (repo_id.find("--") != std::string::npos || repo_id.find("..") != std::string::npos) {
    return refuse("'--' and '..' are not allowed in it");
  }
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const std::string& part : parts) {
    if (part.size() > 96) return refuse("'" + TerminalText(part.substr(0, 20)) + "...' is longer than 96 characters");
    if (!std::all_of(part.begin(), part.end(), [&](char c) { return word(c) || c == '-' || c == '.'; })) {
      return refuse("'" + TerminalText(part) + "' holds a character other than letters, digits, '-', '_' and '.'");
    }
    if (!word(part.front()) || !word(part.back())) {
      return refuse("'" + part + "' starts or ends with '" +
                    std::string(1, word(part.front()) ? part.back() : part.front()) + "'");
    }
  }
  return Status::OK();
}

std::string UrlOrigin(const std::string& url) {
  const auto [start, end] = Authority(url);
  if (start == std::string::npos) return "";
  std::string scheme = url.substr(0, start - 3);
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") return "";
  const std::string authority = url.substr(start, end - start);
  const bool plain = std::all_of(authority.begin(), authority.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           (c != '\0' && std::strchr("-._~%!$&'()*+,;=:@[]", c) != nullptr);  // strchr finds the NUL too
  });
  if (!plain || std::count(authority.begin(), authority.end(), '@') > 1) return "";
  std::string host = authority.substr(authority.find('@') == std::string::npos ? 0 : authority.find('@') + 1);
  std::string port = scheme == "http" ? "80" : "443";
  const size_t colon = host.find(':', host.rfind(']') == std::string::npos ? 0 : host.rfind(']'));
  if (colon != std::string::npos) {
    port = host.substr(colon + 1);
    host.resize(colon);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) return "";
    const int number = std::stoi(port);
    if (number < 1 || number > 65535) return "";
    port = std::to_string(number);
  }
  if (host.empty() || host.find('%') != std::string::npos) return "";
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return scheme + "://" + host + ":" + port;
}

bool SameOrigin(const std::string& url, const std::string& endpoint) {
  const std::string origin = UrlOrigin(url);
  return !origin.empty() && origin == UrlOrigin(endpoint);
}

std::string ShownUrl(const std::string& url) {
  const auto [start, end] = Authority(url);
  const size_t at = start == std::string::npos ? std::string::npos : url.rfind('@', end - 1);
  if (at == std::string::npos || at < start) return TerminalText(url);
  return TerminalText(url.substr(0, start) + url.substr(at + 1));
}

std::string NextPageUrl(const std::string& link_header, const std::string& page_url) {
  size_t rel = link_header.find("rel=\"next\"");
  if (rel == std::string::npos) return "";
  size_t close = link_header.rfind('>', rel);
  size_t open = close == std::string::npos ? std::string::npos : link_header.rfind('<', close);
  if (open == std::string::npos) return "";
  std::string next = link_header.substr(open + 1, close - open - 1);
  if (next.rfind("/", 0) == 0 && next.rfind("//", 0) != 0) {
    const auto [start, end] = Authority(page_url);
    if (start != std::string::npos) next = page_url.substr(0, end) + next;
  }
  return next;
}

bool MatchesPattern(const std::string& path, const std::string& pattern) {
  std::string p = !pattern.empty() && pattern.back() == '/' ? pattern + "*" : pattern;
  return fnmatch(p.c_str(), path.c_str(), 0) == 0;
}

}  // namespace tmx
