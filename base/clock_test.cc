#include "base/clock.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

TEST(ClockTest, ParsesOnlyTheUtcForm) {
  EXPECT_EQ(ParseUtc("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseUtc("2026-12-02T11:30:00Z"), 1796211000);
  EXPECT_EQ(ParseUtc("2024-02-29T23:59:60Z"), 1709251200);  // a leap day and a leap second
  for (const char* bad :
       {"", "t", "2026-12-02T11:30:00", "2026-12-02T11:30:00.5Z", "2026-12-02 11:30:00Z", "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-02T24:00:00Z",
        "2026-12-02T11:60:00Z", "2026-12-02T11:30:61Z", "2026-12-02t11:30:00z", "+026-12-02T11:30:00Z"}) {
    EXPECT_FALSE(ParseUtc(bad).has_value()) << bad;
  }
}

TEST(ClockTest, FormatRoundTrips) {
  EXPECT_EQ(FormatUtc(1796211000), "2026-12-02T11:30:00Z");
  int64_t now = UnixNow();
  EXPECT_EQ(ParseUtc(FormatUtc(now)), now);
}

}  // namespace
}  // namespace tmx
