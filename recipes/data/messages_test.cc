#include "recipes/data/messages.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

std::vector<bool> Masks(const std::vector<Message>& messages) {
  std::vector<bool> masks;
  for (const Message& m : messages) masks.push_back(m.masked);
  return masks;
}

TEST(MessagesTest, MaskingStrategiesAsTorchtune) {
  std::vector<Message> messages = {Message("system", "s"), Message("user", "u1"), Message("assistant", "a1"),
                                   Message("user", "u2"), Message("assistant", "a2")};
  MaskMessages(&messages, MaskingStrategy::kTrainOnAll);
  EXPECT_EQ(Masks(messages), (std::vector<bool>{true, false, false, false, false}));
  MaskMessages(&messages, MaskingStrategy::kTrainOnAssistant);
  EXPECT_EQ(Masks(messages), (std::vector<bool>{true, true, false, true, false}));
  MaskMessages(&messages, MaskingStrategy::kTrainOnLast);
  EXPECT_EQ(Masks(messages), (std::vector<bool>{true, true, true, true, false}));
}

TEST(MessagesTest, ParseMaskingStrategy) {
  EXPECT_EQ(*ParseMaskingStrategy("train_on_last"), MaskingStrategy::kTrainOnLast);
  auto bad = ParseMaskingStrategy("train_on_input");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      "masking_strategy \"train_on_input\" is unknown; fix: use train_on_all, train_on_assistant or train_on_last");
}

TEST(MessagesTest, ValidateMessages) {
  EXPECT_TRUE(ValidateMessages({Message("user", "q"), Message("assistant", "a")}).ok());
  EXPECT_EQ(ValidateMessages({Message("user", "q")}).message(),
            "a conversation needs at least 2 messages, got 1; fix: give a prompt and a response");
  EXPECT_EQ(ValidateMessages({Message("user", "q"), Message("user", "q")}).message(),
            "two consecutive user messages at index 1 and 0");
  EXPECT_EQ(ValidateMessages({Message("user", "q"), Message("system", "s")}).message(),
            "system message at index 1, but system messages must come first");
  EXPECT_EQ(ValidateMessages({Message("assistant", "a"), Message("user", "q")}).message(),
            "assistant message at index 0 does not follow a user, tool or ipython message");
}

TEST(MessagesTest, PythonStrip) {
  EXPECT_EQ(StripPythonWhitespace(" \t\n x y \xC2\xA0\xE2\x80\x83"), "x y");  // NBSP and EM SPACE are whitespace
  EXPECT_EQ(StripPythonWhitespace("\xE4\xBD\xA0"), "\xE4\xBD\xA0");
  EXPECT_EQ(StripPythonWhitespace("   "), "");
  EXPECT_EQ(RstripSpaces("a \n  "), "a \n");
}

}  // namespace
}  // namespace tmx::data
