#include "recipes/data/records.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

TEST(RecordsTest, JsonArrayAndLinesKeepLineNumbers) {
  auto array = ParseJson("a.json", "[\n  {\"x\": 1},\n\n  {\"x\": 2}\n]");
  ASSERT_TRUE(array.ok());
  ASSERT_EQ(array->size(), 2u);
  EXPECT_EQ((*array)[1].where(), "a.json:4: ");
  EXPECT_EQ((*array)[1].value["x"], 2);
  auto lines = ParseJson("a.jsonl", "{\"x\": 1}\n\n{\"x\": 2}\n");
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].line, 3);
}

TEST(RecordsTest, BadJsonNamesTheLine) {
  auto lines = ParseJsonLines("d.jsonl", "{\"x\": 1}\n{\"x\": }\n");
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().message().rfind("d.jsonl:2:7: invalid JSON (", 0), 0u) << lines.status().message();
}

// A number no double holds made the JSON library throw out_of_range, which escaped as its raw text.
TEST(RecordsTest, ANumberOutOfRangeNamesTheLineAndTheField) {
  const std::string problem = ": number 1e999 is out of range (a double holds magnitudes up to about 1.8e308); fix: "
                              "write a number within that range, or regenerate the file";
  auto lines = ParseJsonLines("d.jsonl", "{\"x\": 1}\n\n{\"input\": \"a\", \"scores\": [1, 1e999]}\n");
  ASSERT_FALSE(lines.ok());
  EXPECT_EQ(lines.status().message(), "d.jsonl:3:30: in scores[1]" + problem);
  auto array = ParseJson("d.json", "[\n  {\"x\": 1},\n  {\"x\": 1e999}\n]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().message(), "d.json:3:9: in [1].x" + problem);
}

TEST(RecordsTest, CsvQuotesCommasAndNewlines) {
  auto rows = ParseCsv("d.csv", "input,output\r\n\"a, b\",\"say \"\"hi\"\"\nthere\"\nc,\n\nd,e\n");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].value, (nlohmann::json{{"input", "a, b"}, {"output", "say \"hi\"\nthere"}}));
  EXPECT_EQ((*rows)[1].value, (nlohmann::json{{"input", "c"}, {"output", ""}}));
  EXPECT_EQ((*rows)[1].line, 4);
  EXPECT_EQ((*rows)[2].line, 6);
}

TEST(RecordsTest, CsvErrors) {
  auto open = ParseCsv("d.csv", "a,b\n\"never closed,x\n");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().message(),
            "d.csv:2: a quoted field is never closed; fix: end it with a double quote (write \"\" for a quote inside "
            "it)");
  auto wide = ParseCsv("d.csv", "a,b\n1,2,3\n");
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.status().message(), "d.csv:2: row has 3 fields, the header 2; fix: quote fields that contain commas");
}

TEST(RecordsTest, TextLinesSkipBlankLines) {
  std::vector<Record> rows = ParseTextLines("t.txt", "one\r\n\ntwo");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].value["text"], "one");
  EXPECT_EQ(rows[1].where(), "t.txt:3: ");
}

// Found by tm_fuzz's dataset target: a lone '\r' ended no line, so "\r\r\n" gave the record "\r" and "\rline" kept
// its '\r'. Hugging Face's text builder reads with universal newlines: '\r' ends a line as '\n' and "\r\n" do.
TEST(RecordsTest, TextLinesEndAtALoneCarriageReturn) {
  std::vector<Record> rows = ParseTextLines("t.txt", "\r\r\n\rline\r\n\nold mac\rtwo\r");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].value["text"], "line");
  EXPECT_EQ(rows[0].where(), "t.txt:4: ");
  EXPECT_EQ(rows[1].value["text"], "old mac");
  EXPECT_EQ(rows[1].where(), "t.txt:6: ");
  EXPECT_EQ(rows[2].value["text"], "two");
  EXPECT_EQ(rows[2].where(), "t.txt:7: ");
}

}  // namespace
}  // namespace tmx::data
