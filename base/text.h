// Text helpers for messages: spelling suggestions and human-readable sizes and durations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tmx {

// Edit distance (optimal string alignment: a swap of two adjacent characters counts as one edit).
int EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo (distance at most
// a third of the word's length, and at least 1 allowed; a candidate starting with `word` also counts).
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// The candidates ClosestMatch would find plausible and at most one edit farther than the nearest, nearest first
// (ties in the order given), at most `at_most`.
std::vector<std::string> ClosestMatches(const std::string& word, const std::vector<std::string>& candidates,
                                        size_t at_most);

// "1.23 GiB", "512.0 MiB", "17 B".
std::string FormatBytes(int64_t bytes);

// A FLOP rate in decimal units with three significant digits: "829 GFLOP/s", "1.23 TFLOP/s", "45.6 MFLOP/s";
// below 1 kFLOP/s in FLOP/s, not finite or negative: "0 FLOP/s".
std::string FormatFlops(double flops_per_second);
// The same for bytes/s: "21.3 GB/s", "3.35 TB/s".
std::string FormatBandwidth(double bytes_per_second);

// Rounded to whole seconds: "42s", "4m05s", "2h03m04s"; negative or not finite: "0s".
std::string FormatDuration(double seconds);

// `v` with exactly `decimals` digits after the point ("47.7", "812"); scientific when too long for that;
// "-0" is written "0".
std::string FormatNumber(double v, int decimals);

// Joins with a separator.
std::string JoinStrings(const std::vector<std::string>& parts, const std::string& sep);

// The alternatives a fix offers: "a", "a or b", "a, b or c" (another `conjunction`: "a, b and c"; an empty one
// joins every part with ", ").
std::string JoinAlternatives(const std::vector<std::string>& parts, const std::string& conjunction = "or");

// Whether `s` ends with `suffix`.
bool EndsWith(const std::string& s, const std::string& suffix);

// `s` percent-encoded: every byte but letters, digits and -._~ (and '/' when `keep_slash`) becomes %XX
// (upper-case hex). A URL's fragment takes it as it is; huggingface_hub quotes a revision without keeping '/'
// ("refs/pr/1" -> "refs%2Fpr%2F1") and a file's path keeping it.
std::string PercentEncode(const std::string& s, bool keep_slash = false);

// Decodes the UTF-8 sequence at s[i] into *cp; returns its length, or 0 when it is not valid UTF-8
// (truncated, overlong, a surrogate, beyond U+10FFFF). REQUIRES: i < s.size().
size_t DecodeUtf8(const std::string& s, size_t i, uint32_t* cp);

// `text` safe to print on a terminal, for names and text that come from elsewhere (a server's listing, a
// file): nothing in it can move the cursor, change colours or the title, ring, break the line or reorder
// what follows. Backslash becomes "\\", tab, line feed and carriage return "\t", "\n", "\r", other
// control bytes (and DEL) "\xNN"; C1 controls, bidirectional controls and the line and paragraph separators
// "\uNNNN"; bytes that are not valid UTF-8 "\xNN". Everything else, printable UTF-8 included, is kept.
std::string TerminalText(const std::string& text);

// The non-empty items of a `sep`-separated list ("cpu,,cuda" -> {"cpu", "cuda"}).
std::vector<std::string> SplitList(const std::string& list, char sep = ',');

// "1 cell", "3 cells": `n` and the noun, plural (`plural`, or the singular with an s) unless n is 1.
std::string Counted(int64_t n, const std::string& singular, const std::string& plural = "");

}  // namespace tmx
