#include "matrix/escape.h"

#include <gtest/gtest.h>
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

}  // namespace
}  // namespace tmx::matrix
