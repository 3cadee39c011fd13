#include "matrix/writeback.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

#include "harness/file_util.h"

namespace tmx::matrix {
namespace {

constexpr char kBeginPrefix[] = "# --- BEGIN tune-matrix support metadata";
constexpr char kEndPrefix[] = "# --- END tune-matrix support metadata";

bool StartsWith(const std::string& s, size_t pos, size_t end, const char* prefix) {
  size_t n = std::char_traits<char>::length(prefix);
  return end - pos >= n && s.compare(pos, n, prefix) == 0;
}

// One line of a text: [begin, content_end) is its content without "\n" or "\r\n", [begin, end) includes the
// line break if there is one.
struct Line {
  size_t begin;
  size_t content_end;
  size_t end;
};

std::vector<Line> SplitLines(const std::string& text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl + 1;
    size_t content_end = nl == std::string::npos ? text.size() : nl;
    if (content_end > pos && text[content_end - 1] == '\r') --content_end;
    lines.push_back({pos, content_end, end});
    pos = end;
  }
  return lines;
}

// Where the generated block sits in a text, or why its markers are damaged.
struct BlockLocation {
  bool found = false;
  size_t begin = 0;        // offset of the BEGIN line
  size_t end = 0;          // offset just past the END line and its line break
  size_t strip_begin = 0;  // `begin`, or `begin` less the line break the block owns
  int begin_line = 0;      // 1-based
  int end_line = 0;
  Status damage;
};

BlockLocation LocateBlock(const std::string& text, const std::string& path) {
  BlockLocation loc;
  std::vector<Line> lines = SplitLines(text);
  int open_line = 0;  // BEGIN line of a block whose END is not seen yet
  bool end_added_break = false;
  const std::string fix = "; fix: delete the damaged block and rerun `tune-matrix run`, which writes it again";
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
    int line_no = static_cast<int>(i) + 1;
    if (StartsWith(text, l.begin, l.content_end, kBeginPrefix)) {
      if (open_line || loc.found) {
        loc.damage = Status::InvalidArgument(
            path + ":" + std::to_string(line_no) + ": a second generated support block begins here (the first " +
            "begins at line " + std::to_string(open_line ? open_line : loc.begin_line) + ")" + fix);
        return loc;
      }
      open_line = line_no;
      loc.begin = l.begin;
    } else if (StartsWith(text, l.begin, l.content_end, kEndPrefix)) {
      if (!open_line) {
        loc.damage = Status::InvalidArgument(path + ":" + std::to_string(line_no) +
                                             ": END line of a generated support block without a BEGIN line "
                                             "before it" + fix);
        return loc;
      }
      loc.found = true;
      loc.begin_line = open_line;
      loc.end_line = line_no;
      loc.end = l.end;
      end_added_break = text.compare(l.begin, l.content_end - l.begin, kSupportBlockEndAddedBreak) == 0;
      open_line = 0;
    }
  }
  if (open_line) {
    loc.damage = Status::InvalidArgument(path + ":" + std::to_string(open_line) +
                                         ": generated support block begins here but has no END line `" +
                                         kSupportBlockEnd + "`" + fix);
    return loc;
  }
  loc.strip_begin = loc.begin;
  // The block owns the line break before it only where it added one, and only while it ends the text:
  // with user lines after it, that break separates them from the lines above.
  if (loc.found && end_added_break && loc.end == text.size() && loc.begin > 0 && text[loc.begin - 1] == '\n') {
    const Line& begin_line = lines[loc.begin_line - 1];
    bool crlf = begin_line.end - begin_line.content_end == 2;
    bool crlf_before = loc.begin >= 2 && text[loc.begin - 2] == '\r';
    loc.strip_begin = loc.begin - (crlf && crlf_before ? 2 : 1);
  }
  return loc;
}

std::string Strip(const std::string& text, const BlockLocation& loc) {
  if (!loc.found) return text;
  return text.substr(0, loc.strip_begin) + text.substr(loc.end);
}

// A plain lowercase name that every YAML reader takes as a string: device types and statuses.
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

// Replaces each run of whitespace that contains a line break by one space, dropping it at either end.
std::string CollapseLineBreaks(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '\r' && s[i] != '\n') {
      out += s[i++];
      continue;
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\t')) out.pop_back();
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
    if (!out.empty() && i < s.size()) out += ' ';
  }
  return out;
}

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 if it is not valid UTF-8.
size_t DecodeUtf8(const std::string& s, size_t i, uint32_t* cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  size_t len;
  uint32_t min;
  if (b < 0x80) {
    *cp = b;
    return 1;
  } else if ((b & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

// A YAML double-quoted scalar for `s`: line breaks collapsed, invalid UTF-8 replaced by U+FFFD, quotes,
// backslashes and non-printable characters escaped.
std::string Quote(const std::string& raw) {
  std::string s = CollapseLineBreaks(raw);
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (cp == '"') {
      out += "\\\"";
    } else if (cp == '\\') {
      out += "\\\\";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s, i, len);
    }
    i += len;
  }
  return out + "\"";
}

// `v` with `decimals` digits after the point, trailing zeros dropped down to one ("0.42", "812.0").
std::string FormatFixed(double v, int decimals) {
  char buf[512];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) {
    end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 6).ptr;
    return std::string(buf, end);
  }
  std::string s(buf, end);
  if (s.find('.') == std::string::npos) s += ".0";
  while (s.size() >= 2 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  if (s == "-0.0") s = "0.0";
  return s;
}

std::string FormatSignificant(double v, int digits) {
  if (v == 0) return "0.0";
  int exponent = static_cast<int>(std::floor(std::log10(std::fabs(v))));
  return FormatFixed(v, std::max(0, digits - 1 - exponent));
}

std::string FormatTokensPerSecond(double v) { return FormatFixed(v, 1); }
std::string FormatStepTime(double v) { return FormatSignificant(v, 4); }
std::string FormatGib(double v) { return FormatFixed(v, 3); }
std::string FormatWallTime(double v) { return FormatFixed(v, 1); }

struct NumberField {
  const char* name;
  std::optional<double> DeviceSupport::*member;
  std::string (*format)(double);
};
constexpr NumberField kNumberFields[] = {
    {"tokens_per_second", &DeviceSupport::tokens_per_second, FormatTokensPerSecond},
    {"step_time_s", &DeviceSupport::step_time_s, FormatStepTime},
    {"step_time_spread_s", &DeviceSupport::step_time_spread_s, FormatStepTime},
    {"peak_memory_gib", &DeviceSupport::peak_memory_gib, FormatGib},
    {"wall_time_s", &DeviceSupport::wall_time_s, FormatWallTime},
};

struct StringField {
  const char* name;
  std::string DeviceSupport::*member;
};
constexpr StringField kStringFields[] = {
    {"device_name", &DeviceSupport::device_name},
    {"torch_version", &DeviceSupport::torch_version},
    {"verified_at", &DeviceSupport::verified_at},
    {"config_hash", &DeviceSupport::config_hash},
    {"host", &DeviceSupport::host},
    {"job", &DeviceSupport::job},
    {"commit", &DeviceSupport::commit},
};

Status CheckRenderable(const SupportMetadata& support, const std::string& path) {
  for (const auto& [type, entry] : support) {
    if (!IsPlainName(type)) {
      return Status::InvalidArgument(
          path + ": cannot write support for device type \"" + type +
          "\": a device type is a plain lowercase name such as cpu, cuda, mps or xpu (a device string such as "
          "cuda:0 is not one); fix: key the entry by CellResult::device_type");
    }
    if (!ParseCellStatus(entry.status)) {
      return Status::InvalidArgument(path + ": cannot write support for device type " + type + ": status \"" +
                                     entry.status +
                                     "\" is not one of runs, fails, invalid, too_large, timeout; fix: use "
                                     "CellStatusName()");
    }
  }
  return Status::OK();
}

std::string RenderBlock(const SupportMetadata& support, const std::string& eol, bool added_break) {
  std::vector<std::string> types;
  for (const auto& entry : support) types.push_back(entry.first);
  types = OrderDeviceTypes(std::move(types));
  std::string supported;
  for (const std::string& t : types) {
    if (support.at(t).status != "runs") continue;
    supported += (supported.empty() ? "" : ", ") + t;
  }
  std::string out = std::string(kSupportBlockBegin) + eol;
  out += "metadata:" + eol;
  out += "  supported_devices: [" + supported + "]" + eol;
  out += "  support:" + eol;
  for (const std::string& t : types) {
    const DeviceSupport& e = support.at(t);
    out += "    " + t + ":" + eol;
    out += "      status: " + e.status + eol;
    std::string reason = CollapseLineBreaks(e.reason);
    if (!reason.empty()) out += "      reason: " + Quote(reason) + eol;
    for (const NumberField& f : kNumberFields) {
      const std::optional<double>& v = e.*f.member;
      if (v && std::isfinite(*v)) out += std::string("      ") + f.name + ": " + f.format(*v) + eol;
    }
    for (const StringField& f : kStringFields) {
      std::string v = CollapseLineBreaks(e.*f.member);
      if (!v.empty()) out += std::string("      ") + f.name + ": " + Quote(v) + eol;
    }
  }
  out += (added_break ? kSupportBlockEndAddedBreak : kSupportBlockEnd) + eol;
  return out;
}

// Parses the block's own text; errors name the file line.
class BlockReader {
 public:
  BlockReader(const std::string& path, const BlockLocation& loc) : path_(path), loc_(loc) {}

  StatusOr<SupportClaims> Read(const std::string& block_text) const {
    YAML::Node root;
    try {
      root = YAML::Load(block_text);
    } catch (const YAML::Exception& e) {
      return Error(e.mark.line, "is not valid YAML (" + e.msg + ")");
    }
    SupportClaims claims;
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
        if (!d.IsScalar() || !IsPlainName(d.Scalar())) {
          return Error(d.Mark().line, "`metadata.supported_devices` holds `" + (d.IsScalar() ? d.Scalar() : "?") +
                                          "`, which is not a device type such as cpu or cuda");
        }
        claims.supported_devices.push_back(d.Scalar());
      }
    }
    YAML::Node entries = metadata["support"];
    if (!entries || entries.IsNull()) return claims;
    if (!entries.IsMap()) return Error(entries.Mark().line, "`metadata.support` must be a mapping");
    for (const auto& kv : entries) {
      std::string type = kv.first.Scalar();
      if (!kv.first.IsScalar() || !IsPlainName(type)) {
        return Error(kv.first.Mark().line, "`" + type + "` is not a device type such as cpu or cuda");
      }
      DeviceSupport entry;
      TM_RETURN_IF_ERROR(ReadEntry(kv.second, type, &entry));
      claims.support[type] = std::move(entry);
      claims.entry_lines[type] = FileLine(kv.first.Mark().line);
    }
    return claims;
  }

 private:
  Status ReadEntry(const YAML::Node& node, const std::string& type, DeviceSupport* entry) const {
    std::string where = "`metadata.support." + type;
    if (!node.IsMap()) return Error(node.Mark().line, where + "` must be a mapping");
    YAML::Node status = node["status"];
    if (!status) return Error(node.Mark().line, where + "` has no `status`");
    if (!status.IsScalar() || !ParseCellStatus(status.Scalar())) {
      return Error(status.Mark().line, where + ".status` must be one of runs, fails, invalid, too_large, timeout");
    }
    entry->status = status.Scalar();
    TM_RETURN_IF_ERROR(ReadString(node, "reason", where, &entry->reason));
    for (const StringField& f : kStringFields) {
      TM_RETURN_IF_ERROR(ReadString(node, f.name, where, &(entry->*f.member)));
    }
    for (const NumberField& f : kNumberFields) {
      YAML::Node v = node[f.name];
      if (!v || v.IsNull()) continue;
      double d;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, d)) {
        return Error(v.Mark().line, where + "." + f.name + "` must be a number");
      }
      entry->*f.member = d;
    }
    return Status::OK();
  }

  Status ReadString(const YAML::Node& node, const char* name, const std::string& where, std::string* out) const {
    YAML::Node v = node[name];
    if (!v || v.IsNull()) return Status::OK();
    if (!v.IsScalar()) return Error(v.Mark().line, where + "." + name + "` must be a string");
    *out = v.Scalar();
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
  const BlockLocation& loc_;
};

StatusOr<SupportClaims> ReadBlock(const std::string& text, const BlockLocation& loc, const std::string& path) {
  if (!loc.damage.ok()) return loc.damage;
  if (!loc.found) return SupportClaims();
  return BlockReader(path, loc).Read(text.substr(loc.begin, loc.end - loc.begin));
}

// Checks that the user's part of a config can take the block at its end: valid YAML, one document, a
// block-style mapping (or nothing), no `metadata` key of its own. `file_line` maps a 0-based line of
// `stripped` to the 1-based line of the file.
template <typename LineMap>
Status CheckUserPart(const std::string& stripped, const std::string& path, LineMap file_line,
                     std::optional<YAML::Node>* root_out) {
  auto at = [&](int line) { return path + ":" + std::to_string(file_line(line)) + ": "; };
  std::vector<Line> lines = SplitLines(stripped);
  bool content_seen = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const Line& l = lines[i];
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

bool DeviceSupport::operator==(const DeviceSupport& o) const {
  return status == o.status && reason == o.reason && tokens_per_second == o.tokens_per_second &&
         step_time_s == o.step_time_s && step_time_spread_s == o.step_time_spread_s &&
         peak_memory_gib == o.peak_memory_gib && wall_time_s == o.wall_time_s && device_name == o.device_name &&
         torch_version == o.torch_version && verified_at == o.verified_at && config_hash == o.config_hash &&
         host == o.host && job == o.job && commit == o.commit;
}

DeviceSupport SupportFromCell(const CellResult& cell) {
  DeviceSupport s;
  s.status = CellStatusName(cell.status);
  s.reason = cell.reason;
  s.tokens_per_second = cell.tokens_per_second;
  s.step_time_s = cell.step_time_median_s;
  s.step_time_spread_s = cell.step_time_spread_s;
  if (cell.wall_time_s > 0) s.wall_time_s = cell.wall_time_s;
  if (cell.peak_memory_bytes) s.peak_memory_gib = static_cast<double>(*cell.peak_memory_bytes) / (1 << 30);
  s.device_name = cell.provenance.device_name;
  s.torch_version = cell.provenance.torch_version;
  s.verified_at = cell.provenance.verified_at;
  s.config_hash = cell.config_hash;
  s.host = cell.provenance.host;
  s.job = cell.provenance.job;
  s.commit = cell.provenance.commit;
  return s;
}

std::string StripGeneratedBlock(const std::string& text) {
  BlockLocation loc = LocateBlock(text, "");
  if (!loc.damage.ok()) return text;
  return Strip(text, loc);
}

std::string ConfigHash(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : StripGeneratedBlock(text)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

StatusOr<SupportClaims> ReadSupportClaims(const std::string& text, const std::string& path) {
  return ReadBlock(text, LocateBlock(text, path), path);
}

StatusOr<SupportMetadata> ReadSupportMetadata(const std::string& text, const std::string& path) {
  StatusOr<SupportClaims> claims = ReadSupportClaims(text, path);
  if (!claims.ok()) return claims.status();
  return std::move(claims->support);
}

StatusOr<std::string> RenderWithSupport(const std::string& text, const SupportMetadata& support,
                                        const std::string& path) {
  BlockLocation loc = LocateBlock(text, path);
  if (!loc.damage.ok()) return loc.damage;
  TM_RETURN_IF_ERROR(ReadBlock(text, loc, path).status());
  TM_RETURN_IF_ERROR(CheckRenderable(support, path));
  std::string stripped = Strip(text, loc);

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
  StatusOr<SupportMetadata> back = ReadSupportMetadata(rendered, path);
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

StatusOr<std::string> UpdateSupport(const std::string& text, const SupportMetadata& updates,
                                    const std::string& path) {
  StatusOr<SupportMetadata> merged = ReadSupportMetadata(text, path);
  if (!merged.ok()) return merged.status();
  for (const auto& [type, entry] : updates) (*merged)[type] = entry;
  return RenderWithSupport(text, *merged, path);
}

Status WriteBackSupport(const std::string& path, const SupportMetadata& updates, bool* changed) {
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
