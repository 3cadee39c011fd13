#include "harness/hub_listing.h"

#include <fnmatch.h>

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tmx {

StatusOr<std::vector<HubFile>> ParseTreeListing(const std::string& json, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) {
    return Status::IoError(what + ": the Hub's file listing is not a JSON array (the start: '" +
                           json.substr(0, 80) + "'); fix: check HF_ENDPOINT points at a Hugging Face Hub");
  }
  std::vector<HubFile> files;
  for (const nlohmann::json& e : j) {
    if (!e.is_object() || !e.contains("type") || !e["type"].is_string()) {
      return Status::IoError(what + ": an entry of the Hub's file listing has no \"type\": " + e.dump());
    }
    if (e["type"] != "file") continue;
    if (!e.contains("path") || !e["path"].is_string() || !e.contains("size") || !e["size"].is_number_integer() ||
        e["size"].get<int64_t>() < 0) {
      return Status::IoError(what + ": a file of the Hub's file listing lacks a \"path\" or a \"size\": " + e.dump());
    }
    HubFile f;
    f.path = e["path"].get<std::string>();
    f.size = e["size"].get<int64_t>();
    if (e.contains("oid") && e["oid"].is_string()) f.git_oid = e["oid"].get<std::string>();
    if (e.contains("lfs") && e["lfs"].is_object()) {
      const nlohmann::json& lfs = e["lfs"];
      if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lfs["oid"].get<std::string>();
      if (lfs.contains("size") && lfs["size"].is_number_integer()) f.size = lfs["size"].get<int64_t>();
    }
    files.push_back(std::move(f));
  }
  return files;
}

Status CheckRepoPath(const std::string& path, const std::string& repo_id) {
  auto refuse = [&](const std::string& why) {
    return Status::FailedPrecondition(repo_id + ": the Hub's file listing names '" + path + "', which " + why +
                                      "; refused, nothing downloaded; fix: check HF_ENDPOINT points at a "
                                      "trustworthy Hub");
  };
  if (path.empty()) return refuse("is empty");
  if (path[0] == '/') return refuse("is an absolute path");
  if (path.find('\\') != std::string::npos || path.find('\0') != std::string::npos) {
    return refuse("holds a backslash or NUL");
  }
  for (size_t b = 0; b <= path.size();) {
    size_t e = std::min(path.find('/', b), path.size());
    std::string part = path.substr(b, e - b);
    if (part.empty() || part == "." || part == "..") return refuse("has a '" + part + "' component (it could escape the output folder)");
    b = e + 1;
  }
  if (path.size() > 11 && path.compare(path.size() - 11, 11, ".incomplete") == 0) {
    return refuse("ends in .incomplete, the name this download gives partial files");
  }
  return Status::OK();
}

bool MatchesPattern(const std::string& path, const std::string& pattern) {
  std::string p = !pattern.empty() && pattern.back() == '/' ? pattern + "*" : pattern;
  return fnmatch(p.c_str(), path.c_str(), 0) == 0;
}

}  // namespace tmx
