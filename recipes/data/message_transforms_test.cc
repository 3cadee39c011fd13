#include "recipes/data/message_transforms.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

Record R(nlohmann::json value) { return Record{std::move(value), "d.json", 7}; }

TEST(MessageTransformsTest, AlpacaUsesTheNoInputPromptForAnEmptyInput) {
  MessageTransform t;
  t.style = MessageStyle::kAlpaca;
  t.masking = MaskingStrategy::kTrainOnAll;
  auto m = ToMessages(t, R({{"instruction", "Say hi."}, {"input", ""}, {"output", "Hi!"}}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].text(), AlpacaPrompt("Say hi.", ""));
  EXPECT_EQ((*m)[0].text().find("### Input:"), std::string::npos);
  EXPECT_FALSE((*m)[0].masked);
}

TEST(MessageTransformsTest, ShareGptWithANewSystemPrompt) {
  MessageTransform t;
  t.style = MessageStyle::kShareGpt;
  t.new_system_prompt = "Be kind.";
  auto m = ToMessages(t, R({{"conversations",
                             {{{"from", "system"}, {"value", "old"}},
                              {{"from", "human"}, {"value", "q"}},
                              {{"from", "gpt"}, {"value", "a"}}}}}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].text(), "Be kind.");
  EXPECT_EQ((*m)[1].role, "user");
  EXPECT_TRUE((*m)[1].masked);
  EXPECT_FALSE((*m)[2].masked);
}

TEST(MessageTransformsTest, OpenAiToolCallsAreNotEndOfTurn) {
  MessageTransform t;
  t.style = MessageStyle::kOpenAi;
  auto m = ToMessages(t, R({{"messages",
                             {{{"role", "user"}, {"content", "q"}},
                              {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "call"}}}}},
                              {{"role", "tool"}, {"content", "42"}}}}}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE((*m)[1].eot);
  EXPECT_FALSE((*m)[2].eot);
  EXPECT_EQ((*m)[1].text(), "call");
}

// Fields of the wrong type made nlohmann's value() and conversions throw type_error out of the transform; the
// trainer's catch-all then reported the library's text as an internal failure.
TEST(MessageTransformsTest, FieldsOfTheWrongTypeNameTheRecordAndMessage) {
  MessageTransform t;
  t.style = MessageStyle::kOpenAi;
  auto m = ToMessages(t, R({{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", 5}}}}}}}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "d.json:7: message 0 content part 0 \"text\" is a number, expected a string");
  // A next message that is not an object: reported as itself, not as a type_error from peeking at its role.
  m = ToMessages(t, R({{"messages", {{{"role", "user"}, {"content", "q"}}, 3}}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "d.json:7: message 1 has no string \"role\"");
  MessageTransform chosen_rejected;
  chosen_rejected.style = MessageStyle::kChosenRejected;
  auto pair = ToPreferenceMessages(
      chosen_rejected, R({{"chosen", {{{"role", "user"}, {"content", "q"}, {"masked", "yes"}}}}, {"rejected", {}}}));
  ASSERT_FALSE(pair.ok());
  EXPECT_EQ(pair.status().message(), "d.json:7: message 0 field \"masked\" is a string, expected true or false");
}

TEST(MessageTransformsTest, MissingColumnNamesRecordAndFix) {
  MessageTransform t;
  t.column_map = {{"input", "question"}, {"output", "answer"}};
  auto m = ToMessages(t, R({{"question", "q"}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "d.json:7: record has no \"answer\" column; fix: set column_map: {output: <the column that holds it>}");
  m = ToMessages(t, R({{"question", 3}, {"answer", "a"}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "d.json:7: column \"question\" is a number, expected a string");
}

TEST(MessageTransformsTest, StackExchangeMasksThePromptUnlessTrainOnInput) {
  MessageTransform t;
  t.style = MessageStyle::kStackExchangePaired;
  auto pair = ToPreferenceMessages(t, R({{"prompt", "p"}, {"chosen", "good"}, {"rejected", "bad"}}));
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  EXPECT_TRUE(pair->first[0].masked);
  EXPECT_EQ(pair->first[1].text(), "good");
  EXPECT_EQ(pair->second[1].text(), "bad");
}

}  // namespace
}  // namespace tmx::data
