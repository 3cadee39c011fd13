#include "recipes/data/chat_format.h"

#include <algorithm>

namespace tmx::data {
namespace {

void Append(TokenizedMessages* out, const std::vector<int64_t>& tokens, bool masked) {
  out->tokens.insert(out->tokens.end(), tokens.begin(), tokens.end());
  out->mask.insert(out->mask.end(), tokens.size(), masked);
}

}  // namespace

template <typename T>
std::vector<T> ModelTokenizer::Truncate(std::vector<T> items, int64_t max_seq_len, bool left, std::optional<T> last) {
  size_t keep = static_cast<size_t>(std::max<int64_t>(max_seq_len, 0));
  if (items.size() > keep) {
    if (left) {
      items.erase(items.begin(), items.end() - static_cast<std::ptrdiff_t>(keep));
    } else {
      items.resize(keep);
    }
  }
  if (last && !items.empty() && items.back() != *last) items.back() = *last;
  return items;
}

template std::vector<int64_t> ModelTokenizer::Truncate(std::vector<int64_t>, int64_t, bool, std::optional<int64_t>);
template std::vector<bool> ModelTokenizer::Truncate(std::vector<bool>, int64_t, bool, std::optional<bool>);

ModelTokenizer::ModelTokenizer(std::string name, std::unique_ptr<Tokenizer> base, ChatFormat format,
                               ModelTokenizerOptions options)
    : name_(std::move(name)), base_(std::move(base)), format_(format), options_(std::move(options)) {}

std::vector<int64_t> ModelTokenizer::Text(const std::string& text, bool trim_leading_whitespace) const {
  EncodeOptions options;
  options.trim_leading_whitespace = trim_leading_whitespace;
  return base_->Encode(text, options);
}

void ModelTokenizer::TruncateBoth(TokenizedMessages* out, std::optional<int64_t> eos,
                                  std::optional<bool> eos_mask) const {
  int64_t max = *options_.max_seq_len;
  out->tokens = Truncate(std::move(out->tokens), max, options_.truncate_left, eos);
  out->mask = Truncate(std::move(out->mask), max, options_.truncate_left, eos_mask);
}

HeaderTokens HeaderTokensOf(ChatFormat format) {
  if (format == ChatFormat::kLlama4) return {"<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>", nullptr};
  return {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>", "<|python_tag|>"};
}

std::vector<int64_t> ModelTokenizer::StopTokens() const {
  std::vector<int64_t> ids = {base_->eos_id()};
  if (format_ == ChatFormat::kLlama3 || format_ == ChatFormat::kLlama4) {
    const HeaderTokens names = HeaderTokensOf(format_);
    ids.push_back(base_->SpecialId(names.eot));
    ids.push_back(base_->SpecialId(names.eom));
  }
  if (format_ == ChatFormat::kQwen2 || format_ == ChatFormat::kQwen2_5) ids.push_back(base_->pad_id());
  std::vector<int64_t> out;
  for (int64_t id : ids) {
    if (id != kNoId && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

StatusOr<TokenizedMessages> ModelTokenizer::TokenizeMessages(const std::vector<Message>& messages,
                                                             bool add_end_tokens) const {
  std::vector<Message> templated = messages;
  if (options_.prompt_template) {
    if (options_.prompt_template->is_chatml() && (format_ == ChatFormat::kQwen2 || format_ == ChatFormat::kQwen2_5)) {
      return Status::InvalidArgument(name_ + ": prompt_template " + options_.prompt_template->name() +
                                     " would wrap every message in <|im_*|> tokens twice; fix: set it to null (the "
                                     "Qwen format is ChatML already)");
    }
    StatusOr<std::vector<Message>> applied = options_.prompt_template->Apply(messages);
    if (!applied.ok()) return applied.status().WithContext(name_);
    templated = std::move(applied).value();
  }
  for (const Message& m : templated) {
    if (m.images > 0 && format_ != ChatFormat::kLlama3) {
      return Status::FailedPrecondition(name_ + ": has no <|image|> token for a message's image; fix: use "
                                                "torchtune.models.llama3_2_vision.llama3_2_vision_transform");
    }
  }
  try {
    switch (format_) {
      case ChatFormat::kLlama3:
      case ChatFormat::kLlama4:
        return Llama3(templated, add_end_tokens);
      case ChatFormat::kNoSpecialTokens:
        return NoSpecialTokens(templated, add_end_tokens);
      case ChatFormat::kPhi3:
        return Phi3(templated);
      case ChatFormat::kQwen2:
      case ChatFormat::kQwen2_5:
        return Qwen(templated, add_end_tokens);
      case ChatFormat::kPhi4:
        return Phi4(templated);
      case ChatFormat::kNone:
        break;
    }
  } catch (const TokenizeError& e) {
    return e.status().WithContext(name_);
  }
  return Status::FailedPrecondition(name_ +
                                    ": has no chat format (torchtune renders the model's Jinja chat "
                                    "template, which tune-matrix does not); fix: use the model family's own "
                                    "tokenizer for chat and instruct datasets, or a text_completion_dataset");
}

TokenizedMessages ModelTokenizer::Llama3(const std::vector<Message>& messages, bool add_end_tokens) const {
  const Tokenizer& t = *base_;
  const HeaderTokens names = HeaderTokensOf(format_);
  TokenizedMessages out;
  Append(&out, {t.bos_id()}, true);
  for (size_t i = 0; i < messages.size(); ++i) {
    const Message& m = messages[i];
    std::vector<int64_t> tokens = {t.SpecialId(names.start)};
    std::vector<int64_t> role = Text(StripPythonWhitespace(m.role));
    tokens.insert(tokens.end(), role.begin(), role.end());
    tokens.push_back(t.SpecialId(names.end));
    std::vector<int64_t> blank = Text("\n\n");
    tokens.insert(tokens.end(), blank.begin(), blank.end());
    for (int64_t k = 0; k < m.images; ++k) tokens.push_back(t.SpecialId("<|image|>"));
    if (m.ipython && names.python != nullptr) tokens.push_back(t.SpecialId(names.python));
    for (const std::string& part : m.content) {
      std::vector<int64_t> body = Text(StripPythonWhitespace(part));
      tokens.insert(tokens.end(), body.begin(), body.end());
    }
    if (add_end_tokens || i + 1 < messages.size()) {
      tokens.push_back(t.SpecialId(m.eot ? names.eot : names.eom));
    }
    Append(&out, tokens, m.masked);
    if (options_.max_seq_len && static_cast<int64_t>(out.tokens.size()) >= *options_.max_seq_len) break;
  }
  if (add_end_tokens) Append(&out, {t.eos_id()}, true);
  if (options_.max_seq_len) {
    TruncateBoth(&out, add_end_tokens ? std::optional<int64_t>(t.eos_id()) : std::nullopt,
                 add_end_tokens ? std::optional<bool>(true) : std::nullopt);
  }
  return out;
}

TokenizedMessages ModelTokenizer::NoSpecialTokens(const std::vector<Message>& messages, bool add_end_tokens) const {
  const Tokenizer& t = *base_;
  TokenizedMessages out;
  bool start_of_turn = true;
  bool prev_ends_with_space = false;
  bool last_masked = false;
  for (const Message& m : messages) {
    last_masked = m.masked;
    bool end_of_turn = m.role == "assistant";
    if (start_of_turn) Append(&out, {t.bos_id()}, m.masked);
    bool trim = !start_of_turn && !prev_ends_with_space;
    for (const std::string& part : m.content) Append(&out, Text(RstripSpaces(part), trim), m.masked);
    if (!m.content.empty()) prev_ends_with_space = !m.content.back().empty() && m.content.back().back() == ' ';
    if (end_of_turn) {
      if (add_end_tokens) Append(&out, {t.eos_id()}, m.masked);
      start_of_turn = true;
    } else {
      start_of_turn = false;
    }
    if (options_.max_seq_len && static_cast<int64_t>(out.tokens.size()) >= *options_.max_seq_len) break;
  }
  if (options_.max_seq_len) {
    TruncateBoth(&out, add_end_tokens ? std::optional<int64_t>(t.eos_id()) : std::nullopt,
                 add_end_tokens ? std::optional<bool>(last_masked) : std::nullopt);
  }
  return out;
}

// torchtune 0.6.1's Phi3MiniTokenizer: its __call__ runs tokenize_messages with add_eos=False (whether or not for
// inference), so no <|endoftext|> follows an assistant turn, no later turn starts with a BOS, and truncation keeps
// the first max_seq_len tokens as they are.
StatusOr<TokenizedMessages> ModelTokenizer::Phi3(const std::vector<Message>& messages) const {
  const Tokenizer& t = *base_;
  TokenizedMessages out;
  std::vector<int64_t> newline = Text("\n");
  for (const Message& m : messages) {
    if (m.role != "user" && m.role != "assistant" && m.role != "system") {
      return Status::InvalidArgument(name_ + ": unknown role '" + m.role + "' for message '" + m.text() +
                                     "'; fix: Phi-3 takes system, user and assistant messages");
    }
    if (out.tokens.empty()) Append(&out, {t.bos_id()}, m.masked);
    Append(&out, {t.SpecialId("<|" + m.role + "|>")}, m.masked);
    Append(&out, newline, m.masked);
    for (const std::string& part : m.content) Append(&out, Text(RstripSpaces(part), true), m.masked);
    Append(&out, {t.SpecialId("<|end|>")}, m.masked);
    Append(&out, newline, m.masked);
    if (options_.max_seq_len && static_cast<int64_t>(out.tokens.size()) >= *options_.max_seq_len) break;
  }
  if (options_.max_seq_len) TruncateBoth(&out, std::nullopt, std::nullopt);
  return out;
}

TokenizedMessages ModelTokenizer::Qwen(const std::vector<Message>& messages, bool add_end_tokens) const {
  const Tokenizer& t = *base_;
  const int64_t im_start = t.SpecialId("<|im_start|>"), im_end = t.SpecialId("<|im_end|>");
  const bool v2_5 = format_ == ChatFormat::kQwen2_5;
  auto start = [&](std::vector<int64_t>* tokens, const std::string& role) {
    tokens->push_back(im_start);
    std::vector<int64_t> r = Text(role + "\n");
    tokens->insert(tokens->end(), r.begin(), r.end());
  };
  auto end = [&](std::vector<int64_t>* tokens) {
    tokens->push_back(im_end);
    std::vector<int64_t> nl = Text("\n");
    tokens->insert(tokens->end(), nl.begin(), nl.end());
  };
  auto text = [&](std::vector<int64_t>* tokens, const std::string& s) {
    std::vector<int64_t> ids = Text(s);
    tokens->insert(tokens->end(), ids.begin(), ids.end());
  };
  TokenizedMessages out;
  const size_t n = messages.size();
  for (size_t i = 0; i < n; ++i) {
    const Message& m = messages[i];
    const bool last = i + 1 == n;
    const bool tool = m.role == "ipython";
    std::vector<int64_t> tokens;
    if (v2_5 && tool) {  // consecutive tool responses share one user turn
      if (i == 0 || messages[i - 1].role != "ipython") {
        start(&tokens, "user");
        text(&tokens, "<tool_response>\n");
      } else {
        text(&tokens, "\n<tool_response>\n");
      }
    } else if (!tool) {
      start(&tokens, m.role);
      if (v2_5 && m.role == "assistant" && m.ipython) {
        tokens.push_back(t.SpecialId("<tool_call>"));
        text(&tokens, "\n");
      }
    }
    for (const std::string& part : m.content) text(&tokens, part);
    if (v2_5 && tool) {
      text(&tokens, "\n</tool_response>");
      if (last || messages[i + 1].role != "ipython") end(&tokens);
    } else if (!tool) {
      if (v2_5 && m.role == "assistant" && m.ipython) {
        text(&tokens, "\n");
        tokens.push_back(t.SpecialId("</tool_call>"));
      }
      if (m.role != "assistant" || !last) end(&tokens);
    }
    Append(&out, tokens, m.masked);
    if (options_.max_seq_len && static_cast<int64_t>(out.tokens.size()) >= *options_.max_seq_len) break;
  }
  if (add_end_tokens) Append(&out, {t.eos_id()}, out.mask.empty() ? true : static_cast<bool>(out.mask.back()));
  if (options_.max_seq_len) {
    TruncateBoth(&out, add_end_tokens ? std::optional<int64_t>(t.eos_id()) : std::nullopt,
                 add_end_tokens ? std::optional<bool>(true) : std::nullopt);
  }
  return out;
}

// torchtune 0.6.1's Phi4Tokenizer: like Phi-3's, its __call__ runs tokenize_messages with add_eos=False, so no
// <|im_end|> closes an assistant message (only the others') and truncation keeps the first max_seq_len tokens as they
// are. The role is encoded as text, whatever it is; each text part loses its trailing spaces.
TokenizedMessages ModelTokenizer::Phi4(const std::vector<Message>& messages) const {
  const Tokenizer& t = *base_;
  const int64_t im_start = t.SpecialId("<|im_start|>"), im_sep = t.SpecialId("<|im_sep|>"),
                im_end = t.SpecialId("<|im_end|>");
  TokenizedMessages out;
  for (const Message& m : messages) {
    Append(&out, {im_start}, m.masked);
    Append(&out, Text(m.role), m.masked);
    Append(&out, {im_sep}, m.masked);
    for (const std::string& part : m.content) Append(&out, Text(RstripSpaces(part)), m.masked);
    if (m.role != "assistant") Append(&out, {im_end}, m.masked);
    if (options_.max_seq_len && static_cast<int64_t>(out.tokens.size()) >= *options_.max_seq_len) break;
  }
  if (options_.max_seq_len) TruncateBoth(&out, std::nullopt, std::nullopt);
  return out;
}

}  // namespace tmx::data
