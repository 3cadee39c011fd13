#include "recipes/data/message_transforms.h"

namespace tmx::data {
namespace {

using nlohmann::json;

std::string Column(const MessageTransform& t, const std::string& name) {
  auto it = t.column_map.find(name);
  return it == t.column_map.end() ? name : it->second;
}

// record[column] as a string. `required` false: absent or null gives "".
StatusOr<std::string> Text(const MessageTransform& t, const Record& record, const std::string& name, bool required) {
  std::string column = Column(t, name);
  const json& v = record.value;
  if (!v.is_object()) {
    return Status::InvalidArgument(record.where() + "record is " + DescribeJson(v) + ", expected an object");
  }
  auto it = v.find(column);
  if (it == v.end() || it->is_null()) {
    if (!required) return std::string();
    return Status::InvalidArgument(record.where() + "record has no \"" + column + "\" column; fix: set column_map: {" +
                                   name + ": <the column that holds it>}");
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(record.where() + "column \"" + column + "\" is " + DescribeJson(*it) +
                                   ", expected a string");
  }
  return it->get<std::string>();
}

StatusOr<const json*> List(const MessageTransform& t, const Record& record, const std::string& name) {
  std::string column = Column(t, name);
  if (!record.value.is_object() || !record.value.contains(column) || !record.value[column].is_array()) {
    return Status::InvalidArgument(record.where() + "record has no list \"" + column + "\"; fix: set column_map: {" +
                                   name + ": <the column that holds the conversation>}");
  }
  return &record.value[column];
}

// A string field of one message object.
StatusOr<std::string> Field(const Record& record, const json& message, size_t index, const char* field) {
  if (!message.is_object() || !message.contains(field) || !message[field].is_string()) {
    return Status::InvalidArgument(record.where() + "message " + std::to_string(index) + " has no string \"" + field +
                                   "\"");
  }
  return message[field].get<std::string>();
}

// message[field] as a bool: `fallback` when absent or null. nlohmann's value() throws type_error on any other
// type; a record's fields are the user's, so that is a message naming the record instead.
StatusOr<bool> Flag(const Record& record, const json& message, size_t index, const char* field, bool fallback) {
  auto it = message.find(field);
  if (it == message.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return Status::InvalidArgument(record.where() + "message " + std::to_string(index) + " field \"" + field + "\" is " +
                                   DescribeJson(*it) + ", expected true or false");
  }
  return it->get<bool>();
}

// message["role"] when `message` is an object with a string role, else "".
std::string RoleOf(const json& message) {
  if (!message.is_object()) return "";
  auto it = message.find("role");
  return it != message.end() && it->is_string() ? it->get<std::string>() : "";
}

void AddSystemPrompt(const MessageTransform& t, std::vector<Message>* messages) {
  if (t.new_system_prompt) messages->insert(messages->begin(), Message("system", *t.new_system_prompt, true));
}

StatusOr<std::vector<Message>> ShareGpt(const MessageTransform& t, const Record& record) {
  StatusOr<const json*> list = List(t, record, "conversations");
  if (!list.ok()) return list.status();
  std::vector<Message> messages;
  for (size_t i = 0; i < (*list)->size(); ++i) {
    const json& m = (**list)[i];
    StatusOr<std::string> from = Field(record, m, i, "from");
    if (!from.ok()) return from.status();
    StatusOr<std::string> value = Field(record, m, i, "value");
    if (!value.ok()) return value.status();
    std::string role = *from == "human" ? "user" : *from == "gpt" ? "assistant" : *from;
    if (role != "user" && role != "assistant" && role != "system") {
      return Status::InvalidArgument(record.where() + "message " + std::to_string(i) + " is from \"" + *from +
                                     "\"; fix: ShareGPT messages are from system, human or gpt");
    }
    if (role == "system" && t.new_system_prompt) continue;
    messages.emplace_back(role, *value);
  }
  return messages;
}

StatusOr<std::vector<Message>> OpenAi(const MessageTransform& t, const Record& record) {
  StatusOr<const json*> list = List(t, record, "messages");
  if (!list.ok()) return list.status();
  const json& all = **list;
  std::vector<Message> messages;
  for (size_t i = 0; i < all.size(); ++i) {
    StatusOr<std::string> role = Field(record, all[i], i, "role");
    if (!role.ok()) return role.status();
    if (*role == "system" && t.new_system_prompt) continue;
    Message m;
    m.role = *role;
    const json& content = all[i].value("content", json());
    if (content.is_string()) {
      m.content = {content.get<std::string>()};
    } else if (content.is_array()) {
      for (size_t p = 0; p < content.size(); ++p) {
        const json& part = content[p];
        // image_url parts are dropped: tune-matrix has no vision models
        if (!part.is_object() || !part.contains("type") || part["type"] != "text") continue;
        if (!part.contains("text")) continue;
        if (!part["text"].is_string()) {
          return Status::InvalidArgument(record.where() + "message " + std::to_string(i) + " content part " +
                                         std::to_string(p) + " \"text\" is " + DescribeJson(part["text"]) +
                                         ", expected a string");
        }
        m.content.push_back(part["text"].get<std::string>());
      }
    } else {
      return Status::InvalidArgument(record.where() + "message " + std::to_string(i) +
                                     " has no \"content\" string or list");
    }
    std::string next_role = i + 1 < all.size() ? RoleOf(all[i + 1]) : "";
    bool next_is_tool = next_role == "tool" || next_role == "ipython";
    m.eot = !(m.role == "tool" || m.role == "ipython" || (m.role == "assistant" && next_is_tool));
    messages.push_back(std::move(m));
  }
  return messages;
}

StatusOr<std::vector<Message>> FromDicts(const Record& record, const json& list, const char* column) {
  if (!list.is_array()) {
    return Status::InvalidArgument(record.where() + "column \"" + column + "\" is " + DescribeJson(list) +
                                   ", expected a list of {role, content} messages");
  }
  std::vector<Message> messages;
  for (size_t i = 0; i < list.size(); ++i) {
    StatusOr<std::string> role = Field(record, list[i], i, "role");
    if (!role.ok()) return role.status();
    StatusOr<std::string> content = Field(record, list[i], i, "content");
    if (!content.ok()) return content.status();
    StatusOr<bool> masked = Flag(record, list[i], i, "masked", false);
    StatusOr<bool> ipython = Flag(record, list[i], i, "ipython", false);
    StatusOr<bool> eot = Flag(record, list[i], i, "eot", true);
    for (const StatusOr<bool>* flag : {&masked, &ipython, &eot}) {
      if (!flag->ok()) return flag->status();
    }
    Message m(*role, *content, *masked);
    m.ipython = *ipython;
    m.eot = *eot;
    messages.push_back(std::move(m));
  }
  return messages;
}

}  // namespace

std::string AlpacaPrompt(const std::string& instruction, const std::string& input) {
  if (input.empty()) {
    return "Below is an instruction that describes a task. Write a response that appropriately completes the "
           "request.\n\n### Instruction:\n" +
           instruction + "\n\n### Response:\n";
  }
  return "Below is an instruction that describes a task, paired with an input that provides further context. Write "
         "a response that appropriately completes the request.\n\n### Instruction:\n" +
         instruction + "\n\n### Input:\n" + input + "\n\n### Response:\n";
}

StatusOr<std::vector<Message>> ToMessages(const MessageTransform& t, const Record& record) {
  std::vector<Message> messages;
  switch (t.style) {
    case MessageStyle::kAlpaca: {
      StatusOr<std::string> instruction = Text(t, record, "instruction", true);
      if (!instruction.ok()) return instruction.status();
      StatusOr<std::string> input = Text(t, record, "input", false);
      if (!input.ok()) return input.status();
      StatusOr<std::string> output = Text(t, record, "output", true);
      if (!output.ok()) return output.status();
      messages = {Message("user", AlpacaPrompt(*instruction, *input)), Message("assistant", *output)};
      break;
    }
    case MessageStyle::kInputOutput: {
      StatusOr<std::string> input = Text(t, record, "input", true);
      if (!input.ok()) return input.status();
      StatusOr<std::string> output = Text(t, record, "output", true);
      if (!output.ok()) return output.status();
      messages = {Message("user", *input), Message("assistant", *output)};
      AddSystemPrompt(t, &messages);
      break;
    }
    case MessageStyle::kShareGpt:
    case MessageStyle::kOpenAi: {
      StatusOr<std::vector<Message>> got = t.style == MessageStyle::kShareGpt ? ShareGpt(t, record) : OpenAi(t, record);
      if (!got.ok()) return got.status();
      messages = std::move(got).value();
      AddSystemPrompt(t, &messages);
      break;
    }
    default:
      return Status::Internal("ToMessages: a preference style; use ToPreferenceMessages");
  }
  MaskMessages(&messages, t.masking);
  return messages;
}

StatusOr<std::pair<std::vector<Message>, std::vector<Message>>> ToPreferenceMessages(const MessageTransform& t,
                                                                                     const Record& record) {
  std::vector<Message> chosen, rejected;
  if (t.style == MessageStyle::kStackExchangePaired) {
    StatusOr<std::string> prompt = Text(t, record, "prompt", true);
    if (!prompt.ok()) return prompt.status();
    StatusOr<std::string> good = Text(t, record, "chosen", true);
    if (!good.ok()) return good.status();
    StatusOr<std::string> bad = Text(t, record, "rejected", true);
    if (!bad.ok()) return bad.status();
    chosen = {Message("user", *prompt, !t.train_on_input), Message("assistant", *good)};
    rejected = {Message("user", *prompt, !t.train_on_input), Message("assistant", *bad)};
    return std::make_pair(std::move(chosen), std::move(rejected));
  }
  if (t.style != MessageStyle::kChosenRejected) {
    return Status::Internal("ToPreferenceMessages: not a preference style; use ToMessages");
  }
  for (const char* side : {"chosen", "rejected"}) {
    std::string column = Column(t, side);
    if (!record.value.is_object() || !record.value.contains(column)) {
      return Status::InvalidArgument(record.where() + "record has no \"" + column +
                                     "\" column; fix: set column_map: {" + side + ": <the column that holds it>}");
    }
    StatusOr<std::vector<Message>> messages = FromDicts(record, record.value[column], column.c_str());
    if (!messages.ok()) return messages.status();
    std::vector<Message>& out = std::string(side) == "chosen" ? chosen : rejected;
    for (Message& m : *messages) {
      if (!(m.role == "system" && t.new_system_prompt)) out.push_back(std::move(m));
    }
    AddSystemPrompt(t, &out);
    MaskMessages(&out, t.masking);
  }
  return std::make_pair(std::move(chosen), std::move(rejected));
}

}  // namespace tmx::data
