#include "base/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tmx {

int EditDistance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions cost 1.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> ClosestMatches(const std::string& word, const std::vector<std::string>& candidates,
                                        size_t at_most) {
  const int limit = std::max<int>(1, static_cast<int>(word.size()) / 3);
  std::vector<std::pair<int, size_t>> close;  // (distance, index)
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& c = candidates[i];
    int d = EditDistance(word, c);
    if (!word.empty() && c.size() > word.size() && c.compare(0, word.size(), word) == 0) d = std::min<int>(d, 1);
    if (d <= limit) close.emplace_back(d, i);
  }
  std::stable_sort(close.begin(), close.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Others only as close as the nearest (one edit more at most): a far one is noise beside a near one.
  std::vector<std::string> out;
  for (size_t i = 0; i < close.size() && out.size() < at_most && close[i].first <= close[0].first + 1; ++i) {
    out.push_back(candidates[close[i].second]);
  }
  return out;
}

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  std::vector<std::string> best = ClosestMatches(word, candidates, 1);
  return best.empty() ? "" : best.front();
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  }
  return buf;
}

namespace {

// A rate in decimal prefixes of `unit`, three significant digits (FormatFlops, FormatBandwidth).
std::string FormatRate(double rate, const std::string& unit) {
  if (!std::isfinite(rate) || rate < 1) return "0 " + unit;
  const char* units[] = {"", "k", "M", "G", "T", "P", "E"};
  double v = rate;
  int u = 0;
  while (v >= 999.5 && u < 6) {
    v /= 1000.0;
    ++u;
  }
  return FormatNumber(v, v >= 99.95 ? 0 : v >= 9.995 ? 1 : 2) + " " + units[u] + unit;
}

}  // namespace

std::string FormatFlops(double flops_per_second) { return FormatRate(flops_per_second, "FLOP/s"); }

std::string FormatBandwidth(double bytes_per_second) { return FormatRate(bytes_per_second, "B/s"); }

std::string FormatDuration(double seconds) {
  long long s = std::isfinite(seconds) && seconds > 0 ? std::llround(seconds) : 0;
  char buf[48];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm%02llds", s / 3600, s / 60 % 60, s % 60);
  }
  return buf;
}

std::string FormatNumber(double v, int decimals) {
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  if (ec != std::errc()) end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 3).ptr;
  std::string s(buf, end);
  return s == "-0" ? "0" : s;
}

std::string JoinStrings(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string JoinAlternatives(const std::vector<std::string>& parts, const std::string& conjunction) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += i + 1 == parts.size() && !conjunction.empty() ? " " + conjunction + " " : ", ";
    out += parts[i];
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string PercentEncode(const std::string& s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

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

std::string TerminalText(const std::string& text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    const unsigned char b = static_cast<unsigned char>(text[i]);
    if (len == 0 || cp < 0x20 || cp == 0x7F || cp == '\\') {
      const char* named = cp == '\\' ? "\\\\" : cp == '\t' ? "\\t" : cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : nullptr;
      out += named != nullptr && len != 0 ? std::string(named) : std::string("\\x") + kHex[b >> 4] + kHex[b & 15];
      ++i;
      continue;
    }
    const bool hidden = (cp >= 0x80 && cp <= 0x9F) || cp == 0x61C || cp == 0x200E || cp == 0x200F ||
                        (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
    if (hidden) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 15];
    } else {
      out.append(text, i, len);
    }
    i += len;
  }
  return out;
}

std::vector<std::string> SplitList(const std::string& list, char sep) {
  std::vector<std::string> items;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(sep, start);
    if (end == std::string::npos) end = list.size();
    if (end > start) items.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

std::string Counted(int64_t n, const std::string& singular, const std::string& plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural.empty() ? singular + "s" : plural);
}

}  // namespace tmx
