#include "matrix/support_block.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include "base/file_util.h"
#include "harness/column.h"
#include "harness/yaml_bounds.h"
#include "matrix/escape.h"

namespace tmx::matrix {
namespace {

// A plain lowercase name that every YAML reader takes as a string: statuses, and the device types that keyed a block
// written before columns (its entries' fields say their columns).
bool IsPlainName(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  static const char* const kYamlWords[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"};
  for (const char* w : kYamlWords) {
    if (s == w) return false;
  }
  return true;
}

Status CheckRenderable(const SupportEntries& support, const std::string& path) {
  for (const auto& [column, entry] : support) {
    if (!ParseColumnKey(column)) {
      return Status::InvalidArgument(
          path + ": cannot write support for \"" + column +
          "\": an entry is keyed by its column, such as \"cpu (amx, torch 2.11.0)\" or \"cuda (torch 2.11.0)\" (a "
          "device string such as cuda:0 is not one); fix: key the entry by ColumnOf(record)");
    }
    if (!ParseCellStatus(entry.status)) {
      return Status::InvalidArgument(path + ": cannot write support for " + column + ": status \"" + entry.status +
                                     "\" is not one of " + CellStatusNames() + "; fix: use CellStatusName()");
    }
  }
  return Status::OK();
}

// A column as the block writes it: a plain name as it is ("cuda"), any other double-quoted.
std::string BlockKey(const std::string& column) { return IsPlainName(column) ? column : YamlQuote(column); }

std::string RenderBlock(const SupportEntries& support, const std::string& eol, bool added_break) {
  std::vector<std::string> types;
  for (const auto& entry : support) types.push_back(entry.first);
  types = OrderColumns(std::move(types));
  std::string supported;
  for (const std::string& t : types) {
    if (!IsRunsStatus(support.at(t).status)) continue;
    supported += (supported.empty() ? "" : ", ") + BlockKey(t);
  }
  std::string out = std::string(kSupportBlockBegin) + eol;
  out += "metadata:" + eol;
  out += "  supported_devices: [" + supported + "]" + eol;
  out += "  support:" + eol;
  for (const std::string& t : types) {
    const SupportEntry& e = support.at(t);
    out += "    " + BlockKey(t) + ":" + eol;
    for (const SupportField& f : SupportFields()) {
      std::string value;
      if (f.number) {
        const std::optional<double>& v = e.*f.number;
        if (v && std::isfinite(*v)) value = f.format(*v);
      } else if (f.text == &SupportEntry::status) {
        value = e.status;  // a plain name (CheckRenderable)
      } else {
        std::string text = CollapseLineBreaks(e.*f.text);
        if (!text.empty()) value = YamlQuote(text);
      }
      if (!value.empty()) out += std::string("      ") + f.name + ": " + value + eol;
    }
  }
  out += (added_break ? kSupportBlockEndAddedBreak : kSupportBlockEnd) + eol;
  return out;
}

// Parses the block's own text; errors name the file line.
class BlockReader {
 public:
  BlockReader(const std::string& path, const SupportBlockLocation& loc) : path_(path), loc_(loc) {}

  StatusOr<ConfigSupport> Read(const std::string& block_text) const {
    Status bounded = CheckYamlBounds(block_text, [&](const YAML::Mark& m) {
      return path_ + ":" + std::to_string(FileLine(m.line)) + ":" + std::to_string(m.column + 1);
    });
    if (!bounded.ok()) return bounded;
    YAML::Node root;
    try {
      root = YAML::Load(block_text);
    } catch (const YAML::Exception& e) {
      return Error(e.mark.line, "is not valid YAML (" + e.msg + ")");
    }
    ConfigSupport claims;
    claims.block_end_line = loc_.end_line;
    if (root.IsNull()) return claims;
    if (!root.IsMap()) return Error(root.Mark().line, "must be a mapping with the one key `metadata`");
    for (const auto& kv : root) {
      if (kv.first.Scalar() != "metadata") {
        return Error(kv.first.Mark().line, "has the key `" + kv.first.Scalar() + "`; only `metadata` belongs here");
      }
    }
    YAML::Node metadata = root["metadata"];
    if (!metadata || metadata.IsNull()) return claims;
    if (!metadata.IsMap()) return Error(metadata.Mark().line, "`metadata` must be a mapping");
    YAML::Node listed = metadata["supported_devices"];
    if (listed && !listed.IsNull()) {
      if (!listed.IsSequence()) return Error(listed.Mark().line, "`metadata.supported_devices` must be a list");
      claims.supported_devices_line = FileLine(listed.Mark().line);
      for (const YAML::Node& d : listed) {
        if (!d.IsScalar() || !(ParseColumnKey(d.Scalar()) || IsPlainName(d.Scalar()))) {
          return Error(d.Mark().line, "`metadata.supported_devices` holds `" + (d.IsScalar() ? d.Scalar() : "?") +
                                          "`, which is not a column such as \"cpu (amx, torch 2.11.0)\"");
        }
        claims.supported_devices.push_back(d.Scalar());
      }
    }
    YAML::Node entries = metadata["support"];
    if (!entries || entries.IsNull()) return claims;
    if (!entries.IsMap()) return Error(entries.Mark().line, "`metadata.support` must be a mapping");
    std::map<std::string, std::string> legacy;  // a block of before columns: device type -> its entry's column
    for (const auto& kv : entries) {
      std::string key = kv.first.Scalar();
      const bool bare_type = kv.first.IsScalar() && IsPlainName(key);
      std::optional<Column> column = kv.first.IsScalar() && !bare_type ? ParseColumnKey(key) : std::nullopt;
      if (!column && !bare_type) {
        return Error(kv.first.Mark().line, "`" + key + "` is not a column such as \"cpu (amx, torch 2.11.0)\"");
      }
      SupportEntry entry;
      TM_RETURN_IF_ERROR(ReadEntry(kv.second, key, &entry));
      std::string own = ColumnOfEntry(column ? column->device_type : key, entry);
      if (column && own != key) {
        return Error(kv.first.Mark().line, "`" + key + "` holds an entry of column \"" + own +
                                               "\" (its cpu_class, host, device_name and torch_version say so)");
      }
      if (!column) legacy[key] = own;
      claims.entries[own] = std::move(entry);
      claims.entry_lines[own] = FileLine(kv.first.Mark().line);
    }
    for (std::string& d : claims.supported_devices) {
      if (legacy.count(d)) d = legacy[d];
    }
    return claims;
  }

 private:
  Status ReadEntry(const YAML::Node& node, const std::string& type, SupportEntry* entry) const {
    std::string where = "`metadata.support." + type;
    if (!node.IsMap()) return Error(node.Mark().line, where + "` must be a mapping");
    YAML::Node status = node["status"];
    if (!status) return Error(node.Mark().line, where + "` has no `status`");
    if (!status.IsScalar() || !ParseCellStatus(status.Scalar())) {
      return Error(status.Mark().line, where + ".status` must be one of " + CellStatusNames());
    }
    for (const SupportField& f : SupportFields()) {
      YAML::Node v = node[f.name];
      if (!v || v.IsNull()) continue;
      if (f.text) {
        if (!v.IsScalar()) return Error(v.Mark().line, where + "." + f.name + "` must be a string");
        entry->*f.text = v.Scalar();
        continue;
      }
      double d;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, d)) {
        return Error(v.Mark().line, where + "." + f.name + "` must be a number");
      }
      entry->*f.number = d;
    }
    return Status::OK();
  }

  int FileLine(int block_line) const { return loc_.begin_line + std::max(block_line, 0); }

  Status Error(int block_line, const std::string& problem) const {
    return Status::InvalidArgument(path_ + ":" + std::to_string(FileLine(block_line)) +
                                   ": generated support block " + problem +
                                   "; fix: delete the block (lines " + std::to_string(loc_.begin_line) + "-" +
                                   std::to_string(loc_.end_line) +
                                   ") and rerun `tune-matrix run`, which writes it again");
  }

  const std::string& path_;
  const SupportBlockLocation& loc_;
};

StatusOr<ConfigSupport> ReadBlock(const std::string& text, const SupportBlockLocation& loc, const std::string& path) {
  if (!loc.damage.ok()) return loc.damage;
  if (!loc.found) return ConfigSupport();
  return BlockReader(path, loc).Read(text.substr(loc.begin, loc.end - loc.begin));
}

// Checks that the user's part of a config can take the block at its end: valid YAML, one document, a
// block-style mapping (or nothing), no `metadata` key of its own. `file_line` maps a 0-based line of
// `stripped` to the 1-based line of the file.
template <typename LineMap>
Status CheckUserPart(const std::string& stripped, const std::string& path, LineMap file_line,
                     std::optional<YAML::Node>* root_out) {
  auto at = [&](int line) { return path + ":" + std::to_string(file_line(line)) + ": "; };
  std::vector<TextLine> lines = SplitTextLines(stripped);
  bool content_seen = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const TextLine& l = lines[i];
    std::string content = stripped.substr(l.begin, l.content_end - l.begin);
    auto is_marker = [&](const char* m) {
      return content.compare(0, 3, m) == 0 && (content.size() == 3 || content[3] == ' ' || content[3] == '\t');
    };
    if (is_marker("...")) {
      return Status::InvalidArgument(at(static_cast<int>(i)) +
                                     "the document end marker `...` would leave the support block appended after "
                                     "it outside the config's document; fix: delete this line");
    }
    if (is_marker("---") && content_seen) {
      return Status::InvalidArgument(at(static_cast<int>(i)) +
                                     "a second YAML document begins here; a config with support metadata must be "
                                     "one document; fix: keep one document per config file");
    }
    size_t first = content.find_first_not_of(" \t");
    if (first != std::string::npos && content[first] != '#' && content[first] != '%') content_seen = true;
  }
  // Bounded first: an alias bomb or a stray ',' (an endless run of empty documents to yaml-cpp) would
  // otherwise exhaust memory in LoadAll.
  TM_RETURN_IF_ERROR(CheckYamlBoundsAllDocuments(stripped, [&](const YAML::Mark& m) {
    return path + ":" + std::to_string(file_line(m.line)) + ":" + std::to_string(m.column + 1);
  }));
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(stripped);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(at(e.mark.line) + "not valid YAML (" + e.msg +
                                   "); fix: correct the config before support is written back into it");
  }
  if (docs.size() > 1) {
    return Status::InvalidArgument(path + ": holds " + std::to_string(docs.size()) +
                                   " YAML documents; fix: keep one document per config file");
  }
  if (docs.empty() || docs[0].IsNull()) return Status::OK();
  const YAML::Node& root = docs[0];
  *root_out = root;
  if (!root.IsMap()) {
    return Status::InvalidArgument(at(root.Mark().line) +
                                   "the top level is not a mapping, so no `metadata:` can be added to it; fix: "
                                   "make the config a mapping of keys");
  }
  if (root.Style() == YAML::EmitterStyle::Flow) {
    return Status::InvalidArgument(at(root.Mark().line) +
                                   "the top-level mapping is written in flow style `{...}`, which a block "
                                   "appended after it cannot extend; fix: write it one key per line");
  }
  for (const auto& kv : root) {
    if (kv.first.IsScalar() && kv.first.Scalar() == "metadata") {
      return Status::InvalidArgument(
          at(kv.first.Mark().line) +
          "top-level key `metadata` is reserved for the support block that `tune-matrix run` generates at the "
          "end of the file; fix: rename or remove this key");
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<ConfigSupport> ReadConfigSupport(const std::string& text, const std::string& path) {
  return ReadBlock(text, LocateSupportBlock(text, path), path);
}

StatusOr<SupportEntries> ReadSupportEntries(const std::string& text, const std::string& path) {
  StatusOr<ConfigSupport> claims = ReadConfigSupport(text, path);
  if (!claims.ok()) return claims.status();
  return std::move(claims->entries);
}

StatusOr<std::string> RenderWithSupport(const std::string& text, const SupportEntries& entries,
                                        const std::string& path) {
  SupportEntries support = entries;
  AddTorchSummaries(&support);  // the torch axis of each device column, from the entries the block holds
  SupportBlockLocation loc = LocateSupportBlock(text, path);
  if (!loc.damage.ok()) return loc.damage;
  TM_RETURN_IF_ERROR(ReadBlock(text, loc, path).status());
  TM_RETURN_IF_ERROR(CheckRenderable(support, path));
  std::string stripped = StripSupportBlock(text, loc);

  // Lines after a block found in the middle moved up by the block's length in the stripped text.
  int block_first = static_cast<int>(std::count(text.begin(), text.begin() + loc.strip_begin, '\n'));
  int block_lines = static_cast<int>(std::count(text.begin() + loc.strip_begin, text.begin() + loc.end, '\n'));
  auto file_line = [&](int line) { return 1 + (loc.found && line >= block_first ? line + block_lines : line); };
  std::optional<YAML::Node> user_root;  // none when the user's part holds no values
  TM_RETURN_IF_ERROR(CheckUserPart(stripped, path, file_line, &user_root));

  if (support.empty()) return stripped;
  size_t first_break = stripped.find('\n');
  std::string eol = first_break != std::string::npos && first_break > 0 && stripped[first_break - 1] == '\r'
                        ? "\r\n"
                        : "\n";
  bool add_break = !stripped.empty() && stripped.back() != '\n';
  std::string block = RenderBlock(support, eol, add_break);
  std::string rendered = stripped + (add_break ? eol : "") + block;

  // Check the result before anyone writes it: the block reads back as meant whatever the strings held, and
  // the config's own values are what they were.
  StatusOr<SupportEntries> back = ReadSupportEntries(rendered, path);
  if (!back.ok() || RenderBlock(*back, eol, add_break) != block) {
    return Status::Internal(path + ": the support block rendered for this config does not read back as written" +
                            (back.ok() ? std::string() : " (" + back.status().message() + ")") +
                            "; nothing was written; fix: report this tune-matrix bug with the config attached");
  }
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(rendered);
  } catch (const YAML::Exception&) {
  }
  bool same_values = docs.size() == 1 && docs[0].IsMap() && docs[0]["metadata"].IsMap();
  if (same_values) {
    docs[0].remove("metadata");
    same_values = user_root ? YAML::Dump(docs[0]) == YAML::Dump(*user_root) : docs[0].size() == 0;
  }
  if (!same_values) {
    return Status::InvalidArgument(
        path + ": appending the support block would change the config's own values (for example a block scalar "
        "that ends a file without a final newline would gain one); fix: end the file with a newline");
  }
  return rendered;
}

StatusOr<std::string> UpdateSupport(const std::string& text, const SupportEntries& updates,
                                    const std::string& path) {
  StatusOr<SupportEntries> merged = ReadSupportEntries(text, path);
  if (!merged.ok()) return merged.status();
  for (const auto& [type, entry] : updates) (*merged)[type] = entry;
  return RenderWithSupport(text, *merged, path);
}

Status WriteBackSupport(const std::string& path, const SupportEntries& updates, bool* changed) {
  if (changed) *changed = false;
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  StatusOr<std::string> rendered = UpdateSupport(*text, updates, path);
  if (!rendered.ok()) return rendered.status();
  if (*rendered == *text) return Status::OK();
  TM_RETURN_IF_ERROR(WriteFileAtomically(path, *rendered));
  if (changed) *changed = true;
  return Status::OK();
}

}  // namespace tmx::matrix
