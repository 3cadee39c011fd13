// Messages: one turn of a conversation as torchtune's torchtune.data.Message holds it, and torchtune's masking
// strategies. Torch-free.
//
// A message's content is a list of text parts (torchtune's [{"type": "text", "content": ...}]); prompt templates
// add their tags as extra parts, and the SentencePiece chat formats encode each part separately, so the parts are
// kept apart. Images are not supported.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::data {

struct Message {
  // "system", "user", "assistant", "ipython" or "tool".
  std::string role;
  std::vector<std::string> content;
  // True: the message's tokens get no loss (label kIgnoreIndex).
  bool masked = false;
  // An assistant message that is a tool call (Llama 3 prefixes <|python_tag|>).
  bool ipython = false;
  // The message ends its turn (Llama 3: <|eot_id|>, else <|eom_id|>).
  bool eot = true;
  // Images before the text (torchtune's content [image, ..., text]): the Llama 3 format writes an <|image|>
  // token for each after the header; other formats refuse them.
  int64_t images = 0;

  Message() = default;
  Message(std::string role_, std::string text, bool masked_ = false)
      : role(std::move(role_)), content{std::move(text)}, masked(masked_) {}

  // The parts joined (torchtune's text_content).
  std::string text() const;
};

enum class MaskingStrategy {
  kTrainOnAll,        // "train_on_all": loss on every message except the system prompt
  kTrainOnAssistant,  // "train_on_assistant": loss on assistant messages only
  kTrainOnLast,       // "train_on_last": loss on the last assistant message only
};

// Parses torchtune's names; InvalidArgument naming the value and the three valid names.
StatusOr<MaskingStrategy> ParseMaskingStrategy(const std::string& name);

// torchtune's deprecated train_on_input: true -> kTrainOnAll, false -> kTrainOnAssistant.
inline MaskingStrategy MaskingFromTrainOnInput(bool train_on_input) {
  return train_on_input ? MaskingStrategy::kTrainOnAll : MaskingStrategy::kTrainOnAssistant;
}

// Sets each message's `masked` as torchtune's mask_messages does (system messages are always masked).
void MaskMessages(std::vector<Message>* messages, MaskingStrategy strategy);

// torchtune's validate_messages: at least two messages, system only first, no two user messages in a row, an
// assistant message after a user/tool/ipython one, tool/ipython only after an ipython message. InvalidArgument
// naming the index.
Status ValidateMessages(const std::vector<Message>& messages);

// Python's str.strip() / str.rstrip(" ") as torchtune applies them to message text.
std::string StripPythonWhitespace(const std::string& text);
std::string RstripSpaces(const std::string& text);

}  // namespace tmx::data
