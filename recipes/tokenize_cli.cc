#include "recipes/tokenize_cli.h"

#include <iostream>
#include <iterator>

#include "harness/config_store.h"
#include "recipes/data/config_options.h"
#include "recipes/data/inspect.h"
#include "recipes/data/messages.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::recipes {
namespace {

int Usage(std::ostream& err, const std::string& message) {
  err << "error: tune tokenize: " << message << "\nRun 'tune help tokenize' for usage.\n";
  return kExitUsage;
}

int Fail(std::ostream& err, const Status& s) {
  err << "error: " << s.message() << "\n";
  return kExitUsage;
}

}  // namespace

int Tokenize(const Registry& registry, const std::vector<std::string>& args, std::istream& in, std::ostream& out,
             std::ostream& err) {
  ParsedArgs parsed;
  std::string error;
  if (!ParseArgs(args, {"plain", "chat"}, {"text"}, &parsed, &error)) return Usage(err, error);
  if (parsed.positional.empty()) return Usage(err, "expected <config> [key=value ...] [--text TEXT]");
  if (parsed.Has("plain") && parsed.Has("chat")) return Usage(err, "--plain and --chat exclude each other");
  StatusOr<LocatedConfig> located = LocateConfig(parsed.positional[0], registry);
  if (!located.ok()) return Fail(err, located.status());
  StatusOr<Config> config = LoadResolvedConfig(
      *located, std::vector<std::string>(parsed.positional.begin() + 1, parsed.positional.end()));
  if (!config.ok()) return Fail(err, config.status());
  StatusOr<data::TokenizerConfig> tokenizer_config = data::TokenizerFromConfig(*config);
  if (!tokenizer_config.ok()) return Fail(err, tokenizer_config.status());
  StatusOr<std::unique_ptr<data::ModelTokenizer>> tokenizer =
      data::BuildTokenizer(tokenizer_config->component, tokenizer_config->options);
  if (!tokenizer.ok()) {
    return Fail(err, tokenizer.status().WithContext(config->OriginOf("tokenizer").ToString() + ": tokenizer"));
  }
  std::string text = parsed.Has("text") ? parsed.Get("text")
                                        : std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());

  const data::ModelTokenizer& t = **tokenizer;
  out << "tokenizer: " << t.name() << " (" << t.base().vocab_size() << " ids)\n";
  if (!parsed.Has("chat")) {
    std::vector<int64_t> ids;
    try {
      ids = t.Encode(text, /*add_bos=*/true, /*add_eos=*/true);
    } catch (const data::TokenizeError& e) {
      return Fail(err, e.status().WithContext(t.name()));
    }
    out << "\nplain (BOS and EOS added): " << ids.size() << " tokens\n" << data::DescribeTokens(t.base(), ids);
  }
  if (!parsed.Has("plain")) {
    std::vector<data::Message> messages = {data::Message("user", text, /*masked=*/true),
                                           data::Message("assistant", "")};
    StatusOr<data::TokenizedMessages> chat = t.TokenizeMessages(messages);
    if (!chat.ok()) return Fail(err, chat.status().WithContext("chat format of " + t.name()));
    out << "\nchat format (the text as a user turn, an empty assistant reply; masked: no loss): "
        << chat->tokens.size() << " tokens\n"
        << data::DescribeTokens(t.base(), chat->tokens, chat->mask);
  }
  return kExitOk;
}

Subcommand TokenizeSubcommand(const Registry& registry) {
  const Registry* r = &registry;
  return {"tokenize", "tokenize <config> [key=value ...] [--text TEXT] [--plain | --chat]",
          "Show the token ids and pieces a config's tokenizer makes of a text",
          "Loads the config's tokenizer (component, files, prompt template, max_seq_len; overrides apply) and\n"
          "prints one line per token (index, id, piece, and `masked` where no loss is taken), first for the\n"
          "plain text with BOS and EOS, then in the tokenizer's chat format as one user turn. The text is\n"
          "--text, or standard input. Exit status 0, or 2 when the config or its tokenizer cannot be loaded or\n"
          "cannot tokenize the text.",
          [r](const auto& a, auto& o, auto& e) { return Tokenize(*r, a, std::cin, o, e); }};
}

}  // namespace tmx::recipes
