#include "recipes/data/messages.h"

#include "recipes/data/tokenizers/unicode.h"

namespace tmx::data {

std::string Message::text() const {
  std::string joined;
  for (const std::string& part : content) joined += part;
  return joined;
}

StatusOr<MaskingStrategy> ParseMaskingStrategy(const std::string& name) {
  if (name == "train_on_all") return MaskingStrategy::kTrainOnAll;
  if (name == "train_on_assistant") return MaskingStrategy::kTrainOnAssistant;
  if (name == "train_on_last") return MaskingStrategy::kTrainOnLast;
  return Status::InvalidArgument("masking_strategy \"" + name +
                                 "\" is unknown; fix: use train_on_all, train_on_assistant or train_on_last");
}

void MaskMessages(std::vector<Message>* messages, MaskingStrategy strategy) {
  bool marked_last = false;
  for (auto it = messages->rbegin(); it != messages->rend(); ++it) {
    Message& m = *it;
    if (m.role == "system") {
      m.masked = true;
    } else if (strategy == MaskingStrategy::kTrainOnLast) {
      m.masked = !(m.role == "assistant" && !marked_last);
      if (m.role == "assistant") marked_last = true;
    } else if (strategy == MaskingStrategy::kTrainOnAll) {
      m.masked = false;  // torchtune masks only user messages with images, which tune-matrix does not have
    } else {
      m.masked = m.role != "assistant";
    }
  }
}

Status ValidateMessages(const std::vector<Message>& messages) {
  if (messages.size() < 2) {
    return Status::InvalidArgument("a conversation needs at least 2 messages, got " + std::to_string(messages.size()) +
                                   "; fix: give a prompt and a response");
  }
  Message last;
  last.role = "assistant";
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    std::string at = " at index " + std::to_string(i);
    if (m.role == "assistant" && last.role != "user" && last.role != "tool" && last.role != "ipython") {
      return Status::InvalidArgument("assistant message" + at + " does not follow a user, tool or ipython message");
    }
    if (m.role == "user" && last.role == "user") {
      return Status::InvalidArgument("two consecutive user messages" + at + " and " + std::to_string(i - 1));
    }
    if (m.role == "system" && i > 0) {
      return Status::InvalidArgument("system message" + at + ", but system messages must come first");
    }
    if ((m.role == "tool" || m.role == "ipython") && !last.ipython) {
      return Status::InvalidArgument("tool or ipython message" + at + " must follow an ipython message");
    }
    last = m;
  }
  return Status::OK();
}

std::string StripPythonWhitespace(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end) {
    size_t pos = begin;
    if (!IsPythonSpace(NextCodePoint(text, &pos))) break;
    begin = pos;
  }
  while (end > begin) {  // walk back to the start of the last code point
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!IsPythonSpace(NextCodePoint(text, &pos))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

std::string RstripSpaces(const std::string& text) {
  size_t end = text.find_last_not_of(' ');
  return end == std::string::npos ? "" : text.substr(0, end + 1);
}

}  // namespace tmx::data
