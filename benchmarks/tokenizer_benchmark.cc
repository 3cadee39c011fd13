// Encode throughput of each tokenizer on benchmarks/tokenizer_corpus.txt (English instructions and answers, code
// from Stack Exchange, CJK and other scripts, emoji), one Encode call per line as a dataset encodes its samples.
// Counter bytes_per_second is the corpus's UTF-8 bytes over the time. See benchmarks/README.md for the Python
// reference numbers measured on the same corpus.
#include <benchmark/benchmark.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "recipes/data/samples.h"
#include "recipes/data/tokenizer_builders.h"
#include "recipes/data/tokenizers/byte_bpe.h"

namespace {

using tmx::data::ModelTokenizer;

std::string SourcePath(const std::string& relative) { return std::string(TM_SOURCE_DIR) + "/" + relative; }

const std::vector<std::string>& CorpusLines() {
  static const auto* lines = [] {
    auto* out = new std::vector<std::string>();
    std::ifstream in(SourcePath("benchmarks/tokenizer_corpus.txt"));
    for (std::string line; std::getline(in, line);) out->push_back(line);
    return out;
  }();
  return *lines;
}

// The tokenizer a benchmark measures: a builder on the shipped sample of its format, or (qwen2_full) on the
// full-size byte-level vocabulary in recipes/data/testdata.
std::unique_ptr<ModelTokenizer> Make(const std::string& which) {
  std::string component = which == "qwen2_full" ? "qwen2_tokenizer" : which;
  auto options = tmx::data::SampleTokenizerOptions(component, {});
  if (!options.ok()) return nullptr;
  if (which == "qwen2_full") {
    options->path = SourcePath("recipes/data/testdata/qwen2_vocab.json");
    options->merges_file = SourcePath("recipes/data/testdata/qwen2_merges.txt");
  }
  auto tok = tmx::data::BuildTokenizer(component, *options);
  return tok.ok() ? std::move(tok).value() : nullptr;
}

void BM_Encode(benchmark::State& state, const std::string& which, const std::string& label) {
  std::unique_ptr<ModelTokenizer> tok = Make(which);
  const std::vector<std::string>& lines = CorpusLines();
  if (tok == nullptr || lines.empty()) {
    state.SkipWithError(("cannot load " + which + " or the corpus").c_str());
    return;
  }
  int64_t bytes = 0, tokens = 0;
  for (const std::string& line : lines) bytes += static_cast<int64_t>(line.size());
  for (auto _ : state) {
    for (const std::string& line : lines) {
      std::vector<int64_t> ids = tok->Encode(line, false, false);
      tokens += static_cast<int64_t>(ids.size());
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["tokens_per_iteration"] = static_cast<double>(tokens) / static_cast<double>(state.iterations());
  state.SetLabel(label);
}

BENCHMARK_CAPTURE(BM_Encode, tiktoken, std::string("llama3_tokenizer"),
                  std::string("tiktoken_small.model, Llama 3 pattern"));
BENCHMARK_CAPTURE(BM_Encode, sentencepiece, std::string("llama2_tokenizer"), std::string("m.model"));
BENCHMARK_CAPTURE(BM_Encode, byte_bpe_tiny, std::string("qwen2_tokenizer"),
                  std::string("tiny_bpe vocab, Qwen2 pattern"));
BENCHMARK_CAPTURE(BM_Encode, byte_bpe_full, std::string("qwen2_full"),
                  std::string("63k vocab.json + merges.txt, Qwen2 pattern"));
BENCHMARK_CAPTURE(BM_Encode, hf_tokenizer_json, std::string("HuggingFaceBaseTokenizer"), std::string("tokenizer.json"));

// Normalizing one large text with Gemma's normalizer (Replace ' ' -> '▁', as its tokenizer.json has): the corpus
// repeated to state.range(0) bytes. Linear: the time per byte stays flat as the size grows (replacing in place was
// quadratic: 19 s for 1.6 MB).
void BM_Normalize(benchmark::State& state) {
  std::string corpus;
  for (const std::string& line : CorpusLines()) corpus += line + "\n";
  if (corpus.empty()) {
    state.SkipWithError("cannot read the corpus");
    return;
  }
  std::string text;
  while (text.size() < static_cast<size_t>(state.range(0))) text += corpus;
  text.resize(static_cast<size_t>(state.range(0)));
  const std::vector<tmx::data::ByteBpeOptions::NormalizeStep> steps = {{false, " ", "\xE2\x96\x81"}};
  for (auto _ : state) {
    std::string normalized = tmx::data::ApplyNormalizeSteps(text, steps);
    benchmark::DoNotOptimize(normalized.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.SetLabel("Gemma's Replace(' ', '\xE2\x96\x81')");
}
BENCHMARK(BM_Normalize)->Arg(100 << 10)->Arg(1600 << 10)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
