// What `tune download` reads from a Hugging Face Hub and must not trust: the tree listing (its JSON and the
// file paths it names). Network-free and torch-free, so the fuzzer runs it (fuzz/targets.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx {

// A file of the repo as the tree listing gives it.
struct HubFile {
  std::string path;  // relative to the repo root, '/'-separated
  int64_t size = 0;
  std::string sha256;   // the LFS object id ("" for a file stored in git)
  std::string git_oid;  // the git blob sha1 (of the LFS pointer for an LFS file)
};

// Bounds on what a listing may hold, all its pages together: far above the Hub's largest repos, far below
// what would exhaust memory (a hostile listing that links to itself, or sends huge pages, ends with an error
// naming the bound, not with std::bad_alloc).
struct HubListingBounds {
  int64_t max_entries = 500000;                // files and folders
  int64_t max_bytes = int64_t{256} << 20;      // JSON
  int64_t max_page_bytes = int64_t{32} << 20;  // one page's JSON (the Hub's pages are about 1,000 entries)
  int max_pages = 10000;
};

// The JSON nesting a listing may have (it needs 3: array, entry, lfs): deeper input is refused before it is
// parsed, so nothing recursive ever walks it.
inline constexpr int kMaxListingDepth = 32;

// Parses one page of `GET {endpoint}/api/models/{repo}/tree/{revision}?recursive=true`: files only
// (directories dropped). `*entries` (may be null) counts the entries (files and folders) of the listing's
// pages read so far: this page's are added, and at most `max_entries` are allowed in all. `what` names the
// listing in errors; IoError naming the bound for more entries or deeper nesting.
StatusOr<std::vector<HubFile>> ParseTreeListing(const std::string& json, const std::string& what,
                                                int64_t max_entries = HubListingBounds().max_entries,
                                                int64_t* entries = nullptr);

// OK when `path` from a listing may be written under the output folder: relative, no `.`/`..`/empty
// components, at most 4096 bytes with components of at most 255 (Linux's limits), no backslash or NUL, not ending in
// `.incomplete`, and no control folder among its components:
// `.git` in any case (also as HFS+ and NTFS fold names: ignorable code points, trailing dots and spaces,
// `git~1`), `.hg`, `.svn`, `.bzr`, and a leading `.cache/huggingface`. Otherwise FailedPrecondition naming it.
Status CheckRepoPath(const std::string& path, const std::string& repo_id);

// OK when `repo_id` is a repo id as the Hub validates them (huggingface_hub's validate_repo_id): "name" or
// "owner/name", each part of letters, digits, '-', '_' and '.', starting and ending with a letter, digit or
// '_', at most 96 characters; no "--" or ".." anywhere. So no part is "." or "..", and the folder named after
// it stays where it is put. Otherwise InvalidArgument naming the rule it breaks.
Status ValidateRepoId(const std::string& repo_id);

// The origin (scheme, host and port) of an absolute http or https URL, lower-case, with the scheme's default
// port when it names none: "https://HF.co/x" -> "https://hf.co:443". "" when `url` is not one, or when its
// authority holds anything but the characters a host, a port and user information are written with, or
// more than one '@' (so that no disagreement between this parser and libcurl's over a backslash, a space or
// a second '@' can make it name another host than the one connected to).
std::string UrlOrigin(const std::string& url);

// Whether `url` is on `endpoint`'s own origin (scheme, host and port): the only URLs the token goes to.
bool SameOrigin(const std::string& url, const std::string& endpoint);

// `url` without its user information ("https://user:secret@hub.example/x" -> "https://hub.example/x"), and
// TerminalText's escapes: the form of a URL in any message.
std::string ShownUrl(const std::string& url);

// The next page of a listing from its `Link` header (`<url>; rel="next"`, among other links), made absolute
// against `page_url` when it is a path; "" when there is none.
std::string NextPageUrl(const std::string& link_header, const std::string& page_url);

// fnmatch-style, as huggingface_hub's ignore_patterns: `*` also matches `/`; a pattern ending in `/` matches
// everything under that folder.
bool MatchesPattern(const std::string& path, const std::string& pattern);

}  // namespace tmx
