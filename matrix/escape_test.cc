#include "matrix/escape.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace tmx::matrix {
namespace {

TEST(XmlEscapeTest, EntitiesKeptCharactersAndDroppedOnes) {
  EXPECT_EQ(XmlEscape("a<b>&'\""), "a&lt;b&gt;&amp;&apos;&quot;");
  EXPECT_EQ(XmlEscape("tab\tline\nok"), "tab\tline\nok");
  EXPECT_EQ(XmlEscape(std::string("bell\x07 nul") + '\0' + "end"), "bell nulend");
  EXPECT_EQ(XmlEscape("caf\xc3\xa9 \xe2\x9c\x85"), "caf\xc3\xa9 \xe2\x9c\x85");
  EXPECT_EQ(XmlEscape("bad\xff\xc3 utf8 \xc0\xaf"), "bad utf8 ");
  EXPECT_EQ(XmlEscape("\xef\xbf\xbe"), "");  // U+FFFE is not an XML character
}

TEST(EscapeTest, YamlQuoteReadsBackAsTheTextWithBreaksCollapsed) {
  for (const std::string& text : {std::string("plain"), std::string("a \"quoted\" \\ back\tslash"),
                                  std::string("caf\xc3\xa9 \xe2\x9c\x85"), std::string("bell\x07")}) {
    EXPECT_EQ(YAML::Load(YamlQuote(text)).as<std::string>(), text) << text;
  }
  EXPECT_EQ(YamlQuote("two\n  lines\r\n"), "\"two lines\"");
  EXPECT_EQ(YamlQuote("bad\xff"), "\"bad\xEF\xBF\xBD\"");  // invalid UTF-8 becomes U+FFFD
}

TEST(EscapeTest, DecodeUtf8RefusesWhatIsNotUtf8) {
  uint32_t cp = 0;
  EXPECT_EQ(DecodeUtf8("\xe2\x9c\x85", 0, &cp), 3u);
  EXPECT_EQ(cp, 0x2705u);
  EXPECT_EQ(DecodeUtf8("\xc0\xaf", 0, &cp), 0u);      // overlong
  EXPECT_EQ(DecodeUtf8("\xed\xa0\x80", 0, &cp), 0u);  // surrogate
  EXPECT_EQ(DecodeUtf8("\xe2\x9c", 0, &cp), 0u);      // truncated
  EXPECT_EQ(HtmlEscape("<a href='x'>&</a>"), "&lt;a href=&apos;x&apos;&gt;&amp;&lt;/a&gt;");
}

TEST(EscapeTest, MarkdownCellsHoldOneLineOfLiteralText) {
  EXPECT_EQ(MarkdownCell("a|b *c* _d_ `e` [f](g) <h> ~i~ &j \\k"),
            "a\\|b \\*c\\* \\_d\\_ \\`e\\` \\[f\\](g) \\<h\\> \\~i\\~ \\&j \\\\k");
  EXPECT_EQ(MarkdownCell("two\r\n\nlines\n"), "two lines");
  EXPECT_EQ(MarkdownCell("esc\x1b[31m bell\x07 bidi\xe2\x80\xae bad\xff ok\xe2\x9c\x85\tx"), "esc\\[31m bell bidi bad ok\xe2\x9c\x85\tx");
  EXPECT_EQ(MarkdownCode("llama3_2/1B_lora"), "`llama3_2/1B_lora`");
  EXPECT_EQ(MarkdownCode("a`b|c"), "a\\`b\\|c");
  EXPECT_EQ(MarkdownCode("x\x1by"), "xy");
  EXPECT_EQ(MarkdownCode(""), "");
}

TEST(EscapeTest, ScriptJsonEndsNoScriptAndReadsBackTheSame) {
  const std::string json = "{\"a\":\"</script><!-- & \xe2\x80\xa8 \xe2\x80\xae \xe2\x9c\x85\"}";
  const std::string escaped = ScriptJson(json);
  EXPECT_EQ(escaped, "{\"a\":\"\\u003c/script\\u003e\\u003c!-- \\u0026 \\u2028 \\u202e \xe2\x9c\x85\"}");
  EXPECT_EQ(nlohmann::json::parse(escaped), nlohmann::json::parse(json));
}

}  // namespace
}  // namespace tmx::matrix
