#include "base/json_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tmx {
namespace {

using nlohmann::json;

TEST(JsonIoTest, ParsesValidText) {
  StatusOr<json> j = ParseJsonText("a.json", R"({"a": [1, 2.5, "x"], "b": null})");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"][1].get<double>(), 2.5);
  EXPECT_TRUE((*j)["b"].is_null());
}

// Every rejection is a Status naming the file, line, column (and, for a bad value, the field), never an
// exception: the JSON library throws out_of_range, not parse_error, for a number no double holds.
TEST(JsonIoTest, RejectionsNameFileLineColumnFieldAndFix) {
  struct Case {
    std::string text;
    int64_t first_line;
    std::string expected;
  };
  const std::string overflow = " is out of range (a double holds magnitudes up to about 1.8e308); fix: write a "
                               "number within that range, or regenerate the file";
  const Case cases[] = {
      {"{\"a\": 1e999}", 1, "f.json:1:7: in a: number 1e999" + overflow},
      {"{\n  \"x\": {\"list\": [0, -2e400]}\n}", 1, "f.json:2:21: in x.list[1]: number -2e400" + overflow},
      {"[{\"a b\": 1}, {\"a b\": 1E+999}]", 1, "f.json:1:22: in [1].\"a b\": number 1E+999" + overflow},
      {"1e999", 7, "f.json:7:1: number 1e999" + overflow},
      {"{\"a\": tru}", 3,
       "f.json:3:10: invalid JSON (syntax error while parsing value - invalid literal; last read: '\"a\": tru}'); "
       "fix: "
       "correct the JSON there, or regenerate the file"},
      {"[1,\n2,\n", 1,
       "f.json:3:1: invalid JSON (syntax error while parsing value - unexpected end of input; expected '[', '{', "
       "or a literal); fix: correct the JSON there, or regenerate the file"},
      {"", 1,
       "f.json:1:1: invalid JSON (syntax error while parsing value - unexpected end of input; expected '[', '{', "
       "or a literal); fix: correct the JSON there, or regenerate the file"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    StatusOr<json> j = ParseJsonText("f.json", c.text, c.first_line);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(j.status().message(), c.expected);
  }
}

// A hostile file's excerpts stay short: a number of a million digits is not copied into the message.
TEST(JsonIoTest, QuotedExcerptsAreShortened) {
  std::string digits(1000000, '9');
  StatusOr<json> j = ParseJsonText("f.json", "[" + digits + "e999]");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().message(), "f.json:1:2: in [0]: number " + std::string(120, '9') +
                                      "... is out of range (a double holds magnitudes up to about 1.8e308); fix: "
                                      "write a number within that range, or regenerate the file");
  j = ParseJsonText("f.json", "\"" + std::string(100000, 'x'));
  ASSERT_FALSE(j.ok());
  EXPECT_LT(j.status().message().size(), 400u) << j.status().message().substr(0, 400);
}

TEST(JsonIoTest, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  json j = {{"error", std::string("bad \xff byte")}, {"path", std::string("/tmp/\xc3")}};
  EXPECT_THROW(j.dump(), json::type_error);  // what every writer did before
  EXPECT_EQ(DumpJson(j), "{\"error\":\"bad \xef\xbf\xbd byte\",\"path\":\"/tmp/\xef\xbf\xbd\"}");
  EXPECT_EQ(DumpJson(j, 2), "{\n  \"error\": \"bad \xef\xbf\xbd byte\",\n  \"path\": \"/tmp/\xef\xbf\xbd\"\n}");
  nlohmann::ordered_json o = {{"b", std::string("\x80")}, {"a", 1}};
  EXPECT_EQ(DumpJson(o), "{\"b\":\"\xef\xbf\xbd\",\"a\":1}");
  // Valid UTF-8 is kept as it is.
  EXPECT_EQ(DumpJson(json("h\xc3\xa9")), "\"h\xc3\xa9\"");
}

TEST(JsonIoTest, JsonForMessageCutsLongValuesAtACharacterBoundary) {
  EXPECT_EQ(JsonForMessage(json({1, 2})), "[1,2]");
  EXPECT_EQ(JsonForMessage(json("abcdef"), 4), "\"abc...");
  // "\"é..." : the cut at byte 2 would split the two bytes of é, so it falls back before it.
  EXPECT_EQ(JsonForMessage(json("\xc3\xa9\xc3\xa9"), 2), "\"...");
  EXPECT_EQ(JsonForMessage(json(std::string("\xff")), 120), "\"\xef\xbf\xbd\"");
}

TEST(JsonIoTest, NonFiniteValuesTravelAsStrings) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(NumberToJson(1.5).dump(), "1.5");
  EXPECT_EQ(NumberToJson(std::nan("")).dump(), "\"nan\"");
  EXPECT_EQ(NumberToJson(inf).dump(), "\"inf\"");
  EXPECT_EQ(NumberToJson(-inf).dump(), "\"-inf\"");
  EXPECT_EQ(*NumberFromJson(json(2)), 2.0);
  EXPECT_EQ(*NumberFromJson(json(-0.25)), -0.25);
  EXPECT_TRUE(std::isnan(*NumberFromJson(json("nan"))));
  EXPECT_EQ(*NumberFromJson(json("inf")), inf);
  EXPECT_EQ(*NumberFromJson(json("-inf")), -inf);
  for (const json& bad : {json("NaN"), json("1"), json(nullptr), json(true), json::array()}) {
    EXPECT_FALSE(NumberFromJson(bad).has_value()) << bad.dump();
  }
}

}  // namespace
}  // namespace tmx
