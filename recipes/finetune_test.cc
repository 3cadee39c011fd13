// End-to-end tests of the single-device recipes on the tiny configs, in-process on the CPU.
#include "recipes/finetune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"
#include "recipes/builtin.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/data/datasets.h"
#include "recipes/data/samples.h"
#include "recipes/data/tokenizer_builders.h"
#include "recipes/distillation.h"
#include "recipes/flops.h"
#include "recipes/model_components.h"
#include "recipes/models/llama.h"
#include "recipes/models/lora.h"
#include "recipes/models/presets.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

// A saved merged model, loaded into a plain model of `args`, computes what `adapted` (base plus adapters) does.
void ExpectMergedComputesTheSame(models::DecoderImpl& adapted, const models::DecoderArgs& args,
                                 const checkpoint::NamedTensors& merged) {
  models::Decoder plain(args);
  Status loaded = checkpoint::LoadIntoModule(*plain, merged, /*strict=*/true);
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  adapted.eval();
  plain->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, 259, {2, 24}, torch::kLong);
  EXPECT_TRUE(torch::allclose(adapted.forward(tokens), plain->forward(tokens), 1e-4, 1e-4));
}

class FinetuneTest : public ::testing::Test {
 protected:
  // Runs a tiny config with overrides; returns summary.json.
  // `output` (when set) receives what the run printed.
  nlohmann::json Run(const std::string& config, std::vector<std::string> overrides, bool lora,
                     Status* status = nullptr, std::string* output = nullptr) {
    overrides.push_back("log_every_n_steps=1");
    const InProcessRun run = RunInProcess(
        config, overrides, RecipeRun(FinetuneRecipe(lora ? TrainKind::kLora : TrainKind::kFull, RecipeLaunch::kOneProcess)));
    if (output != nullptr) *output = run.printed;
    if (status != nullptr) {
      *status = run.status;
    } else {
      EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
    }
    EXPECT_FALSE(run.summary.is_null());
    return run.summary;
  }

  // The adapters of a tiny/lora_single_device run: DoRA (model.use_dora) and an NF4 base (the qlora_tiny_llama3_2
  // builder, at the widths NF4 holds) as the run had them.
  struct Adapters {
    bool dora = false;
    bool quantize_base = false;
  };

  // What such a run saved in `epoch`, against the config's model rebuilt from its seed: that model with the
  // saved adapters gives the logits of the saved merged model, so the base weights did not move and both files
  // describe the same trained model. `saved` receives the saved adapters; `initial` (when set) the rebuilt
  // model's adapters before loading them; `rebuilt` (when set) the rebuilt model with the saved adapters.
  void ExpectAdaptersReproduceTheMergedModel(const std::string& epoch, Adapters kind, checkpoint::NamedTensors* saved,
                                             std::map<std::string, torch::Tensor>* initial = nullptr,
                                             models::Decoder* rebuilt = nullptr) {
    StatusOr<checkpoint::LoadedSafetensors> adapters =
        checkpoint::LoadSafetensors(epoch + "/adapter_model.safetensors");
    StatusOr<checkpoint::LoadedSafetensors> merged = checkpoint::LoadSafetensors(epoch + "/model.safetensors");
    ASSERT_TRUE(adapters.ok()) << adapters.status().ToString();
    ASSERT_TRUE(merged.ok()) << merged.status().ToString();
    *saved = adapters->tensors;
    models::LoraArgs lora;
    lora.attn_modules = {"q_proj", "v_proj", "output_proj"};
    lora.apply_to_mlp = true;
    lora.rank = 8;
    lora.alpha = 16;
    lora.use_dora = kind.dora;
    lora.quantize_base = kind.quantize_base;
    const models::DecoderArgs args =
        kind.quantize_base ? TinyNf4Widths(models::LlamaTinyArgs()) : models::LlamaTinyArgs();
    torch::manual_seed(1234);
    models::Decoder adapted(args, lora);
    if (initial != nullptr) {
      for (const auto& [name, t] : models::AdapterParameters(*adapted)) (*initial)[name] = t.detach().clone();
    }
    ASSERT_TRUE(checkpoint::LoadIntoModule(*adapted, adapters->tensors, /*strict=*/false).ok());
    ExpectMergedComputesTheSame(*adapted, args, merged->tensors);
    if (rebuilt != nullptr) *rebuilt = adapted;
  }

  // The saved magnitudes (adapter tensors named *.magnitude) all trained: each differs from the rebuilt model's
  // initial one. Returns how many values they hold.
  int64_t ExpectTrainedMagnitudes(const checkpoint::NamedTensors& saved,
                                  const std::map<std::string, torch::Tensor>& initial) {
    int64_t values = 0;
    for (const auto& [name, t] : saved) {
      EXPECT_TRUE(initial.count(name)) << name;
      if (name.find(".magnitude") == std::string::npos || !initial.count(name)) continue;
      values += t.numel();
      EXPECT_FALSE(torch::equal(t, initial.at(name))) << name << " did not train";
    }
    return values;
  }

  test::ScratchDir scratch_{"finetune_test"};
  const std::string dir_ = scratch_.path();
};

TEST_F(FinetuneTest, LossFallsOnTinyFullFinetune) {
  nlohmann::json s = Run("tiny/full_single_device",
                         {"output_dir=" + dir_ + "/full", "max_steps_per_epoch=40", "save_checkpoints=False"}, false);
  std::vector<double> losses = s["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 40u);
  double first = (losses[0] + losses[1] + losses[2]) / 3;
  double last = (losses[37] + losses[38] + losses[39]) / 3;
  EXPECT_LT(last, 0.6 * first) << "first " << first << " last " << last;
  EXPECT_GT(s["peak_memory_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(s["peak_memory_source"], "process_rss");
}

// Llama 4's tiny model (4 experts, top-1, a shared expert, NoPE layer, chunks) trains in full, and with LoRA on its
// experts, whose saved adapters over the seed's base give the saved merged model.
TEST_F(FinetuneTest, Llama4TinyTrainsInFullAndWithLoraOnItsExperts) {
  nlohmann::json s = Run("tiny/llama4_full_single_device",
                         {"output_dir=" + dir_ + "/llama4", "max_steps_per_epoch=20", "save_checkpoints=False"}, false);
  std::vector<double> losses = s["losses"].get<std::vector<double>>();
  ASSERT_EQ(losses.size(), 20u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[17] + losses[18] + losses[19]) / 3;
  EXPECT_LT(last, 0.9 * first) << "first " << first << " last " << last;

  Run("tiny/llama4_lora_single_device", {"output_dir=" + dir_ + "/llama4_lora", "max_steps_per_epoch=3", "dtype=fp32"},
      true);
  StatusOr<checkpoint::LoadedSafetensors> adapters =
      checkpoint::LoadSafetensors(dir_ + "/llama4_lora/epoch_0/adapter_model.safetensors");
  StatusOr<checkpoint::LoadedSafetensors> merged =
      checkpoint::LoadSafetensors(dir_ + "/llama4_lora/epoch_0/model.safetensors");
  ASSERT_TRUE(adapters.ok() && merged.ok());
  std::map<std::string, torch::Tensor> saved(adapters->tensors.begin(), adapters->tensors.end());
  ASSERT_TRUE(saved.count("layers.0.mlp.experts.lora_gate_b"));
  EXPECT_GT(saved["layers.0.mlp.experts.lora_gate_b"].abs().sum().item<double>(), 0) << "the experts' B trained";
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj", "output_proj"};
  lora.apply_to_mlp = true;
  const models::DecoderArgs args = models::FindModelPreset("tiny_llama4")->args;
  torch::manual_seed(1234);
  models::Decoder adapted(args, lora);
  ASSERT_TRUE(checkpoint::LoadIntoModule(*adapted, adapters->tensors, /*strict=*/false).ok());
  ExpectMergedComputesTheSame(*adapted, args, merged->tensors);
}

TEST_F(FinetuneTest, PackedSamplesTrainWithFullPacks) {
  // packed: True fills every row with 128 tokens of several documents; the loss still falls.
  nlohmann::json s = Run("tiny/lora_single_device",
                         {"output_dir=" + dir_ + "/packed", "dataset.packed=True", "tokenizer.max_seq_len=512",
                          "batch_size=2", "max_steps_per_epoch=20", "save_checkpoints=False"},
                         true);
  nlohmann::json plain = Run("tiny/lora_single_device",
                             {"output_dir=" + dir_ + "/plain", "tokenizer.max_seq_len=512", "batch_size=2",
                              "max_steps_per_epoch=20", "save_checkpoints=False"},
                             true);
  std::vector<int64_t> tokens = s["step_tokens"].get<std::vector<int64_t>>();
  std::vector<int64_t> plain_tokens = plain["step_tokens"].get<std::vector<int64_t>>();
  ASSERT_EQ(tokens.size(), 20u);
  ASSERT_EQ(plain_tokens.size(), 20u);
  // Rows of several samples: far more tokens per step than one sample per row.
  int64_t packed_sum = 0, plain_sum = 0;
  for (int i = 0; i < 20; ++i) packed_sum += tokens[i], plain_sum += plain_tokens[i];
  EXPECT_GT(packed_sum, 2 * plain_sum) << packed_sum << " vs " << plain_sum;
  std::vector<double> losses = s["losses"].get<std::vector<double>>();
  EXPECT_LT((losses[17] + losses[18] + losses[19]) / 3, (losses[0] + losses[1] + losses[2]) / 3);
}

// Each step records its model FLOPs (recipes/flops.h) over the batch's padded shape: packed rows are exactly
// max_seq_len long, so every step of 2 rows counts TrainingFlops(model, 2, 512); the rate is their median over
// the step times, and the dtype says which peak it compares with.
TEST_F(FinetuneTest, EachStepRecordsTheModelFlopsOfItsBatchShape) {
  const std::vector<std::string> overrides = {"output_dir=" + dir_ + "/flops", "dataset.packed=True",
                                              "tokenizer.max_seq_len=512", "batch_size=2", "max_steps_per_epoch=3",
                                              "save_checkpoints=False"};
  nlohmann::json s = Run("tiny/lora_single_device", overrides, true);
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig("tiny/lora_single_device", registry);
  ASSERT_TRUE(located.ok());
  StatusOr<Config> config = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<ModelChoice> choice = ModelFromConfig(*config, registry);
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  ASSERT_TRUE(choice->lora.has_value());
  const double expected = TrainingFlops({choice->args, choice->lora}, 2, 512);
  const std::vector<double> flops = s["step_flops"].get<std::vector<double>>();
  ASSERT_EQ(flops.size(), 3u);
  for (double f : flops) EXPECT_DOUBLE_EQ(f, expected);
  const std::vector<double> times = s["step_times_s"].get<std::vector<double>>();
  std::vector<double> rates = {expected / times[1], expected / times[2]};  // after the warm-up step
  std::sort(rates.begin(), rates.end());
  EXPECT_DOUBLE_EQ(s["flops_per_second"].get<double>(), (rates[0] + rates[1]) / 2);
  EXPECT_EQ(s["dtype"], "fp32");
}

TEST_F(FinetuneTest, ABatchWithNothingToTrainOnIsAClearErrorNotANan) {
  // The byte-level Alpaca prompts are longer than 64 tokens: truncated, they keep no response token.
  Status status;
  Run("tiny/lora_single_device", {"output_dir=" + dir_ + "/short", "tokenizer.max_seq_len=64", "max_steps_per_epoch=1"},
      true, &status);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find("step 1: every label of the batch is masked"), std::string::npos)
      << status.message();
}

TEST_F(FinetuneTest, TokenIdsOutsideTheModelsVocabularyStopTheRunNamingThem) {
  // The tiny model has 512 ids; the Llama 3 tokenizer's text ids alone go past them.
  Status status;
  Run("tiny/lora_single_device",
      {"output_dir=" + dir_ + "/vocab", "tokenizer=torchtune.models.llama3.llama3_tokenizer",
       "tokenizer.path=" + data::SamplesDir() + "/tokenizers/tiktoken_small.model", "max_steps_per_epoch=1"},
      true, &status);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << status.ToString();
  EXPECT_NE(status.message().find("outside the model's vocabulary of 512 ids"), std::string::npos)
      << status.message();
}

// Every tokenizer component trains a tiny model sized to it, on its shipped sample files: the family's
// chat format, masking and collation end to end.
TEST_F(FinetuneTest, EveryTokenizerComponentTrainsATinyModel) {
  for (const data::TokenizerComponent& t : data::TokenizerComponents()) {
    if (t.kind == data::TokenizerFileKind::kNone) continue;  // the byte tokenizer: every tiny config
    SCOPED_TRACE(t.dotpath);
    StatusOr<data::TokenizerOptions> sample = data::SampleTokenizerOptions(t.dotpath, {});
    ASSERT_TRUE(sample.ok()) << sample.status().ToString();
    // The model's vocabulary holds the tokenizer's every id: Llama 4's special tokens end at 202048.
    const std::string vocab = t.chat_format == data::ChatFormat::kLlama4 ? "202048" : "152000";
    std::vector<std::string> overrides = {"output_dir=" + dir_ + "/" + t.name, "tokenizer=" + t.dotpath,
                                          "model.vocab_size=" + vocab, "batch_size=1", "max_steps_per_epoch=2",
                                          "save_checkpoints=False"};
    // torchtune's HuggingFaceBaseTokenizer takes no max_seq_len (the recipe then caps at the model's).
    if (t.kind == data::TokenizerFileKind::kHfTokenizerJson) {
      // No max_seq_len and no chat format: plain text of the shipped set's responses. The shipped
      // generation_config.json (torchtune's test asset) gives EOS as -1, which no embedding has: ids 0 and 1.
      ASSERT_TRUE(WriteFileAtomically(dir_ + "/generation_config.json", R"({"bos_token_id": 0, "eos_token_id": 1})").ok());
      for (const std::string& o : std::vector<std::string>{"~tokenizer.max_seq_len", "dataset=torchtune.datasets.text_completion_dataset",
                            "~dataset.train_on_input", "dataset.column=output",
                            "tokenizer.generation_config_path=" + dir_ + "/generation_config.json"}) {
        overrides.push_back(o);
      }
    } else {
      overrides.push_back("tokenizer.max_seq_len=256");
    }
    for (const auto& [key, value] : data::TokenizerFiles(t, *sample)) {  // under the keys t takes
      if (key != "generation_config_path") overrides.push_back("tokenizer." + key + "=" + value);
    }
    nlohmann::json s = Run("tiny/lora_single_device", overrides, true);
    ASSERT_EQ(s["losses"].size(), 2u);
    for (double loss : s["losses"].get<std::vector<double>>()) EXPECT_TRUE(std::isfinite(loss));
  }
}

// Every instruct, chat and text dataset component trains the tiny model on its shipped sample (preference
// datasets train in the DPO recipe's tests, multimodal ones a vision model in VisionTrainingTest).
TEST_F(FinetuneTest, EveryDatasetComponentTrainsATinyModel) {
  for (const data::DatasetComponent& d : data::DatasetComponents()) {
    if (d.kind == data::DatasetKind::kPreference || d.kind == data::DatasetKind::kMultimodal) continue;
    SCOPED_TRACE(d.dotpath);
    StatusOr<data::DatasetOptions> sample = data::SampleDatasetOptions(d.dotpath, {});
    ASSERT_TRUE(sample.ok()) << sample.status().ToString();
    std::vector<std::string> overrides = {"output_dir=" + dir_ + "/" + d.name, "dataset=" + d.dotpath,
                                          "~dataset.source", "~dataset.train_on_input", "batch_size=1",
                                          "tokenizer.max_seq_len=512", "max_steps_per_epoch=2",
                                          "save_checkpoints=False"};
    auto set = [&](const std::string& key, const std::string& value) {
      if (!value.empty()) overrides.push_back("dataset." + key + "=" + value);
    };
    set("source", sample->source);
    if (!sample->data_files.empty()) {
      std::string files;
      for (const std::string& f : sample->data_files) files += (files.empty() ? "" : ", ") + f;
      set("data_files", "[" + files + "]");
    }
    set("data_dir", sample->data_dir);
    if (!sample->column_map.empty()) {
      std::string map;
      for (const auto& [k, v] : sample->column_map) map += (map.empty() ? "" : ", ") + k + ": " + v;
      set("column_map", "{" + map + "}");
    }
    set("conversation_column", sample->conversation_column);
    set("conversation_style", sample->conversation_style);
    if (d.kind == data::DatasetKind::kText) set("column", sample->column);
    if (d.kind == data::DatasetKind::kRandomTokens) overrides.push_back("~dataset.packed");
    nlohmann::json s = Run("tiny/lora_single_device", overrides, true);
    ASSERT_GE(s["losses"].size(), 1u);  // a sample may hold a single record
    for (double loss : s["losses"].get<std::vector<double>>()) EXPECT_TRUE(std::isfinite(loss));
  }
}

TEST_F(FinetuneTest, SameSeedGivesIdenticalLosses) {
  std::vector<std::string> common = {"max_steps_per_epoch=4", "save_checkpoints=False"};
  auto a = common, b = common, c = common;
  a.push_back("output_dir=" + dir_ + "/a");
  b.push_back("output_dir=" + dir_ + "/b");
  c.push_back("output_dir=" + dir_ + "/c");
  c.push_back("seed=99");
  auto la = Run("tiny/lora_single_device", a, true)["losses"].get<std::vector<double>>();
  auto lb = Run("tiny/lora_single_device", b, true)["losses"].get<std::vector<double>>();
  auto lc = Run("tiny/lora_single_device", c, true)["losses"].get<std::vector<double>>();
  ASSERT_EQ(la.size(), 4u);
  EXPECT_EQ(la, lb);
  EXPECT_NE(la, lc);
}

// optimizer_in_bwd steps each tensor inside backward: the same run, the same losses, and a checkpoint that
// resumes.
TEST_F(FinetuneTest, OptimizerInBackwardTrainsAsTheOrdinaryStepAndResumes) {
  for (const std::string config : {"tiny/full_single_device", "tiny/lora_single_device"}) {
    SCOPED_TRACE(config);
    const bool lora = config == "tiny/lora_single_device";
    const std::string out = dir_ + "/" + (lora ? "lora" : "full");
    std::vector<std::string> common = {"max_steps_per_epoch=4", "dtype=fp32", "clip_grad_norm=null", "epochs=2",
                                       "optimizer=torch.optim.AdamW", "optimizer.fused=True"};
    auto plain = common, in_bwd = common;
    plain.insert(plain.end(), {"output_dir=" + out + "_plain", "save_checkpoints=False"});
    in_bwd.insert(in_bwd.end(), {"output_dir=" + out + "_in_bwd", "optimizer_in_bwd=True"});
    std::string printed;
    auto a = Run(config, plain, lora)["losses"].get<std::vector<double>>();
    auto b = Run(config, in_bwd, lora, nullptr, &printed)["losses"].get<std::vector<double>>();
    EXPECT_NE(printed.find("optimizer stepped inside backward"), std::string::npos) << printed;
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), 8u);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
    EXPECT_LT(b.back(), b.front());
    // Resuming the first epoch's checkpoint (its optimizer state included) repeats the second epoch.
    ASSERT_EQ(std::rename((out + "_in_bwd/epoch_1").c_str(), (out + "_epoch_1_set_aside").c_str()), 0);
    in_bwd.push_back("resume_from_checkpoint=True");
    auto resumed = Run(config, in_bwd, lora)["losses"].get<std::vector<double>>();
    ASSERT_EQ(resumed.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(resumed[i], b[4 + i], 1e-5) << "step " << 5 + i;
  }
}

TEST_F(FinetuneTest, LoraCheckpointsReloadToIdenticalOutputsAndBaseIsUnchanged) {
  Run("tiny/lora_single_device", {"output_dir=" + dir_ + "/lora", "max_steps_per_epoch=3"}, true);
  checkpoint::NamedTensors adapters;
  ExpectAdaptersReproduceTheMergedModel(dir_ + "/lora/epoch_0", {}, &adapters);
  for (const auto& [name, t] : adapters) EXPECT_NE(name.find("lora_"), std::string::npos) << name;
  // The adapters did train: lora_b started at zero.
  double lora_b_norm = 0;
  for (const auto& [name, t] : adapters) {
    if (name.find("lora_b") != std::string::npos) lora_b_norm += t.abs().sum().item<double>();
  }
  EXPECT_GT(lora_b_norm, 0);
}

// DoRA (model.use_dora=True): the magnitudes train with the adapters, travel in the adapter file, and the base
// rebuilt from the seed with the saved adapters equals the saved merged model.
TEST_F(FinetuneTest, DoraCheckpointsCarryTrainedMagnitudesAndReloadToIdenticalOutputs) {
  nlohmann::json lora_summary =
      Run("tiny/lora_single_device",
          {"output_dir=" + dir_ + "/lora_count", "max_steps_per_epoch=1", "save_checkpoints=False"}, true);
  nlohmann::json summary = Run("tiny/lora_single_device",
                               {"output_dir=" + dir_ + "/dora", "max_steps_per_epoch=3", "model.use_dora=True"}, true);
  const models::LlamaArgs args = models::LlamaTinyArgs();
  // A magnitude per output row of q, v, output_proj and the three MLP projections of every layer.
  const int64_t q = args.num_heads * args.resolved_head_dim(), v = args.num_kv_heads * args.resolved_head_dim();
  const int64_t magnitudes = args.num_layers * (q + v + args.embed_dim + 2 * args.intermediate_dim + args.embed_dim);
  EXPECT_EQ(summary["trainable_parameters"].get<int64_t>(),
            lora_summary["trainable_parameters"].get<int64_t>() + magnitudes);

  checkpoint::NamedTensors adapters;
  std::map<std::string, torch::Tensor> initial;
  ExpectAdaptersReproduceTheMergedModel(dir_ + "/dora/epoch_0", {/*dora=*/true}, &adapters, &initial);
  EXPECT_EQ(ExpectTrainedMagnitudes(adapters, initial), magnitudes);
}

// PEFT's files of a DoRA run: use_dora in adapter_config.json and a lora_magnitude_vector per adapted module.
TEST_F(FinetuneTest, DoraPeftAdapterSaysUseDora) {
  Run("tiny/lora_single_device",
      {"output_dir=" + dir_ + "/dora_hf", "max_steps_per_epoch=1", "model.use_dora=True",
       "checkpointer._component_=tune_matrix.training.FullModelHFCheckpointer", "save_adapter_weights_only=True"},
      true);
  const std::string epoch = dir_ + "/dora_hf/epoch_0";
  StatusOr<std::string> config = ReadFile(epoch + "/adapter_config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*config)["use_dora"], true);
  StatusOr<checkpoint::LoadedSafetensors> adapters = checkpoint::LoadSafetensors(epoch + "/adapter_model.safetensors");
  ASSERT_TRUE(adapters.ok()) << adapters.status().ToString();
  int64_t lora_a = 0, magnitudes = 0;
  for (const auto& [name, t] : adapters->tensors) {
    lora_a += name.find(".lora_A.weight") != std::string::npos;
    magnitudes += name.find(".lora_magnitude_vector") != std::string::npos;
  }
  EXPECT_GT(lora_a, 0);
  EXPECT_EQ(magnitudes, lora_a);
}

// A DoRA run's loss falls, and resuming it (magnitudes from the recipe state) continues as the straight run. Both
// epochs stay within the config's 10 warmup steps, where the learning rate does not depend on the run's length
// (the first run's cosine schedule spans 1 epoch, the straight run's 2).
TEST_F(FinetuneTest, DoraTrainsAndResumesWhereItStopped) {
  auto run = [&](const std::string& out, const std::string& epochs, bool resume) {
    std::vector<std::string> o = {"output_dir=" + dir_ + "/" + out, "epochs=" + epochs, "model.use_dora=True",
                                  "max_steps_per_epoch=4"};
    if (resume) o.push_back("resume_from_checkpoint=True");
    return Run("tiny/lora_single_device", o, true)["losses"].get<std::vector<double>>();
  };
  const std::vector<double> straight = run("dora_straight", "2", false);
  run("dora_resumed", "1", false);
  const std::vector<double> second = run("dora_resumed", "2", true);
  ASSERT_EQ(straight.size(), 8u);
  ASSERT_EQ(second.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(second[i], straight[4 + i], 1e-5) << "step " << 5 + i;
  const double first = (straight[0] + straight[1]) / 2;
  const double last = (straight[6] + straight[7]) / 2;
  EXPECT_LT(last, 0.95 * first) << "first " << first << " last " << last;  // 6.90 -> 6.14 when written
}

// QLoRA: the tiny Llama at widths NF4 holds trains with an NF4 base; the saved merged model holds the base
// dequantised, and the seed's QLoRA model plus the saved adapters computes what it does.
TEST_F(FinetuneTest, QloraTrainsAndSavesItsBaseDequantised) {
  nlohmann::json s = Run("tiny/lora_single_device",
                         {"output_dir=" + dir_ + "/qlora", "max_steps_per_epoch=4",
                          "model._component_=tune_matrix.models.qlora_tiny_llama3_2"},
                         true);
  ASSERT_EQ(s["losses"].size(), 4u);
  for (double loss : s["losses"].get<std::vector<double>>()) EXPECT_TRUE(std::isfinite(loss));
  checkpoint::NamedTensors adapters;
  models::Decoder qlora{nullptr};
  ExpectAdaptersReproduceTheMergedModel(dir_ + "/qlora/epoch_0", {/*dora=*/false, /*quantize_base=*/true}, &adapters,
                                        nullptr, &qlora);
  ASSERT_FALSE(qlora.is_empty());
  StatusOr<checkpoint::LoadedSafetensors> merged = checkpoint::LoadSafetensors(dir_ + "/qlora/epoch_0/model.safetensors");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  std::map<std::string, torch::Tensor> saved(merged->tensors.begin(), merged->tensors.end());
  // k_proj has no adapter: saved exactly as its NF4 base dequantised, in the model's dtype (fp32 here).
  auto* k_proj = dynamic_cast<models::LinearImpl*>(qlora->named_modules()["layers.0.attn.k_proj"].get());
  ASSERT_NE(k_proj, nullptr);
  ASSERT_TRUE(k_proj->quantized());
  EXPECT_TRUE(torch::equal(saved.at("layers.0.attn.k_proj.weight"), k_proj->BaseWeight()));
}

// QDoRA (use_dora over an NF4 base, torchtune's llama3/8B_qdora_single_device): the magnitudes train from the
// dequantised base's row norms, and the saved merged model (base dequantised, DoRA's row scale applied) computes
// what the seed's QDoRA model with the saved adapters does.
TEST_F(FinetuneTest, QdoraTrainsItsMagnitudesOverTheNf4Base) {
  nlohmann::json s = Run("tiny/lora_single_device",
                         {"output_dir=" + dir_ + "/qdora", "max_steps_per_epoch=4", "model.use_dora=True",
                          "model._component_=tune_matrix.models.qlora_tiny_llama3_2"},
                         true);
  ASSERT_EQ(s["losses"].size(), 4u);
  for (double loss : s["losses"].get<std::vector<double>>()) EXPECT_TRUE(std::isfinite(loss));
  checkpoint::NamedTensors adapters;
  std::map<std::string, torch::Tensor> initial;
  models::Decoder qdora{nullptr};
  ExpectAdaptersReproduceTheMergedModel(dir_ + "/qdora/epoch_0", {/*dora=*/true, /*quantize_base=*/true}, &adapters,
                                        &initial, &qdora);
  EXPECT_GT(ExpectTrainedMagnitudes(adapters, initial), 0);
  auto* q_proj = dynamic_cast<models::LinearImpl*>(qdora->named_modules()["layers.0.attn.q_proj"].get());
  ASSERT_NE(q_proj, nullptr);
  EXPECT_TRUE(q_proj->quantized() && q_proj->has_dora());
}

TEST_F(FinetuneTest, ResumeContinuesWhereItStopped) {
  auto straight = Run("tiny/full_single_device",
                      {"output_dir=" + dir_ + "/straight", "epochs=2", "max_steps_per_epoch=3"}, false)["losses"]
                      .get<std::vector<double>>();
  Run("tiny/full_single_device", {"output_dir=" + dir_ + "/resumed", "epochs=1", "max_steps_per_epoch=3"}, false);
  auto second = Run("tiny/full_single_device",
                    {"output_dir=" + dir_ + "/resumed", "epochs=2", "max_steps_per_epoch=3",
                     "resume_from_checkpoint=True"},
                    false)["losses"]
                    .get<std::vector<double>>();
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(second.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(second[i], straight[3 + i], 1e-5) << "step " << 4 + i;
}

// A recipe state whose numbers are out of range stops the resume naming the file and the field (it used to train
// negative epochs and read a batch out of bounds).
TEST_F(FinetuneTest, ADamagedRecipeStateStopsTheResumeNamingTheField) {
  Run("tiny/full_single_device", {"output_dir=" + dir_ + "/damaged", "epochs=1", "max_steps_per_epoch=2"}, false);
  const std::string state = dir_ + "/damaged/epoch_0/recipe_state.safetensors";
  for (const char* key : {"next_epoch", "global_step"}) {
    StatusOr<checkpoint::LoadedSafetensors> loaded = checkpoint::LoadSafetensors(state);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    std::map<std::string, std::string> meta = loaded->metadata;
    const std::string saved = meta[key];
    meta[key] = "-3";
    ASSERT_TRUE(checkpoint::SaveSafetensors(state, loaded->tensors, meta).ok());
    Status s;
    Run("tiny/full_single_device",
        {"output_dir=" + dir_ + "/damaged", "epochs=2", "max_steps_per_epoch=2", "resume_from_checkpoint=True"}, false,
        &s);
    ASSERT_FALSE(s.ok()) << key;
    EXPECT_NE(s.message().find(state + ": metadata '" + key + "' is -3, below 0"), std::string::npos) << s.message();
    meta[key] = saved;
    ASSERT_TRUE(checkpoint::SaveSafetensors(state, loaded->tensors, meta).ok());
  }
}

TEST_F(FinetuneTest, ResumeWithoutCheckpointIsAClearError) {
  Status s;
  nlohmann::json summary = Run("tiny/full_single_device",
                               {"output_dir=" + dir_ + "/none", "resume_from_checkpoint=True"}, false, &s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds no epoch_<N>/recipe_state.safetensors"), std::string::npos) << s.message();
  EXPECT_FALSE(summary["ok"].get<bool>());
}

TEST_F(FinetuneTest, NonFiniteLossStopsTheRun) {
  Status s;
  nlohmann::json summary = Run("tiny/full_single_device",
                               {"output_dir=" + dir_ + "/nan", "optimizer.lr=1e30", "max_steps_per_epoch=6",
                                "lr_scheduler.num_warmup_steps=0", "clip_grad_norm=None", "save_checkpoints=False"},
                               false, &s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("non-finite loss"), std::string::npos) << s.message();
  EXPECT_EQ(summary["error_kind"], "non_finite_loss");
}

// What a run prints for the person watching it: where its outputs go, each start-up phase with its time, how
// many steps will run and why, each step's time left, and each checkpoint's path and size.
TEST_F(FinetuneTest, ARunSaysWhereItsOutputsGoHowManyStepsRunAndWhy) {
  std::string out;
  const std::string run = dir_ + "/told";
  nlohmann::json summary =
      Run("tiny/full_single_device", {"output_dir=" + run, "max_steps_per_epoch=2"}, false, nullptr, &out);
  ASSERT_TRUE(summary.contains("threads")) << summary.dump();
  EXPECT_GE(summary["threads"].get<int>(), 1);
  EXPECT_NE(out.find("Threads: " + std::to_string(summary["threads"].get<int>())), std::string::npos) << out;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string threads = omp != nullptr && *omp != '\0' ? std::string(" (OMP_NUM_THREADS=") + omp + ")\n"
                                                               : ", one per core this process may use: ";
  for (const std::string& line : std::vector<std::string>{
           "Threads: ",
           threads,
           "Writing to " + run + ": metrics " + run + "/logs/metrics.jsonl, checkpoints " + run +
               "/epoch_<N>, summary " + run + "/summary.json\n",
           "Building model tune_matrix.models.tiny_llama3_2 (",
           " parameters, fp32) ...\nBuilt the model in ",
           "Loading the data (tune_matrix.data.byte_tokenizer, torchtune.datasets.alpaca_dataset) ...\nLoaded ",
           "Running 2 steps (1 epoch x 2 steps per epoch): max_steps_per_epoch=2 (the data gives ",
           " steps per epoch: ",
           ", batch_size 8 -> ",
           "epoch 1 step 2 | loss ",
           " | 2/2 steps, elapsed ",
           "Saving checkpoint " + run + "/epoch_0 ...\nSaved checkpoint " + run + "/epoch_0 (",
       }) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_EQ(out.find("Loading weights"), std::string::npos) << out;  // from the seed

  // Starting from that checkpoint: the weights' bytes and the time they took.
  std::string again;
  Run("tiny/full_single_device",
      {"output_dir=" + dir_ + "/again", "max_steps_per_epoch=1", "save_checkpoints=False",
       "checkpointer.checkpoint_dir=" + run + "/epoch_0"},
      false, nullptr, &again);
  EXPECT_NE(again.find("Loading weights from " + run + "/epoch_0 ("), std::string::npos) << again;
  EXPECT_NE(again.find("Loaded the weights in "), std::string::npos) << again;
  EXPECT_NE(again.find("no checkpoints (save_checkpoints=False)"), std::string::npos) << again;
}

// profiler.enabled=True times the scheduled steps by operation: the files, and the categories a LoRA step has.
TEST_F(FinetuneTest, TheProfilerTimesTheScheduledStepsByOperation) {
  std::string out;
  const std::string run = dir_ + "/profiled";
  Run("tiny/lora_single_device",
      {"output_dir=" + run, "max_steps_per_epoch=4", "save_checkpoints=False",
       "profiler._component_=torchtune.training.setup_torch_profiler", "profiler.enabled=True",
       "profiler.wait_steps=1", "profiler.warmup_steps=1", "profiler.active_steps=2"},
      true, nullptr, &out);
  const std::string text_path = run + "/profiler_output/op_profile.txt";
  EXPECT_NE(out.find("Profiler: steps 3-4 timed by ATen operation (profiler.wait_steps 1, warmup_steps 1, "
                     "active_steps 2), written to " + text_path),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Profile of steps 3-4: matmul "), std::string::npos) << out;
  StatusOr<std::string> json = ReadFile(run + "/profiler_output/op_profile.json");
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  const nlohmann::json j = nlohmann::json::parse(*json);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_GT(j["matmul_s"].get<double>(), 0);
  EXPECT_GT(j["attention_s"].get<double>(), 0);
  EXPECT_GT(j["other_s"].get<double>(), 0);
  double self = 0;
  bool shaped_mm = false;
  for (const nlohmann::json& op : j["ops"]) {
    self += op["self_s"].get<double>();
    shaped_mm |= op["category"] == "matmul" && op["shapes"].get<std::string>().find("f32[") == 0;
  }
  EXPECT_TRUE(shaped_mm) << j.dump();
  EXPECT_LE(self, j["step_time_s"].get<double>());
  EXPECT_TRUE(ReadFile(text_path).ok());

  // A run shorter than the schedule says so, and profiles nothing.
  std::string short_out;
  Run("tiny/lora_single_device",
      {"output_dir=" + dir_ + "/short", "max_steps_per_epoch=2", "save_checkpoints=False",
       "profiler._component_=torchtune.training.setup_torch_profiler", "profiler.enabled=True"},
      true, nullptr, &short_out);
  EXPECT_NE(short_out.find("Profiler: this run has 2 steps, fewer than profiler.wait_steps + warmup_steps + "
                           "active_steps (12), so no step is profiled"),
            std::string::npos)
      << short_out;
  EXPECT_FALSE(ReadFile(dir_ + "/short/profiler_output/op_profile.json").ok());
}

// What the operation profiler cannot record is refused by its key, not silently dropped.
TEST_F(FinetuneTest, ProfilerOptionsItCannotHonourAreRefusedNamingTheKey) {
  const Registry& registry = BuiltinRegistry();
  const RecipeSpec* recipe = registry.FindRecipe("lora_finetune_single_device");
  ASSERT_NE(recipe, nullptr);
  struct Case {
    const char* override_arg;
    const char* key;
  };
  for (const Case& k : {Case{"profiler.with_stack=True", "profiler.with_stack"},
                        Case{"profiler.profile_memory=True", "profiler.profile_memory"},
                        Case{"profiler.active_steps=0", "profiler.active_steps"}}) {
    SCOPED_TRACE(k.override_arg);
    StatusOr<Config> c = LoadResolvedConfig(
        *LocateConfig("tiny/lora_single_device", registry),
        {"profiler._component_=torchtune.training.setup_torch_profiler", "profiler.enabled=True", k.override_arg},
        recipe, &registry);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    bool named = false;
    for (const Problem& p : ValidateConfig(*c, *recipe, registry, nullptr)) named |= p.key == k.key;
    EXPECT_TRUE(named);
  }
}

// An epoch shorter than asked is explained: the data, the batch and gradient accumulation give fewer steps.
TEST_F(FinetuneTest, AShortEpochIsExplained) {
  std::string out;
  Run("tiny/lora_single_device",
      {"output_dir=" + dir_ + "/short", "dataset.split=train[:2]", "batch_size=2", "max_steps_per_epoch=2",
       "save_checkpoints=False"},
      true, nullptr, &out);
  EXPECT_NE(out.find("Running 1 step (1 epoch x 1 step per epoch): 1 step per epoch from the data, fewer than "
                     "max_steps_per_epoch=2: 2 samples, batch_size 2 -> 1 batch, gradient_accumulation_steps 1\n"),
            std::string::npos)
      << out;
  Run("tiny/lora_single_device",
      {"output_dir=" + dir_ + "/accumulated", "dataset.split=train[:6]", "batch_size=2",
       "gradient_accumulation_steps=2", "save_checkpoints=False"},
      true, nullptr, &out);
  EXPECT_NE(out.find("Running 1 step (1 epoch x 1 step per epoch): 1 step per epoch from the data, fewer than "
                     "max_steps_per_epoch=200: 6 samples, batch_size 2 -> 3 batches, gradient_accumulation_steps 2; "
                     "the last 1 batch of each epoch is left out (fewer than gradient_accumulation_steps)\n"),
            std::string::npos)
      << out;
}

// A run started without tune run's checks (stand-ins allowed, or in-process) still stops before building a
// model when it cannot write its outputs.
TEST_F(FinetuneTest, AnOutputFolderThatCannotBeMadeStopsTheRunBeforeBuilding) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/file", "x").ok());
  const InProcessRun run = RunInProcess(
      "tiny/lora_single_device", {"output_dir=" + dir_ + "/file/run"},
      RecipeRun(FinetuneRecipe(TrainKind::kLora, RecipeLaunch::kOneProcess)),
      /*stand_ins=*/true);
  const Status& status = run.status;
  const std::string& out = run.printed;
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << status.ToString();
  EXPECT_EQ(status.ExitCode(), 2);
  EXPECT_NE(status.message().find("output_dir " + dir_ + "/file/run cannot be created or written: " + dir_ +
                                  "/file is a regular file, not a folder (Not a directory); fix: pass another "
                                  "output_dir=..."),
            std::string::npos)
      << status.message();
  EXPECT_EQ(out.find("Building model"), std::string::npos) << out;
}

// ----- Knowledge distillation -----

class DistillationTest : public ::testing::Test {
 protected:
  // Runs tiny/kd_single_device (fp32, 6 steps) with `overrides`, as distillation or (`distill` false) as plain
  // LoRA fine-tuning of the same student; returns summary.json.
  nlohmann::json Run(std::vector<std::string> overrides, bool distill = true, Status* status = nullptr) {
    overrides.insert(overrides.begin(), {"device=cpu", "dtype=fp32", "max_steps_per_epoch=6", "save_checkpoints=False",
                                         "output_dir=" + scratch_.path() + "/" + std::to_string(runs_++)});
    const InProcessRun run = RunInProcess("tiny/kd_single_device", overrides,
                                          RecipeRun(distill ? KnowledgeDistillationRecipe(RecipeLaunch::kOneProcess)
                                                            : FinetuneRecipe(TrainKind::kLora, RecipeLaunch::kOneProcess)));
    if (status != nullptr) {
      *status = run.status;
    } else {
      EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
    }
    return run.summary;
  }

  test::ScratchDir scratch_{"tm_distillation_test"};
  int runs_ = 0;
};

TEST_F(DistillationTest, WithKdRatioZeroTheStudentTrainsAsInLoraFineTuning) {
  const nlohmann::json kd = Run({"kd_ratio=0"});
  const nlohmann::json lora = Run({}, /*distill=*/false);
  ASSERT_EQ(kd["losses"].size(), 6u);
  ASSERT_EQ(lora["losses"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(kd["losses"][i].get<double>(), lora["losses"][i].get<double>(), 1e-4) << i;
  // The teacher's parameters are counted beside the student's.
  EXPECT_GT(kd["total_parameters"].get<int64_t>(), lora["total_parameters"].get<int64_t>());
  EXPECT_EQ(kd["trainable_parameters"], lora["trainable_parameters"]);
}

TEST_F(DistillationTest, TheForwardKlFallsAsTheStudentLearnsTheTeacher) {
  // kd_ratio=1: the loss is the forward KL alone, which training lowers.
  const nlohmann::json kd = Run({"kd_ratio=1", "optimizer.lr=0.01", "lr_scheduler.num_warmup_steps=0"});
  ASSERT_EQ(kd["losses"].size(), 6u);
  EXPECT_LT(kd["losses"][5].get<double>(), kd["losses"][0].get<double>() - 0.05) << kd["losses"];
  EXPECT_EQ(kd["recipe"], "knowledge_distillation_single_device");
}

TEST_F(DistillationTest, ATeacherOfAnotherVocabularyIsRefusedNamingBoth) {
  Status status;
  Run({"teacher_model.vocab_size=600"}, /*distill=*/true, &status);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(status.message().find("has a vocabulary of 600 ids and the student 'tune_matrix.models.lora_tiny_llama3_2' "
                                  "one of 512"),
            std::string::npos)
      << status.message();
  // Validation says so first, on the teacher's key.
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = LoadResolvedConfig(*LocateConfig("tiny/kd_single_device", registry),
                                          {"teacher_model.vocab_size=600"},
                                          registry.FindRecipe("knowledge_distillation_single_device"), &registry);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<Problem> problems =
      ValidateConfig(*c, *registry.FindRecipe("knowledge_distillation_single_device"), registry, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "teacher_model");
}

TEST_F(DistillationTest, AMissingTeacherCheckpointIsNamedByItsOwnKey) {
  Status status;
  Run({"teacher_checkpointer.checkpoint_dir=/nonexistent/teacher"}, /*distill=*/true, &status);
  EXPECT_EQ(status.code(), Status::Code::kNotFound);
  EXPECT_NE(status.message().find("teacher_checkpointer.checkpoint_dir /nonexistent/teacher does not exist"),
            std::string::npos)
      << status.message();
}

// ----- Direct preference optimization -----

class DpoTest : public ::testing::Test {
 protected:
  // Runs a tiny DPO config (fp32, 6 steps, lr 0.01 without warm-up unless overridden) in this process (the
  // distributed recipes as one rank); returns summary.json, and each logged step's metrics in `metrics`.
  nlohmann::json Run(const std::string& config, TrainKind kind, std::vector<std::string> overrides,
                     Status* status = nullptr, std::vector<nlohmann::json>* metrics = nullptr) {
    const std::string out_dir = scratch_.path() + "/" + std::to_string(runs_++);
    overrides.insert(overrides.begin(), {"device=cpu", "dtype=fp32", "max_steps_per_epoch=6", "save_checkpoints=False",
                                         "optimizer.lr=0.01", "lr_scheduler.num_warmup_steps=0",
                                         "output_dir=" + out_dir});
    // The config's own recipe; the distributed ones as one rank.
    const InProcessRun run = RunInProcess(config, overrides);
    if (status != nullptr) {
      *status = run.status;
    } else {
      EXPECT_TRUE(run.status.ok()) << run.status.ToString() << "\n" << run.printed;
    }
    if (metrics != nullptr) {
      StatusOr<std::string> lines = ReadFile(out_dir + "/logs/metrics.jsonl");
      std::istringstream in(lines.ok() ? *lines : "");
      for (std::string line; std::getline(in, line);) metrics->push_back(nlohmann::json::parse(line));
    }
    return run.summary;
  }

  test::ScratchDir scratch_{"tm_dpo_test"};
  int runs_ = 0;
};

TEST_F(DpoTest, LoraStartsAtItsReferenceAndTheRewardMarginGrows) {
  std::vector<nlohmann::json> metrics;
  const nlohmann::json s = Run("tiny/lora_dpo_single_device", TrainKind::kLora, {}, nullptr, &metrics);
  ASSERT_EQ(s["losses"].size(), 6u);
  EXPECT_EQ(s["recipe"], "lora_dpo_single_device");
  // The adapters start at zero, so the policy is its reference: every pair's loss is log 2 and no reward.
  EXPECT_NEAR(s["losses"][0].get<double>(), std::log(2.0), 1e-6);
  ASSERT_EQ(metrics.size(), 6u);
  for (const char* key : {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"}) {
    EXPECT_EQ(metrics[0][key].get<double>(), 0.0) << key;
  }
  EXPECT_LT(metrics[0]["log_probs/chosen"].get<double>(), 0.0);
  EXPECT_LT(metrics[0]["log_probs/rejected"].get<double>(), 0.0);
  // From then on the policy prefers the chosen answers more than its reference does: every later step's margin
  // is positive (each step sees other pairs, so the margin and the loss move with them), and over steps 2-6 the
  // margin averages clearly above 0 and the loss below log 2.
  double margins = 0, losses = 0;
  for (size_t i = 1; i < 6; ++i) {
    EXPECT_GT(metrics[i]["rewards/margins"].get<double>(), 0.0) << metrics[i];
    margins += metrics[i]["rewards/margins"].get<double>() / 5;
    losses += s["losses"][i].get<double>() / 5;
  }
  EXPECT_GT(margins, 0.02);
  EXPECT_LT(losses, std::log(2.0) - 0.01) << s["losses"];
  for (const nlohmann::json& m : metrics) {
    EXPECT_NEAR(m["rewards/margins"].get<double>(),
                m["rewards/chosen"].get<double>() - m["rewards/rejected"].get<double>(), 1e-9);
  }
}

TEST_F(DpoTest, FullDpoComparesThePolicyWithTheReferenceCheckpoint) {
  // A first run saves a trained model; a second starts its policy from the seed and its reference from it.
  const std::string trained = scratch_.path() + "/0/epoch_0";
  Run("tiny/full_dpo_distributed", TrainKind::kFull, {"max_steps_per_epoch=3", "save_checkpoints=True"});
  std::vector<nlohmann::json> metrics;
  const nlohmann::json other = Run("tiny/full_dpo_distributed", TrainKind::kFull,
                                   {"ref_checkpointer.checkpoint_dir=" + trained}, nullptr, &metrics);
  ASSERT_EQ(other["losses"].size(), 6u);
  EXPECT_EQ(other["recipe"], "full_dpo_distributed");
  EXPECT_GT(std::abs(other["losses"][0].get<double>() - std::log(2.0)), 1e-3) << other["losses"];
  ASSERT_FALSE(metrics.empty());
  EXPECT_NE(metrics[0]["rewards/chosen"].get<double>(), 0.0);
  // Policy and reference from the same checkpoint: log 2 and no reward at the first step.
  metrics.clear();
  const nlohmann::json same =
      Run("tiny/full_dpo_distributed", TrainKind::kFull,
          {"ref_checkpointer.checkpoint_dir=" + trained, "checkpointer.checkpoint_dir=" + trained}, nullptr, &metrics);
  ASSERT_EQ(same["losses"].size(), 6u);
  EXPECT_NEAR(same["losses"][0].get<double>(), std::log(2.0), 1e-6);
  EXPECT_EQ(metrics[0]["rewards/margins"].get<double>(), 0.0);
  // The reference's parameters are counted beside the policy's; only the policy's train.
  EXPECT_EQ(same["total_parameters"].get<int64_t>(), 2 * same["trainable_parameters"].get<int64_t>());
}

TEST_F(DpoTest, AMissingReferenceCheckpointIsNamedByItsOwnKey) {
  Status status;
  Run("tiny/full_dpo_distributed", TrainKind::kFull, {"ref_checkpointer.checkpoint_dir=/nonexistent/reference"},
      &status);
  EXPECT_EQ(status.code(), Status::Code::kNotFound);
  EXPECT_NE(status.message().find("ref_checkpointer.checkpoint_dir /nonexistent/reference does not exist"),
            std::string::npos)
      << status.message();
}

TEST_F(DpoTest, BadConfigsAreRefusedNamingTheKey) {
  const Registry& registry = BuiltinRegistry();
  // Full DPO without ref_checkpointer.
  const RecipeSpec* full = registry.FindRecipe("full_dpo_distributed");
  ASSERT_NE(full, nullptr);
  StatusOr<std::string> text = ReadFile(std::string(TM_SOURCE_DIR) + "/configs/tiny/full_dpo_distributed.yaml");
  ASSERT_TRUE(text.ok());
  const size_t begin = text->find("\nref_checkpointer:");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text->find("\n\n", begin + 1);
  std::string without = text->substr(0, begin + 1) + (end == std::string::npos ? "" : text->substr(end + 1));
  StatusOr<Config> c = Config::FromString(without, "no_ref.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<Problem> problems = ValidateConfig(*c, *full, registry, nullptr);
  bool named = false;
  for (const Problem& p : problems) named |= p.key == "ref_checkpointer" && p.message.find("missing required key") == 0;
  EXPECT_TRUE(named) << (problems.empty() ? "no problem" : problems[0].ToString());
  // An instruction dataset where the pairs go.
  // An instruction dataset where the pairs go, and the DPO loss where the cross-entropy goes.
  struct Case {
    const char* config;
    const char* recipe;
    const char* override_arg;
    const char* message;
  };
  for (const Case& k : {Case{"tiny/lora_dpo_single_device", "lora_dpo_single_device",
                             "dataset._component_=torchtune.datasets.alpaca_dataset",
                             "'torchtune.datasets.alpaca_dataset' is a dataset component; dataset needs a "
                             "preference_dataset"},
                        Case{"tiny/lora_single_device", "lora_finetune_single_device",
                             "loss._component_=torchtune.rlhf.loss.DPOLoss",
                             "'torchtune.rlhf.loss.DPOLoss' is a preference_loss component; loss needs a loss"}}) {
    SCOPED_TRACE(k.override_arg);
    const RecipeSpec* recipe = registry.FindRecipe(k.recipe);
    ASSERT_NE(recipe, nullptr);
    StatusOr<Config> bad = LoadResolvedConfig(*LocateConfig(k.config, registry), {k.override_arg}, recipe, &registry);
    std::string found = bad.ok() ? "" : bad.status().message();
    if (bad.ok()) {
      for (const Problem& p : ValidateConfig(*bad, *recipe, registry, nullptr)) {
        if (p.key == "dataset._component_" || p.key == "loss._component_") found += p.ToString();
      }
    }
    EXPECT_NE(found.find(k.message), std::string::npos) << found;
  }
}

}  // namespace
}  // namespace tmx::recipes
