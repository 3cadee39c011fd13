#include "recipes/data/prompt_templates.h"

#include <gtest/gtest.h>

namespace tmx::data {
namespace {

TEST(PromptTemplatesTest, TagTemplatesWrapUserMessages) {
  auto t = PromptTemplate::FromName("torchtune.data.GrammarErrorCorrectionTemplate");
  ASSERT_TRUE(t.ok());
  auto out = t->Apply({Message("user", "he go"), Message("assistant", "He goes.")});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].content,
            (std::vector<std::string>{"Correct this to standard English: ", "he go", "\n---\nCorrected: "}));
  EXPECT_EQ((*out)[1].content, (std::vector<std::string>{"He goes."}));
}

TEST(PromptTemplatesTest, Llama2FoldsTheSystemPromptIntoTheUserTurn) {
  auto t = PromptTemplate::FromName("torchtune.models.llama2.Llama2ChatTemplate");
  ASSERT_TRUE(t.ok());
  auto out = t->Apply({Message("system", "Be brief."), Message("user", "Hi"), Message("assistant", "Hello")});
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].text(), "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] ");
  EXPECT_EQ((*out)[1].text(), "Hello");
}

TEST(PromptTemplatesTest, ChatMLLeavesAnEmptyLastAssistantOpen) {
  auto t = PromptTemplate::FromName("torchtune.data.ChatMLTemplate");
  ASSERT_TRUE(t.ok());
  auto out = t->Apply({Message("user", "Hi"), Message("assistant", "")});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].text(), "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ((*out)[1].text(), "<|im_start|>assistant\n");
}

TEST(PromptTemplatesTest, CustomTemplate) {
  PromptTemplate t = PromptTemplate::Custom({{"user", {"Q: ", "\nA: "}}});
  auto out = t.Apply({Message("user", "1+1?"), Message("assistant", "2")});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].text(), "Q: 1+1?\nA: ");
  EXPECT_EQ(t.name(), "custom");
}

TEST(PromptTemplatesTest, UnknownNameSuggestsTheClosest) {
  auto t = PromptTemplate::FromName("torchtune.data.SummarizeTemplat");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(t.status().message(),
            "prompt_template torchtune.data.SummarizeTemplat is not supported (did you mean "
            "torchtune.data.SummarizeTemplate?); fix: use null, a {role: [prepend, append]} map, or one of: "
            "torchtune.data.ChatMLTemplate, torchtune.models.llama2.Llama2ChatTemplate, "
            "torchtune.models.mistral.MistralChatTemplate, torchtune.data.GrammarErrorCorrectionTemplate, "
            "torchtune.data.SummarizeTemplate, torchtune.data.QuestionAnswerTemplate");
}

}  // namespace
}  // namespace tmx::data
