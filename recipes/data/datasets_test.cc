// Golden tests: samples must equal torchtune's message transforms + llama3 tokenizer (max_seq_len 64) on the
// shipped sample datasets (recipes/data/testdata/datasets.json, made by scripts/make_tokenizer_fixtures.py with
// torchtune bd2a0fc7c314; labels there are already in tune-matrix's aligned form, see sample.h).
#include "recipes/data/datasets.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "recipes/data/samples.h"
#include "recipes/data/testdata/fixtures.h"
#include "recipes/data/tokenizer_builders.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

std::unique_ptr<ModelTokenizer> Llama3(std::optional<int64_t> max_seq_len = 64) {
  TokenizerOptions options = *SampleTokenizerOptions("llama3_tokenizer", {});
  options.max_seq_len = max_seq_len;
  auto tok = BuildTokenizer("llama3_tokenizer", options);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

DatasetOptions Local(const std::string& format, const std::string& file) {
  DatasetOptions o;
  o.source = format;
  o.data_files = {test::SampleDatasetPath(file)};
  return o;
}

const nlohmann::json& Expected(const nlohmann::json& all, const std::string& name) {
  for (const auto& d : all) {
    if (d["dataset"] == name) return d["samples"];
  }
  ADD_FAILURE() << "no fixture " << name;
  static const nlohmann::json empty = nlohmann::json::array();
  return empty;
}

void ExpectSamples(const std::vector<Sample>& got, const nlohmann::json& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    EXPECT_EQ(got[i].tokens, want[i]["tokens"].get<std::vector<int64_t>>());
    EXPECT_EQ(got[i].labels, want[i]["labels"].get<std::vector<int64_t>>());
  }
}

TEST(DatasetsTest, SftSamplesEqualTorchtune) {
  auto tok = Llama3();
  nlohmann::json all = test::LoadFixture("datasets.json");
  struct Case {
    std::string fixture, component;
    DatasetOptions options;
  };
  DatasetOptions alpaca = Local("json", "alpaca_sample.json");
  alpaca.split = "train[:4]";
  DatasetOptions alpaca_masked = alpaca;
  alpaca_masked.train_on_input = false;
  DatasetOptions openai = Local("jsonl", "openai_sample.jsonl");
  openai.conversation_style = "openai";
  openai.conversation_column = "messages";
  DatasetOptions instruct = Local("json", "instruct_sample.json");
  instruct.column_map = {{"input", "instruction"}, {"output", "response"}};
  instruct.new_system_prompt = "Answer briefly.";
  for (const Case& c :
       std::vector<Case>{{"alpaca_dataset", "torchtune.datasets.alpaca_dataset", alpaca},
                         {"alpaca_dataset/train_on_input=False", "alpaca_cleaned_dataset", alpaca_masked},
                         {"slimorca_dataset", "slimorca_dataset", Local("json", "sharegpt_sample.json")},
                         {"chat_dataset/openai", "chat_dataset", openai},
                         {"instruct_dataset", "instruct_dataset", instruct},
                         {"text_completion_dataset", "text_completion_dataset", Local("text", "text_sample.txt")}}) {
    SCOPED_TRACE(c.fixture);
    auto ds = LoadSftDataset(c.component, c.options, *tok);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    ExpectSamples(ds->samples, Expected(all, c.fixture));
  }
}

TEST(DatasetsTest, PreferencePairsEqualTorchtune) {
  auto tok = Llama3();
  nlohmann::json all = test::LoadFixture("datasets.json");
  for (const auto& [name, file] : std::vector<std::pair<std::string, std::string>>{
           {"hh_rlhf_helpful_dataset", "hh_rlhf_sample.json"},
           {"stack_exchange_paired_dataset", "stack_exchange_paired_sample.json"}}) {
    SCOPED_TRACE(name);
    auto pairs = LoadPreferenceDataset(name, Local("json", file), *tok);
    ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
    const nlohmann::json& want = Expected(all, name);
    ASSERT_EQ(pairs->size(), want.size());
    for (size_t i = 0; i < pairs->size(); ++i) {
      EXPECT_EQ((*pairs)[i].chosen.tokens, want[i]["chosen_tokens"].get<std::vector<int64_t>>());
      EXPECT_EQ((*pairs)[i].chosen.labels, want[i]["chosen_labels"].get<std::vector<int64_t>>());
      EXPECT_EQ((*pairs)[i].rejected.tokens, want[i]["rejected_tokens"].get<std::vector<int64_t>>());
      EXPECT_EQ((*pairs)[i].rejected.labels, want[i]["rejected_labels"].get<std::vector<int64_t>>());
    }
  }
}

TEST(DatasetsTest, PackedSamplesFillMaxSeqLen) {
  auto tok = Llama3(128);
  DatasetOptions options = Local("json", "alpaca_sample.json");
  auto plain = LoadSftDataset("alpaca_dataset", options, *tok);
  options.packed = true;
  auto packed = LoadSftDataset("alpaca_dataset", options, *tok);
  ASSERT_TRUE(plain.ok() && packed.ok()) << packed.status().ToString();
  int64_t tokens = 0;
  for (const Sample& s : plain->samples) tokens += static_cast<int64_t>(s.tokens.size());
  ASSERT_GE(packed->samples.size(), static_cast<size_t>((tokens + 127) / 128));
  std::vector<int64_t> first_tokens;
  for (const Sample& p : packed->samples) {
    EXPECT_EQ(p.tokens.size(), 128u);
    EXPECT_EQ(p.document_ids.size(), 128u);
    first_tokens.insert(first_tokens.end(), p.tokens.begin(), p.tokens.begin() + p.seq_lens[0]);
  }
  EXPECT_EQ(std::vector<int64_t>(first_tokens.begin(), first_tokens.begin() + 5),
            std::vector<int64_t>(plain->samples[0].tokens.begin(), plain->samples[0].tokens.begin() + 5));
  options.packed = true;
  auto no_len = LoadSftDataset("alpaca_dataset", options, *Llama3(std::nullopt));
  ASSERT_FALSE(no_len.ok());
  EXPECT_EQ(no_len.status().message(),
            "alpaca_dataset: packed: True needs the tokenizer's max_seq_len; fix: set tokenizer.max_seq_len");
}

TEST(DatasetsTest, MissingHubDatasetNamesComponentAndFolder) {
  test::ScratchDir dir;
  setenv("TUNE_MATRIX_DATA", dir.path().c_str(), 1);
  auto ds = LoadSftDataset("torchtune.datasets.alpaca_cleaned_dataset", DatasetOptions(), *Llama3());
  unsetenv("TUNE_MATRIX_DATA");
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(ds.status().message().rfind("alpaca_cleaned_dataset: dataset yahma/alpaca-cleaned is not on this "
                                        "machine: " +
                                            dir.path() + "/yahma/alpaca-cleaned/ does not exist",
                                        0),
            0u)
      << ds.status().message();
}

TEST(DatasetsTest, BadRecordNamesFileAndLine) {
  test::ScratchDir dir;
  std::string path = dir.path() + "/bad.jsonl";
  test::WriteTextFile(path, "{\"instruction\": \"a\", \"output\": \"b\"}\n{\"instruction\": \"a\"}\n");
  DatasetOptions options;
  options.source = "jsonl";
  options.data_files = {path};
  auto ds = LoadSftDataset("alpaca_dataset", options, *Llama3());
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "alpaca_dataset: " + path +
                                       ":2: record has no \"output\" column; fix: set "
                                       "column_map: {output: <the column that holds it>}");
}

TEST(DatasetsTest, UnknownComponentSuggestsTheClosest) {
  auto c = FindDatasetComponent("torchtune.datasets.alpaca_cleaned_datset");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(c.status().message().rfind("dataset component torchtune.datasets.alpaca_cleaned_datset is unknown (did you "
                                       "mean torchtune.datasets.alpaca_cleaned_dataset?); fix: use one of: "
                                       "torchtune.datasets.alpaca_dataset, ",
                                       0),
            0u)
      << c.status().message();
  EXPECT_EQ(FindDatasetComponent("slimorca_dataset")->kind, DatasetKind::kChat);
}

TEST(DatasetsTest, EveryComponentRunsOnItsShippedSample) {
  auto tok = Llama3();
  for (const DatasetComponent& c : DatasetComponents()) {
    SCOPED_TRACE(c.dotpath);
    StatusOr<DatasetOptions> options = SampleDatasetOptions(c.dotpath, DatasetOptions());
    ASSERT_TRUE(options.ok()) << options.status().ToString();
    if (c.kind == DatasetKind::kMultimodal) {
      options->image_size = 28;  // what the recipe sets from the image transform
      auto ds = LoadSftDataset(c.dotpath, *options, *tok);
      ASSERT_TRUE(ds.ok()) << ds.status().ToString();
      ASSERT_FALSE(ds->samples.empty());
      const int64_t image_id = tok->base().SpecialId("<|image|>");
      for (const Sample& s : ds->samples) {
        EXPECT_FALSE(s.images.empty());
        EXPECT_EQ(std::count(s.tokens.begin(), s.tokens.end(), image_id), static_cast<int64_t>(s.images.size()));
      }
    } else if (c.kind == DatasetKind::kPreference) {
      auto pairs = LoadPreferenceDataset(c.dotpath, *options, *tok);
      ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
      EXPECT_FALSE(pairs->empty());
    } else {
      if (c.kind == DatasetKind::kRandomTokens) options->vocab_size = 512;  // what a recipe sets
      auto ds = LoadSftDataset(c.dotpath, *options, *tok);
      ASSERT_TRUE(ds.ok()) << ds.status().ToString();
      EXPECT_FALSE(ds->samples.empty());
    }
  }
}

// The Cauldron's images lead its first user message, one <|image|> token each after the header, masked with it.
TEST(DatasetsTest, TheCauldronsImagesLeadTheirUserMessage) {
  auto tok = Llama3();
  StatusOr<DatasetOptions> options = SampleDatasetOptions("the_cauldron_dataset", DatasetOptions());
  ASSERT_TRUE(options.ok());
  options->image_size = 28;
  auto ds = LoadSftDataset("the_cauldron_dataset", *options, *tok);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ(ds->samples.size(), 3u);
  const Sample& two = ds->samples[1];  // a 24 x 60 image (1 x 3 tiles) and a 70 x 20 one (3 x 1)
  ASSERT_EQ(two.images.size(), 2u);
  EXPECT_EQ(std::make_pair(two.images[0].rows, two.images[0].cols), std::make_pair(int64_t{1}, int64_t{3}));
  EXPECT_EQ(std::make_pair(two.images[1].rows, two.images[1].cols), std::make_pair(int64_t{3}, int64_t{1}));
  const Tokenizer& t = tok->base();
  const std::vector<int64_t> header = {t.bos_id(), t.SpecialId("<|start_header_id|>")};
  ASSERT_GT(two.tokens.size(), 8u);
  EXPECT_EQ(std::vector<int64_t>(two.tokens.begin(), two.tokens.begin() + 2), header);
  const auto first_image = std::find(two.tokens.begin(), two.tokens.end(), t.SpecialId("<|image|>"));
  ASSERT_NE(first_image, two.tokens.end());
  EXPECT_EQ(*(first_image - 1), tok->base().Encode("\n\n", {}).back());  // right after the header
  EXPECT_EQ(*(first_image + 1), t.SpecialId("<|image|>"));
  EXPECT_EQ(two.labels[first_image - two.tokens.begin()], kIgnoreIndex);
}

// Benchmarks' data: fixed-shape samples of ids below the model's vocabulary, the same for the same seed.
TEST(DatasetsTest, RandomTokensHaveTheirShapeAndFollowTheSeed) {
  DatasetOptions o;
  o.num_samples = 5;
  o.seq_len = 40;
  o.random_seed = 3;
  o.vocab_size = 300;
  auto tok = Llama3();
  StatusOr<SftDataset> a = LoadSftDataset("tune_matrix.datasets.random_tokens_dataset", o, *tok);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->samples.size(), 5u);
  std::set<int64_t> distinct;
  for (const Sample& s : a->samples) {
    ASSERT_EQ(s.tokens.size(), 40u);
    EXPECT_EQ(s.labels, s.tokens);  // every position trained
    for (int64_t id : s.tokens) {
      EXPECT_GE(id, 0);
      EXPECT_LT(id, 300);
      distinct.insert(id);
    }
  }
  EXPECT_GT(distinct.size(), 100u);  // spread over the vocabulary, not one id
  StatusOr<SftDataset> again = LoadSftDataset("random_tokens_dataset", o, *tok);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->samples[4].tokens, a->samples[4].tokens);
  o.random_seed = 4;
  StatusOr<SftDataset> other = LoadSftDataset("random_tokens_dataset", o, *tok);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->samples[0].tokens, a->samples[0].tokens);

  o.vocab_size = 0;
  StatusOr<SftDataset> no_vocab = LoadSftDataset("random_tokens_dataset", o, *tok);
  ASSERT_FALSE(no_vocab.ok());
  EXPECT_NE(no_vocab.status().message().find("needs the model's vocabulary size"), std::string::npos);
}

// A few numbers in a config stood for more samples than any machine holds: std::bad_alloc, or an overflowed size.
TEST(DatasetsTest, SamplesBeyondTheMachinesMemoryAreRefusedBeforeAllocating) {
  DatasetOptions o;
  o.num_samples = 1000000000;
  o.seq_len = 1000000000000;  // the product passes int64
  o.vocab_size = 300;
  StatusOr<SftDataset> random = LoadSftDataset("random_tokens_dataset", o, *Llama3());
  ASSERT_FALSE(random.ok());
  EXPECT_EQ(random.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(random.status().message().find("random_tokens_dataset: num_samples=1000000000 samples of "
                                           "seq_len=1000000000000 ids and labels at 8 bytes each: more than 8 EiB, "
                                           "over the "),
            std::string::npos)
      << random.status().message();
  EXPECT_NE(random.status().message().find("(this machine's memory); fix: lower num_samples or seq_len"),
            std::string::npos)
      << random.status().message();

  // Each pack is padded to max_seq_len: the eight-record sample made packs of 2^40 tokens.
  DatasetOptions packed = Local("json", "alpaca_sample.json");
  packed.packed = true;
  StatusOr<SftDataset> packs = LoadSftDataset("alpaca_dataset", packed, *Llama3(int64_t{1} << 40));
  ASSERT_FALSE(packs.ok());
  EXPECT_NE(packs.status().message().find("alpaca_dataset: packing: pack 1 of max_seq_len=1099511627776 tokens"),
            std::string::npos)
      << packs.status().message();
  EXPECT_NE(packs.status().message().find("fix: lower the tokenizer's max_seq_len, or set packed: False"),
            std::string::npos)
      << packs.status().message();
}

TEST(DatasetsTest, TheSamplesBoundNamesTheRecordThatPassesIt) {
  DatasetOptions o = Local("json", "alpaca_sample.json");
  o.max_sample_bytes = 4096;
  StatusOr<SftDataset> ds = LoadSftDataset("alpaca_dataset", o, *Llama3());
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("alpaca_sample.json:"), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find("its sample: "), std::string::npos) << ds.status().message();
  EXPECT_NE(ds.status().message().find("over the 4.00 KiB the dataset's samples may hold "
                                       "(DatasetOptions::max_sample_bytes); fix: train on fewer records"),
            std::string::npos)
      << ds.status().message();
  o.max_sample_bytes = 1 << 20;
  EXPECT_TRUE(LoadSftDataset("alpaca_dataset", o, *Llama3()).ok());
}

}  // namespace
}  // namespace tmx::data
