#include "recipes/data/prompt_templates.h"

#include "base/text.h"

namespace tmx::data {
namespace {

struct Named {
  const char* dotpath;
  PromptTemplate::Tags tags;
};

const std::vector<Named>& TagTemplates() {
  static const auto* templates = new std::vector<Named>{
      {"torchtune.data.GrammarErrorCorrectionTemplate",
       {{"user", {"Correct this to standard English: ", "\n---\nCorrected: "}}}},
      {"torchtune.data.SummarizeTemplate", {{"user", {"Summarize this dialogue:\n", "\n---\nSummary:\n"}}}},
      {"torchtune.data.QuestionAnswerTemplate", {{"user", {"Question: ", "\n\nAnswer: "}}}},
  };
  return *templates;
}

constexpr const char* kChatML = "torchtune.data.ChatMLTemplate";
constexpr const char* kLlama2Chat = "torchtune.models.llama2.Llama2ChatTemplate";
constexpr const char* kMistralChat = "torchtune.models.mistral.MistralChatTemplate";

const PromptTemplate::Tags& ChatMLTags() {
  static const auto* tags = new PromptTemplate::Tags{
      {"system", {"<|im_start|>system\n", "<|im_end|>\n"}},
      {"user", {"<|im_start|>user\n", "<|im_end|>\n"}},
      {"assistant", {"<|im_start|>assistant\n", "<|im_end|>\n"}},
      {"ipython", {"", ""}},
  };
  return *tags;
}

// torchtune's PromptTemplate.__call__: the tags around the content of the roles in `tags`.
Message Tagged(const Message& m, const std::pair<std::string, std::string>& tag, bool append = true) {
  Message out = m;
  if (!tag.first.empty()) out.content.insert(out.content.begin(), tag.first);
  if (append && !tag.second.empty()) out.content.push_back(tag.second);
  return out;
}

}  // namespace

std::vector<std::string> PromptTemplateNames() {
  std::vector<std::string> names = {kChatML, kLlama2Chat, kMistralChat};
  for (const Named& t : TagTemplates()) names.push_back(t.dotpath);
  return names;
}

PromptTemplate PromptTemplate::Custom(Tags tags) { return PromptTemplate(Kind::kTags, "custom", std::move(tags)); }

StatusOr<PromptTemplate> PromptTemplate::FromName(const std::string& dotpath) {
  for (const Named& t : TagTemplates()) {
    if (dotpath == t.dotpath) return PromptTemplate(Kind::kTags, dotpath, t.tags);
  }
  if (dotpath == kChatML) return PromptTemplate(Kind::kChatML, dotpath, ChatMLTags());
  if (dotpath == kLlama2Chat) return PromptTemplate(Kind::kLlama2Chat, dotpath, {});
  if (dotpath == kMistralChat) return PromptTemplate(Kind::kMistralChat, dotpath, {});
  std::string message = "prompt_template " + dotpath + " is not supported";
  std::string close = ClosestMatch(dotpath, PromptTemplateNames());
  if (!close.empty()) message += " (did you mean " + close + "?)";
  return Status::NotFound(message + "; fix: use null, a {role: [prepend, append]} map, or one of: " +
                          JoinStrings(PromptTemplateNames(), ", "));
}

StatusOr<std::vector<Message>> PromptTemplate::Apply(const std::vector<Message>& messages) const {
  std::vector<Message> out;
  out.reserve(messages.size());
  std::vector<std::string> system_parts;  // Llama 2 folds the system prompt into the next user message
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    switch (kind_) {
      case Kind::kTags: {
        auto tag = tags_.find(m.role);
        out.push_back(tag == tags_.end() ? m : Tagged(m, tag->second));
        break;
      }
      case Kind::kChatML: {
        // The last assistant message, when empty, is left open for generation.
        bool open = m.role == "assistant" && i + 1 == messages.size() && m.text().empty();
        auto tag = tags_.find(m.role);
        out.push_back(tag == tags_.end() ? m : Tagged(m, tag->second, !open));
        break;
      }
      case Kind::kLlama2Chat: {
        if (m.role == "system") {
          system_parts = {"<<SYS>>\n"};
          system_parts.insert(system_parts.end(), m.content.begin(), m.content.end());
          system_parts.push_back("\n<</SYS>>\n\n");
          continue;
        }
        Message t = m;
        if (m.role == "user") {
          t.content = {"[INST] "};
          t.content.insert(t.content.end(), system_parts.begin(), system_parts.end());
          t.content.insert(t.content.end(), m.content.begin(), m.content.end());
          t.content.push_back(" [/INST] ");
        }
        out.push_back(std::move(t));
        break;
      }
      case Kind::kMistralChat: {
        if (m.role == "system") {
          return Status::InvalidArgument(
              "MistralChatTemplate does not support system prompts (message " + std::to_string(i) +
              " is one); fix: drop the system message or set the tokenizer's prompt_template to null");
        }
        // torchtune wraps every role in the user tags (the assistant's are empty strings, kept as parts).
        Message t = m;
        bool user = m.role == "user";
        t.content = {user ? "[INST] " : ""};
        t.content.insert(t.content.end(), m.content.begin(), m.content.end());
        t.content.push_back(user ? " [/INST] " : "");
        out.push_back(std::move(t));
        break;
      }
    }
  }
  return out;
}

}  // namespace tmx::data
