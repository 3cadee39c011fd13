// Text helpers for messages: spelling suggestions and human-readable sizes and durations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmx {

// Edit distance (optimal string alignment: a swap of two adjacent characters counts as one edit).
int EditDistance(const std::string& a, const std::string& b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo (distance at most
// a third of the word's length, and at least 1 allowed; a candidate starting with `word` also counts).
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// "1.23 GiB", "512.0 MiB", "17 B".
std::string FormatBytes(int64_t bytes);

// Rounded to whole seconds: "42s", "4m05s", "2h03m04s"; negative or not finite: "0s".
std::string FormatDuration(double seconds);

// Joins with a separator.
std::string JoinStrings(const std::vector<std::string>& parts, const std::string& sep);

}  // namespace tmx
