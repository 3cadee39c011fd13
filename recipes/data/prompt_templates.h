// Prompt templates: text tags put around messages before tokenization, as torchtune's prompt_template option of
// its tokenizer builders takes them. Torch-free.
//
// A template is named by torchtune's dotpath (see PromptTemplateNames()) or given as a custom map
// role -> (prepend, append), torchtune's dict form. The tags are tokenized as ordinary text, never as special
// tokens.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "recipes/data/messages.h"

namespace tmx::data {

class PromptTemplate {
 public:
  using Tags = std::map<std::string, std::pair<std::string, std::string>>;

  // A custom template (torchtune's PromptTemplate(template=...)): roles not in `tags` are left as they are.
  static PromptTemplate Custom(Tags tags);

  // The template torchtune's dotpath names. NotFound listing the supported dotpaths (with a did-you-mean) for any
  // other name.
  static StatusOr<PromptTemplate> FromName(const std::string& dotpath);

  // The messages with the tags added as extra content parts. InvalidArgument where torchtune raises
  // (MistralChatTemplate and a system message).
  StatusOr<std::vector<Message>> Apply(const std::vector<Message>& messages) const;

  // The dotpath, or "custom".
  const std::string& name() const { return name_; }
  // ChatML puts <|im_start|> tags around messages, which the Qwen formats already do.
  bool is_chatml() const { return kind_ == Kind::kChatML; }

 private:
  enum class Kind { kTags, kChatML, kLlama2Chat, kMistralChat };
  PromptTemplate(Kind kind, std::string name, Tags tags)
      : kind_(kind), name_(std::move(name)), tags_(std::move(tags)) {}

  Kind kind_;
  std::string name_;
  Tags tags_;
};

// The dotpaths FromName accepts.
std::vector<std::string> PromptTemplateNames();

}  // namespace tmx::data
