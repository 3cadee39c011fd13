// Message transforms: one dataset record (a JSON object) -> the conversation torchtune's message transforms make
// of it (torchtune.data._messages and the datasets' own). Torch-free.
//
// Column names go through `column_map` (torchtune's: expected name -> the record's column). Errors name the
// record's file:line, the missing or mistyped column and the column_map fix.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "recipes/data/messages.h"
#include "recipes/data/records.h"

namespace tmx::data {

using ColumnMap = std::map<std::string, std::string>;

enum class MessageStyle {
  kAlpaca,              // AlpacaToMessages: instruction, input (optional), output -> Alpaca prompt + response
  kInputOutput,         // InputOutputToMessages: input, output
  kShareGpt,            // ShareGPTToMessages: conversations [{from: system|human|gpt, value}]
  kOpenAi,              // OpenAIToMessages: messages [{role, content (string or [{type: text, text}])}]
  kChosenRejected,      // ChosenRejectedToMessages: chosen, rejected [{role, content}]
  kStackExchangePaired  // StackExchangePairedToMessages: prompt, chosen, rejected strings
};

struct MessageTransform {
  MessageStyle style = MessageStyle::kInputOutput;
  ColumnMap column_map;  // empty: the style's own column names
  MaskingStrategy masking = MaskingStrategy::kTrainOnAssistant;
  // Prepended as a masked system message (replacing the record's own system messages). Not for kAlpaca and
  // kStackExchangePaired, which torchtune does not give one.
  std::optional<std::string> new_system_prompt;
  // kStackExchangePaired only: torchtune masks its prompt unless train_on_input (it ignores `masking`).
  bool train_on_input = false;
};

// The conversation of `record` (kAlpaca, kInputOutput, kShareGpt, kOpenAi), masked.
StatusOr<std::vector<Message>> ToMessages(const MessageTransform& transform, const Record& record);

// The chosen and rejected conversations of `record` (kChosenRejected, kStackExchangePaired).
StatusOr<std::pair<std::vector<Message>, std::vector<Message>>> ToPreferenceMessages(const MessageTransform& transform,
                                                                                     const Record& record);

// torchtune's Alpaca prompt with an input and without one (AlpacaToMessages' template).
std::string AlpacaPrompt(const std::string& instruction, const std::string& input);

}  // namespace tmx::data
