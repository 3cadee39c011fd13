#include "recipes/checkpoint/hf_checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "recipes/checkpoint/hf_config.h"
#include "recipes/models/presets.h"
#include "tests/scratch_dir.h"

namespace tmx::checkpoint {
namespace {

using models::Decoder;
using nlohmann::json;

const models::ModelPreset& Preset(const std::string& name) { return *models::FindModelPreset(name); }

torch::Tensor Logits(Decoder& model, const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  return model(tokens);
}

json ReadJson(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << path;
  return json::parse(text.ok() ? *text : "{}");
}

TEST(HfCheckpointTest, SavedModelLoadsBackIntoAFreshOne) {
  test::ScratchDir dir("hf_save");
  for (const char* builder : {"tiny_qwen2", "tiny_phi3", "tiny_gemma2", "tiny_llama3_1"}) {
    SCOPED_TRACE(builder);
    const models::ModelPreset& p = Preset(builder);
    const std::string out = dir.path() + "/" + builder;
    torch::manual_seed(0);
    Decoder trained(p.args);
    ASSERT_TRUE(SaveHfCheckpoint(out, models::MergedStateDict(*trained), p.hf_model_type, p.args).ok());
    EXPECT_TRUE(PathExists(out + "/model.safetensors"));
    EXPECT_FALSE(PathExists(out + "/model.safetensors.index.json"));
    StatusOr<HfModelConfig> config = ReadHfConfig(out);
    ASSERT_TRUE(config.ok()) << config.status().message();
    EXPECT_EQ(config->model_type, p.hf_model_type);
    EXPECT_EQ(models::DecoderFeatures(config->args), models::DecoderFeatures(p.args));

    torch::manual_seed(1);
    Decoder fresh(config->args);
    torch::Tensor tokens = torch::randint(0, 259, {2, 40}, torch::kLong);
    EXPECT_FALSE(torch::allclose(Logits(fresh, tokens), Logits(trained, tokens)));
    const Status loaded = LoadHfCheckpoint(out, config->model_type, *fresh);
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_TRUE(torch::equal(Logits(fresh, tokens), Logits(trained, tokens)));
  }
}

TEST(HfCheckpointTest, LargeModelsAreShardedWithAnIndex) {
  test::ScratchDir dir("hf_shards");
  const models::ModelPreset& p = Preset("tiny_llama3");
  torch::manual_seed(2);
  Decoder model(p.args);
  HfSaveOptions options;
  // 200,000 bytes: the embedding (131,072) and layer 0's attention fill shard 1, its MLP shard 2, layer 1 shard 3
  // but for down_proj, which joins the final norm and lm_head in shard 4.
  options.max_shard_bytes = 200'000;
  ASSERT_TRUE(SaveHfCheckpoint(dir.path(), models::MergedStateDict(*model), "llama", p.args, options).ok());
  const json index = ReadJson(dir.path() + "/model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], 4 * models::CountParameters(*model));
  EXPECT_EQ(index["weight_map"].size(), 21u);  // embed, 2 x 9 per layer, norm, lm_head
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00004.safetensors");
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00004-of-00004.safetensors");
  EXPECT_FALSE(PathExists(dir.path() + "/model.safetensors"));
  EXPECT_TRUE(PathExists(dir.path() + "/model-00003-of-00004.safetensors"));
  EXPECT_EQ(index["weight_map"]["model.layers.1.mlp.down_proj.weight"], "model-00004-of-00004.safetensors");

  StatusOr<NamedTensors> read = ReadHfSafetensors(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->size(), 21u);
  Decoder fresh(p.args);
  ASSERT_TRUE(LoadHfCheckpoint(dir.path(), "llama", *fresh).ok());
  torch::Tensor tokens = torch::randint(0, 259, {1, 16}, torch::kLong);
  EXPECT_TRUE(torch::equal(Logits(fresh, tokens), Logits(model, tokens)));

  // Saving again unsharded replaces the shards and the index.
  ASSERT_TRUE(SaveHfCheckpoint(dir.path(), models::MergedStateDict(*model), "llama", p.args).ok());
  EXPECT_TRUE(PathExists(dir.path() + "/model.safetensors"));
  EXPECT_FALSE(PathExists(dir.path() + "/model.safetensors.index.json"));
  EXPECT_FALSE(PathExists(dir.path() + "/model-00001-of-00004.safetensors"));
}

TEST(HfCheckpointTest, MismatchingCheckpointNamesTheFirstTensorAndLeavesTheModel) {
  test::ScratchDir dir("hf_mismatch");
  const models::ModelPreset& p = Preset("tiny_mistral");
  Decoder saved(p.args);
  ASSERT_TRUE(SaveHfCheckpoint(dir.path(), models::MergedStateDict(*saved), "mistral", p.args).ok());
  models::DecoderArgs other = p.args;
  other.num_kv_heads = 4;
  Decoder model(other);
  const torch::Tensor before = model->named_parameters()["tok_embeddings.weight"].clone();
  const Status s = LoadHfCheckpoint(dir.path(), "mistral", *model);
  EXPECT_EQ(s.message(), dir.path() +
                             ": model.layers.0.self_attn.k_proj.weight (layers.0.attn.k_proj.weight): "
                             "shape [32, 64] in the checkpoint, [64, 64] expected by the model; fix: build "
                             "the model from the checkpoint's config.json, or choose the preset the "
                             "checkpoint was published for");
  EXPECT_TRUE(torch::equal(model->named_parameters()["tok_embeddings.weight"], before));
}

TEST(HfCheckpointTest, LoraModelLoadsItsBaseAndKeepsItsAdapters) {
  test::ScratchDir dir("hf_lora_base");
  const models::ModelPreset& p = Preset("tiny_qwen3");
  torch::manual_seed(3);
  Decoder base(p.args);
  ASSERT_TRUE(SaveHfCheckpoint(dir.path(), models::MergedStateDict(*base), "qwen3", p.args).ok());
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  Decoder adapted(p.args, lora);
  const Status s = LoadHfCheckpoint(dir.path(), "qwen3", *adapted);
  ASSERT_TRUE(s.ok()) << s.message();
  // B = 0: the adapted model computes what its base does.
  torch::Tensor tokens = torch::randint(0, 259, {1, 12}, torch::kLong);
  EXPECT_TRUE(torch::allclose(Logits(adapted, tokens), Logits(base, tokens), 1e-5, 1e-6));
}

TEST(HfCheckpointTest, ReadingRefusesMissingAndMalformedCheckpoints) {
  test::ScratchDir dir("hf_read");
  StatusOr<NamedTensors> none = ReadHfSafetensors(dir.path());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(none.status().message(),
            dir.path() +
                ": no model.safetensors or model.safetensors.index.json in the folder; fix: point to a "
                "Hugging Face checkpoint saved as safetensors (.bin checkpoints are not read)");
  const std::string index = dir.path() + "/model.safetensors.index.json";
  ASSERT_TRUE(WriteFileAtomically(index, R"({"metadata": {"total_size": 1e999}, "weight_map": {}})").ok());
  EXPECT_EQ(ReadHfSafetensors(dir.path()).status().message(),
            index + ":1:29: in metadata.total_size: number 1e999 is out of range (a double holds magnitudes up to "
                    "about 1.8e308); fix: write a number within that range, or regenerate the file");
  ASSERT_TRUE(WriteFileAtomically(index, R"({"weight_map": {"a": "../elsewhere.safetensors"}})").ok());
  EXPECT_EQ(ReadHfSafetensors(dir.path()).status().message(),
            index + ": weight_map[\"a\"] = \"../elsewhere.safetensors\" is not a file name in the checkpoint folder");
  ASSERT_TRUE(SaveSafetensors(dir.path() + "/s1.safetensors", {{"a", torch::ones({2})}}).ok());
  ASSERT_TRUE(WriteFileAtomically(index, R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}})").ok());
  EXPECT_EQ(ReadHfSafetensors(dir.path()).status().message(),
            index + ": places b in s1.safetensors, which does not hold it; fix: re-download the checkpoint");
  ASSERT_TRUE(WriteFileAtomically(index, R"({"weight_map": {"a": "s1.safetensors"}})").ok());
  StatusOr<NamedTensors> one = ReadHfSafetensors(dir.path());
  ASSERT_TRUE(one.ok()) << one.status().message();
  EXPECT_EQ(one->size(), 1u);
}

TEST(HfCheckpointTest, AFifoInAWeightFilesPlaceIsRefusedNotWaitedOn) {
  test::ScratchDir dir("hf_fifo");
  const std::string single = dir.path() + "/model.safetensors";
  ASSERT_EQ(::mkfifo(single.c_str(), 0644), 0);
  StatusOr<NamedTensors> read = ReadHfSafetensors(dir.path());
  EXPECT_EQ(read.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(read.status().message(), single + ": is a FIFO, not a regular file; fix: pass a regular file");
  // A shard named by the index, and the index itself.
  ASSERT_EQ(::unlink(single.c_str()), 0);
  const std::string index = dir.path() + "/model.safetensors.index.json";
  ASSERT_TRUE(WriteFileAtomically(index, R"({"weight_map": {"a": "s1.safetensors"}})").ok());
  ASSERT_EQ(::mkfifo((dir.path() + "/s1.safetensors").c_str(), 0644), 0);
  EXPECT_EQ(ReadHfSafetensors(dir.path()).status().message(),
            index + " lists s1.safetensors: " + dir.path() +
                "/s1.safetensors: is a FIFO, not a regular file; fix: pass a regular file");
  ASSERT_EQ(::unlink(index.c_str()), 0);
  ASSERT_EQ(::mkfifo(index.c_str(), 0644), 0);
  EXPECT_EQ(ReadHfSafetensors(dir.path()).status().message(),
            index + ": is a FIFO, not a regular file; fix: pass a regular file");
}

TEST(HfCheckpointTest, PeftAdapterFilesDescribeTheAdapters) {
  test::ScratchDir dir("hf_peft");
  const models::ModelPreset& p = Preset("tiny_llama3_1");
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "k_proj", "output_proj"};
  lora.apply_to_output = true;
  lora.rank = 4;
  lora.alpha = 8;
  lora.dropout = 0.05;
  Decoder model(p.args, lora);
  const Status s = SavePeftAdapter(dir.path(), models::AdapterParameters(*model), "llama", p.args, lora,
                                   "meta-llama/Meta-Llama-3.1-8B-Instruct");
  ASSERT_TRUE(s.ok()) << s.message();
  const json config = ReadJson(dir.path() + "/adapter_config.json");
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8.0);
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["base_model_name_or_path"], "meta-llama/Meta-Llama-3.1-8B-Instruct");
  EXPECT_EQ(config["target_modules"], json({"q_proj", "k_proj", "o_proj", "lm_head"}));
  EXPECT_EQ(config["rank_pattern"], json::object());
  StatusOr<LoadedSafetensors> weights = LoadSafetensors(dir.path() + "/adapter_model.safetensors");
  ASSERT_TRUE(weights.ok());
  std::map<std::string, at::Tensor> by_name(weights->tensors.begin(), weights->tensors.end());
  EXPECT_EQ(by_name.size(), 2u * (3 * 2 + 1));
  EXPECT_EQ(by_name.at("base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight").sizes(),
            torch::IntArrayRef({32, 4}));
  EXPECT_EQ(by_name.at("base_model.model.lm_head.lora_A.weight").sizes(), torch::IntArrayRef({4, 64}));
  EXPECT_EQ(weights->metadata.at("format"), "pt");

  models::LoraArgs none;
  EXPECT_EQ(SavePeftAdapter(dir.path(), {}, "llama", p.args, none, "x").message(),
            "SavePeftAdapter: no LoRA adapter to save; fix: pass AdapterParameters(model) of a model built with LoRA");
}

TEST(HfCheckpointTest, PeftDoraAdapterCarriesTheMagnitudes) {
  test::ScratchDir dir("hf_peft_dora");
  const models::ModelPreset& p = Preset("tiny_llama3_1");
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  lora.apply_to_output = true;
  lora.rank = 4;
  lora.use_dora = true;
  Decoder model(p.args, lora);
  const Status s = SavePeftAdapter(dir.path(), models::AdapterParameters(*model), "llama", p.args, lora, "base");
  ASSERT_TRUE(s.ok()) << s.message();
  const json config = ReadJson(dir.path() + "/adapter_config.json");
  EXPECT_EQ(config["use_dora"], true);
  EXPECT_EQ(config["peft_type"], "LORA");
  StatusOr<LoadedSafetensors> weights = LoadSafetensors(dir.path() + "/adapter_model.safetensors");
  ASSERT_TRUE(weights.ok());
  std::map<std::string, at::Tensor> by_name(weights->tensors.begin(), weights->tensors.end());
  EXPECT_EQ(by_name.size(), 3u * (2 * 2 + 1));  // A, B and the magnitude of q, v per layer, and of the output
  // v_proj's rows are not re-paired, so its magnitude is the model's as it is.
  EXPECT_TRUE(torch::equal(by_name.at("base_model.model.model.layers.1.self_attn.v_proj.lora_magnitude_vector"),
                           model->named_parameters()["layers.1.attn.v_proj.magnitude"]));
  EXPECT_EQ(by_name.at("base_model.model.lm_head.lora_magnitude_vector").sizes(),
            torch::IntArrayRef({p.args.vocab_size}));
}

TEST(HfCheckpointTest, FusedPhi3AdaptersCarryTheirRankPattern) {
  test::ScratchDir dir("hf_peft_phi3");
  const models::ModelPreset& p = Preset("tiny_phi3");
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  lora.apply_to_mlp = true;
  Decoder model(p.args, lora);
  ASSERT_TRUE(SavePeftAdapter(dir.path(), models::AdapterParameters(*model), "phi3", p.args, lora, "phi").ok());
  const json config = ReadJson(dir.path() + "/adapter_config.json");
  EXPECT_EQ(config["target_modules"], json({"qkv_proj", "gate_up_proj", "down_proj"}));
  EXPECT_EQ(config["rank_pattern"], json({{"gate_up_proj", 16}, {"qkv_proj", 16}}));
  EXPECT_EQ(config["alpha_pattern"], json({{"gate_up_proj", 32.0}, {"qkv_proj", 32.0}}));
}

}  // namespace
}  // namespace tmx::checkpoint
