#include "recipes/models/cpu_vector.h"

#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace tmx::models::cpu {
namespace {

// Units in the last place between two finite floats of the same sign.
int64_t UlpsApart(float a, float b) {
  return std::llabs(static_cast<int64_t>(c10::bit_cast<int32_t>(a)) - static_cast<int64_t>(c10::bit_cast<int32_t>(b)));
}

TEST(CpuVectorTest, ExpIsWithinTwoUnitsOfTheLibrarysOverItsNormalRange) {
  int64_t worst = 0;
  float worst_at = 0;
  for (float x = -87.3f; x <= 88.72f; x += 0.00731f) {
    const int64_t ulps = UlpsApart(Exp(x), std::exp(x));
    if (ulps > worst) worst = ulps, worst_at = x;
  }
  EXPECT_LE(worst, 2) << "at x = " << worst_at;
  EXPECT_EQ(Exp(0.0f), 1.0f);
}

TEST(CpuVectorTest, ExpAtItsEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isfinite(Exp(88.72f)));  // n = 128 there: 2^n in two factors
  EXPECT_LE(UlpsApart(Exp(88.72f), std::exp(88.72f)), 2);
  EXPECT_EQ(Exp(88.73f), inf);
  EXPECT_EQ(Exp(inf), inf);
  EXPECT_EQ(Exp(-200.0f), 0.0f);
  EXPECT_EQ(Exp(-inf), 0.0f);
  EXPECT_GT(Exp(-87.0f), 0.0f);
  EXPECT_TRUE(std::isnan(Exp(std::nanf(""))));
}

// Narrow<uint16_t> is c10's float -> bf16 conversion (round to nearest, ties to even) on every pattern class:
// ties, values just off ties, the largest finite values rounding to infinity, denormals, infinities.
TEST(CpuVectorTest, NarrowToBf16RoundsAsTorchDoes) {
  for (uint32_t high = 0; high < 0x10000; high += 7) {
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) {
      const float v = c10::bit_cast<float>((high << 16) | low);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(Widen(Narrow<uint16_t>(v))));
        continue;
      }
      EXPECT_EQ(Narrow<uint16_t>(v), c10::BFloat16(v).x) << std::hex << ((high << 16) | low);
      EXPECT_EQ(Widen(Narrow<uint16_t>(v)), static_cast<float>(c10::BFloat16(v)));
    }
  }
}

}  // namespace
}  // namespace tmx::models::cpu
