// Wall-clock time as the records keep it: seconds since the Unix epoch, written in the one UTC form
// "YYYY-MM-DDTHH:MM:SSZ" whose text order is time order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tmx {

// Seconds since the epoch, now.
int64_t UnixNow();

// "2026-12-02T11:30:00Z". REQUIRES: `t` within years 0000-9999.
std::string FormatUtc(int64_t t);

// The time written as "YYYY-MM-DDTHH:MM:SSZ" (a real calendar date, seconds 00-60), or nothing for any other
// text: no fractions, no offsets, no lower-case letters.
std::optional<int64_t> ParseUtc(const std::string& text);

}  // namespace tmx
