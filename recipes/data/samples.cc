#include "recipes/data/samples.h"

#include <cstdlib>

namespace tmx::data {

std::string SamplesDir() {
  const char* env = std::getenv("TUNE_MATRIX_SAMPLES_DIR");
  if (env != nullptr && *env != '\0') return env;
  return TM_DATA_SAMPLES_DIR;
}

StatusOr<TokenizerOptions> SampleTokenizerOptions(const std::string& component, TokenizerOptions options) {
  StatusOr<TokenizerComponent> found = FindTokenizerComponent(component);
  if (!found.ok()) return found.status();
  if (!found->shipped_path.empty()) return options;  // it reads its shipped file already
  const std::string dir = SamplesDir() + "/tokenizers/";
  options.special_tokens_path.clear();
  switch (found->kind) {
    case TokenizerFileKind::kTiktoken:
      options.path = dir + "tiktoken_small.model";
      break;
    case TokenizerFileKind::kSentencePiece:
      options.path = dir + "m.model";
      break;
    case TokenizerFileKind::kByteBpe:
    case TokenizerFileKind::kGpt2Bpe:
      options.path = dir + "tiny_bpe_vocab.json";
      options.merges_file = dir + "tiny_bpe_merges.txt";
      break;
    case TokenizerFileKind::kHfTokenizerJson:
      options.tokenizer_json_path = dir + "tokenizer.json";
      options.tokenizer_config_json_path.clear();
      options.generation_config_path = dir + "generation_config.json";
      break;
    case TokenizerFileKind::kNone:
      break;  // reads no file

  }
  return options;
}

std::string SampleNote(const std::string& what, const std::string& component, const std::string& sample,
                       const std::string& missing) {
  return what + " " + component + " ran on the shipped sample " + sample + " (" + missing + " is absent)";
}

}  // namespace tmx::data
