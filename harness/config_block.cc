#include "harness/config_block.h"

#include <cstdint>
#include <cstdio>

namespace tmx {
namespace {

constexpr char kBeginPrefix[] = "# --- BEGIN tune-matrix support metadata";
constexpr char kEndPrefix[] = "# --- END tune-matrix support metadata";

bool StartsWith(const std::string& s, size_t pos, size_t end, const char* prefix) {
  size_t n = std::char_traits<char>::length(prefix);
  return end - pos >= n && s.compare(pos, n, prefix) == 0;
}

}  // namespace

std::vector<TextLine> SplitTextLines(const std::string& text) {
  std::vector<TextLine> lines;
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

SupportBlockLocation LocateSupportBlock(const std::string& text, const std::string& path) {
  SupportBlockLocation loc;
  std::vector<TextLine> lines = SplitTextLines(text);
  int open_line = 0;  // BEGIN line of a block whose END is not seen yet
  bool end_added_break = false;
  const std::string fix = "; fix: delete the damaged block and rerun `tune-matrix run`, which writes it again";
  for (size_t i = 0; i < lines.size(); ++i) {
    const TextLine& l = lines[i];
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
    const TextLine& begin_line = lines[loc.begin_line - 1];
    bool crlf = begin_line.end - begin_line.content_end == 2;
    bool crlf_before = loc.begin >= 2 && text[loc.begin - 2] == '\r';
    loc.strip_begin = loc.begin - (crlf && crlf_before ? 2 : 1);
  }
  return loc;
}

std::string StripSupportBlock(const std::string& text, const SupportBlockLocation& loc) {
  if (!loc.found) return text;
  return text.substr(0, loc.strip_begin) + text.substr(loc.end);
}

std::string StripGeneratedBlock(const std::string& text) {
  SupportBlockLocation loc = LocateSupportBlock(text, "");
  if (!loc.damage.ok()) return text;
  return StripSupportBlock(text, loc);
}

std::string ConfigHash(const std::string& text) {
  const std::string config = StripGeneratedBlock(text);
  uint64_t h = 14695981039346656037ull;
  for (const TextLine& line : SplitTextLines(config)) {
    // A comment line in the first column is prose, never a value (a block scalar's lines are indented).
    if (config[line.begin] == '#') continue;
    for (size_t i = line.begin; i < line.end; ++i) {
      h ^= static_cast<unsigned char>(config[i]);
      h *= 1099511628211ull;
    }
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace tmx
