// The checks a fine-tuning run makes of its outputs before building anything: folders it can write, and the
// checkpoints' bytes against the free space where they go; and of its inputs (tokenizer files, with the shipped
// sample standing in).
#include "recipes/train_setup.h"

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/text.h"
#include "harness/config_store.h"
#include "recipes/builtin.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

class OutputChecksTest : public ::testing::Test {
 protected:
  Config Load(const std::string& name, const std::vector<std::string>& overrides) {
    const Registry& registry = BuiltinRegistry();
    StatusOr<LocatedConfig> located = LocateConfig(name, registry);
    EXPECT_TRUE(located.ok()) << located.status().ToString();
    StatusOr<Config> c = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return *c;
  }
  CheckpointBytes Bytes(const Config& config) {
    StatusOr<CheckpointBytes> need = EstimateCheckpointBytes(config, BuiltinRegistry());
    EXPECT_TRUE(need.ok()) << need.status().ToString();
    return need.ok() ? *need : CheckpointBytes();
  }

  test::ScratchDir scratch_{"train_setup_test"};
  const std::string dir_ = scratch_.path();
};

// Weights in the run's dtype, the adapters, and the optimizer state per trained parameter (AdamW: two
// tensors, and for LoRA the adapters again), each file with 1 MiB for its header, every epoch kept.
TEST_F(OutputChecksTest, CheckpointBytesFollowTheModelTheDtypeAndWhatIsSaved) {
  constexpr int64_t kHeader = int64_t{1} << 20;
  Config lora = Load("llama3_2/1B_lora_single_device", {"output_dir=" + dir_ + "/lora", "epochs=2"});
  CheckpointBytes b = Bytes(lora);
  const ParameterCounts counts = CountModelParameters(*ModelFromConfig(lora, BuiltinRegistry()));
  const int64_t total = counts.total, trainable = counts.trainable;
  EXPECT_GT(total, 1'200'000'000);
  EXPECT_EQ(b.parameters, total);
  EXPECT_EQ(b.dtype, "bf16");
  EXPECT_EQ(b.weights, total * 2 + kHeader);
  EXPECT_EQ(b.adapters, trainable * 2 + kHeader);
  EXPECT_EQ(b.train_state, trainable * 2 * 3 + kHeader);
  EXPECT_EQ(b.epochs, 2);
  EXPECT_EQ(b.total(), 2 * (b.weights + b.adapters + b.train_state));

  CheckpointBytes adapters_only = Bytes(Load("llama3_2/1B_lora_single_device", {"save_adapter_weights_only=True"}));
  EXPECT_EQ(adapters_only.weights, 0);
  EXPECT_EQ(adapters_only.adapters, b.adapters);
  EXPECT_EQ(Bytes(Load("llama3_2/1B_lora_single_device", {"save_checkpoints=False"})).total(), 0);

  CheckpointBytes full = Bytes(Load("tiny/full_single_device", {"dtype=fp32"}));
  EXPECT_EQ(full.adapters, 0);
  EXPECT_EQ(full.weights, full.parameters * 4 + kHeader);
  EXPECT_EQ(full.train_state, full.parameters * 4 * 2 + kHeader);
}

// The free space is a number the check takes, so a full disk is tested without filling one.
TEST_F(OutputChecksTest, CheckpointsLargerThanTheFreeSpaceAreAProblemWithBothNumbers) {
  Config config = Load("llama3_2/1B_lora_single_device", {"output_dir=" + dir_ + "/run"});
  const CheckpointBytes need = Bytes(config);
  EXPECT_FALSE(DiskSpaceProblem(config, "output_dir", dir_ + "/run", need, need.total()).has_value());
  std::optional<Problem> p = DiskSpaceProblem(config, "output_dir", dir_ + "/run", need, need.total() - 1);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->key, "output_dir");
  EXPECT_EQ(p->where, "override 'output_dir=" + dir_ + "/run'");
  const std::string total = FormatBytes(need.total());
  EXPECT_EQ(p->message,
            "output_dir " + dir_ + "/run: the checkpoints this run writes need about " + total + " (1 epoch x " +
                total + " (weights " + FormatBytes(need.weights) + ", adapters " + FormatBytes(need.adapters) +
                ", optimizer state " + FormatBytes(need.train_state) + ")) and its filesystem has " +
                FormatBytes(need.total() - 1) +
                " free, so a checkpoint would fail (No space left on device); fix: pass another output_dir=... on a "
                "filesystem with " + total + " free, or free space there, save_adapter_weights_only=True (" +
                FormatBytes(need.adapters + need.train_state) + "), or save_checkpoints=False");
}

// One problem per cause: output_dir, the checkpoints' and the metrics' folders all lie under the same file.
TEST_F(OutputChecksTest, AnOutputFolderUnderAFileIsOneProblemNamingTheFile) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/file", "x").ok());
  const Registry& registry = BuiltinRegistry();
  std::vector<Problem> problems =
      OutputProblems(Load("tiny/lora_single_device", {"output_dir=" + dir_ + "/file/run"}), registry, TrainKind::kLora);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "output_dir");
  EXPECT_EQ(problems[0].message, "output_dir " + dir_ + "/file/run cannot be created or written: " + dir_ +
                                     "/file is a regular file, not a folder (Not a directory); fix: pass another "
                                     "output_dir=... (a folder this user may write)");
  // Only the checkpoints' folder: named by its own key.
  problems = OutputProblems(Load("tiny/lora_single_device", {"output_dir=" + dir_ + "/ok",
                                                             "checkpointer.output_dir=" + dir_ + "/file/ckpt"}),
                            registry, TrainKind::kLora);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "checkpointer.output_dir");
  EXPECT_NE(problems[0].message.find("(where checkpoints go) cannot be created or written"), std::string::npos)
      << problems[0].message;
  // Without checkpoints that folder is not written.
  EXPECT_TRUE(OutputProblems(Load("tiny/lora_single_device", {"output_dir=" + dir_ + "/ok", "save_checkpoints=False",
                                                              "checkpointer.output_dir=" + dir_ + "/file/ckpt"}),
                             registry, TrainKind::kLora)
                  .empty());
  EXPECT_TRUE(OutputProblems(Load("tiny/lora_single_device", {"output_dir=" + dir_ + "/ok"}), registry,
                             TrainKind::kLora)
                  .empty());
  EXPECT_FALSE(PathExists(dir_ + "/ok"));  // checking creates nothing
}

// A Phi-4 config without its tokenizer files: the problems name torchtune's keys, and a matrix cell's
// --allow-stand-ins sets the data up on the shipped byte-level BPE sample, saying so.
TEST_F(OutputChecksTest, Phi4WithoutItsTokenizerFilesRunsOnTheShippedSample) {
  const std::string vocab = dir_ + "/phi-4/vocab.json", merges = dir_ + "/phi-4/merges.txt";
  Config config = Load("phi4/14B_lora_single_device", {"output_dir=" + dir_ + "/phi4", "tokenizer.vocab_path=" + vocab,
                                                       "tokenizer.merges_path=" + merges, "tokenizer.max_seq_len=64"});
  std::vector<std::string> missing;
  for (const Problem& p : MissingInputs(config, BuiltinRegistry())) {
    if (p.key.rfind("tokenizer.", 0) == 0) missing.push_back(p.key + ": " + p.message.substr(0, p.message.find(';')));
  }
  EXPECT_EQ(missing,
            (std::vector<std::string>{"tokenizer.vocab_path: tokenizer.vocab_path " + vocab + " does not exist",
                                      "tokenizer.merges_path: tokenizer.merges_path " + merges + " does not exist"}));
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(config, TrainKind::kLora);
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  StatusOr<ModelChoice> model = ModelFromConfig(config, BuiltinRegistry());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<std::string> stand_ins;
  StatusOr<data::DataLoader> without = SetupData(config, *settings, model->args, false, &stand_ins);
  EXPECT_EQ(without.status().code(), Status::Code::kNotFound);
  StatusOr<data::DataLoader> with = SetupData(config, *settings, model->args, true, &stand_ins);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  ASSERT_FALSE(stand_ins.empty());
  EXPECT_EQ(stand_ins[0],
            "tokenizer phi4_tokenizer ran on the shipped sample tiny_bpe_vocab.json (" + vocab + " is absent)");
}

// A proxy whose vocabulary was cut (model.vocab_size below the preset's) is fed the same data with every id
// folded into its vocabulary: the tokens and labels mod the cut size, the ignored labels as they were.
TEST_F(OutputChecksTest, AProxyWithACutVocabularyIsFedTheDataFoldedIntoIt) {
  const std::vector<std::string> common = {"output_dir=" + dir_ + "/cut", "tokenizer.path=" + dir_ + "/absent.model",
                                           "tokenizer.max_seq_len=64", "model.num_layers=1"};
  std::vector<std::string> cut_overrides = common;
  cut_overrides.push_back("model.vocab_size=1000");
  Config whole_config = Load("llama3_2/1B_full_single_device", common);
  Config cut_config = Load("llama3_2/1B_full_single_device", cut_overrides);
  StatusOr<TrainingSettings> settings = ReadTrainingSettings(whole_config, TrainKind::kFull);
  ASSERT_TRUE(settings.ok()) << settings.status().ToString();
  StatusOr<ModelChoice> whole_model = ModelFromConfig(whole_config, BuiltinRegistry());
  StatusOr<ModelChoice> cut_model = ModelFromConfig(cut_config, BuiltinRegistry());
  ASSERT_TRUE(whole_model.ok() && cut_model.ok());
  std::vector<std::string> stand_ins;
  StatusOr<data::DataLoader> whole = SetupData(whole_config, *settings, whole_model->args, true, &stand_ins);
  StatusOr<data::DataLoader> cut = SetupData(cut_config, *settings, cut_model->args, true, &stand_ins);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  const data::Batch a = whole->GetBatch(0), b = cut->GetBatch(0);
  EXPECT_GT(a.tokens.max().item<int64_t>(), 1000);  // the real tokenizer's ids pass the cut vocabulary
  EXPECT_TRUE(b.tokens.equal(a.tokens.remainder(1000)));
  const at::Tensor ignored = a.labels.lt(0);
  EXPECT_GT(ignored.sum().item<int64_t>(), 0);
  EXPECT_TRUE(b.labels.equal(at::where(ignored, a.labels, a.labels.remainder(1000))));
}

}  // namespace
}  // namespace tmx::recipes
