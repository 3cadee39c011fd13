#include "base/json_number.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tmx {
namespace {

TEST(JsonNumberTest, NonFiniteValuesTravelAsStrings) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(NumberToJson(1.5).dump(), "1.5");
  EXPECT_EQ(NumberToJson(std::nan("")).dump(), "\"nan\"");
  EXPECT_EQ(NumberToJson(inf).dump(), "\"inf\"");
  EXPECT_EQ(NumberToJson(-inf).dump(), "\"-inf\"");
  EXPECT_EQ(*NumberFromJson(nlohmann::json(2)), 2.0);
  EXPECT_EQ(*NumberFromJson(nlohmann::json(-0.25)), -0.25);
  EXPECT_TRUE(std::isnan(*NumberFromJson(nlohmann::json("nan"))));
  EXPECT_EQ(*NumberFromJson(nlohmann::json("inf")), inf);
  EXPECT_EQ(*NumberFromJson(nlohmann::json("-inf")), -inf);
  for (const nlohmann::json& bad : {nlohmann::json("NaN"), nlohmann::json("1"), nlohmann::json(nullptr),
                                    nlohmann::json(true), nlohmann::json::array()}) {
    EXPECT_FALSE(NumberFromJson(bad).has_value()) << bad.dump();
  }
}

}  // namespace
}  // namespace tmx
