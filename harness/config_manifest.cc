#include "harness/config_manifest.h"

#include <set>
#include <sstream>
#include <stdexcept>

namespace tmx {

// Defined in the generated config_manifest_text.cc: configs/MANIFEST's text.
extern const char* const kConfigManifestText;

namespace {

bool IsNamePart(const std::string& part) {
  if (part.empty() || part == "." || part == "..") return false;
  for (char c : part) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsConfigName(const std::string& name) {
  std::stringstream parts(name);
  std::string part;
  int count = 0;
  while (std::getline(parts, part, '/')) {
    if (!IsNamePart(part)) return false;
    ++count;
  }
  return count > 0 && name.back() != '/';
}

}  // namespace

StatusOr<std::vector<ManifestEntry>> ParseConfigManifest(const std::string& text, const std::string& file) {
  std::vector<ManifestEntry> entries;
  std::set<std::string> seen;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string where = file + ":" + std::to_string(number) + ": ";
    if (size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::vector<std::string> columns;
    for (std::string column; fields >> column;) columns.push_back(column);
    if (columns.empty()) continue;
    if (columns.size() != 3) {
      return Status::InvalidArgument(where + "expected 3 columns (name recipe source), found " +
                                     std::to_string(columns.size()));
    }
    ManifestEntry e;
    e.name = columns[0];
    e.recipe = columns[1];
    e.line = number;
    if (!IsConfigName(e.name)) {
      return Status::InvalidArgument(where + "'" + e.name +
                                     "' is not a config name (a relative path of letters, digits, '.', '_' and '-')");
    }
    if (!seen.insert(e.name).second) {
      return Status::InvalidArgument(where + "'" + e.name + "' is listed twice; keep one line");
    }
    const std::string& source = columns[2];
    if (source == "torchtune") {
      e.source = ManifestEntry::Source::kTorchtune;
      e.torchtune_name = e.name;
    } else if (source.rfind("torchtune:", 0) == 0 && source.size() > 10) {
      e.source = ManifestEntry::Source::kTorchtune;
      e.torchtune_name = source.substr(10);
    } else if (source.rfind("tiny:", 0) == 0 && source.size() > 5) {
      e.source = ManifestEntry::Source::kTiny;
      e.tiny_family = source.substr(5);
    } else if (source == "hand") {
      e.source = ManifestEntry::Source::kHand;
    } else {
      return Status::InvalidArgument(where + "unknown source '" + source + "' for '" + e.name +
                                     "'; use torchtune, torchtune:NAME, tiny:FAMILY or hand");
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

const std::vector<ManifestEntry>& BuiltinConfigManifest() {
  static const std::vector<ManifestEntry> manifest = [] {
    StatusOr<std::vector<ManifestEntry>> parsed = ParseConfigManifest(kConfigManifestText, "configs/MANIFEST");
    if (!parsed.ok()) throw std::logic_error("the compiled-in manifest is broken: " + parsed.status().message());
    return std::move(parsed).value();
  }();
  return manifest;
}

std::vector<std::string> ManifestConfigsOf(const std::vector<ManifestEntry>& manifest, const std::string& recipe) {
  std::vector<std::string> names;
  for (const ManifestEntry& e : manifest) {
    if (e.recipe == recipe) names.push_back(e.name);
  }
  return names;
}

}  // namespace tmx
