#include "recipes/checkpoint/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "recipes/models/presets.h"

namespace tmx::checkpoint {
namespace {

using models::DecoderArgs;
using nlohmann::json;

json Llama() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
    "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true,
    "hidden_act": "silu", "attention_bias": false, "mlp_bias": false, "head_dim": 64,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
}

std::string Parse(const json& j) {
  StatusOr<HfModelConfig> c = ParseHfConfig(j.dump(), "config.json");
  return c.ok() ? "ok" : c.status().message();
}

// Llama-3.2-1B's config.json gives the llama3_2_1b preset.
TEST(HfConfigTest, PublishedLlamaConfigGivesThePreset) {
  StatusOr<HfModelConfig> c = ParseHfConfig(Llama().dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->model_type, "llama");
  const DecoderArgs want = models::FindModelPreset("llama3_2_1b")->args;
  const DecoderArgs& got = c->args;
  EXPECT_EQ(got.vocab_size, want.vocab_size);
  EXPECT_EQ(got.num_layers, want.num_layers);
  EXPECT_EQ(got.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(got.resolved_head_dim(), 64);
  EXPECT_EQ(got.rope_base, 500000);
  ASSERT_TRUE(got.rope_scaling.has_value());
  EXPECT_EQ(got.rope_scaling->factor, 32);
  EXPECT_EQ(got.rope_scaling->old_context_len, 8192);
  EXPECT_EQ(got.rope_layout, models::RopeLayout::kInterleaved);
  EXPECT_TRUE(got.tie_word_embeddings);
  EXPECT_EQ(models::DecoderFeatures(got), models::DecoderFeatures(want));
}

// Gemma's activation: Google's gemma-2b config.json names "gelu" in the legacy hidden_act and the real
// "gelu_pytorch_tanh" in hidden_activation; a lone legacy "gelu" also means the approximation (torchtune's gemma and
// transformers 4.38-4.41; 4.42+ read hidden_act literally). An explicit hidden_activation "gelu" stays exact.
TEST(HfConfigTest, GemmasActivationIsTheTanhApproximationUnlessHiddenActivationSaysOtherwise) {
  json g = json::parse(R"({
    "architectures": ["GemmaForCausalLM"], "model_type": "gemma", "vocab_size": 256000, "hidden_size": 2048,
    "intermediate_size": 16384, "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1,
    "head_dim": 256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "attention_bias": false, "hidden_act": "gelu", "hidden_activation": "gelu_pytorch_tanh"})");
  auto activation = [](const json& j) {
    StatusOr<HfModelConfig> c = ParseHfConfig(j.dump(), "config.json");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? c->args.mlp_activation : models::MlpActivation::kSilu;
  };
  EXPECT_EQ(activation(g), models::MlpActivation::kGeluTanh);
  json legacy = g;
  legacy.erase("hidden_activation");
  EXPECT_EQ(activation(legacy), models::MlpActivation::kGeluTanh);
  legacy["hidden_activation"] = nullptr;  // what transformers' to_dict writes when unset
  EXPECT_EQ(activation(legacy), models::MlpActivation::kGeluTanh);
  json neither = legacy;
  neither.erase("hidden_act");
  EXPECT_EQ(activation(neither), models::MlpActivation::kGeluTanh);
  json exact = g;
  exact["hidden_activation"] = "gelu";
  EXPECT_EQ(activation(exact), models::MlpActivation::kGelu);
  legacy["hidden_act"] = "relu";
  EXPECT_EQ(Parse(legacy), "config.json: hidden_act: 'relu' is not implemented; supported: silu, gelu, gelu_pytorch_tanh");
  // Gemma 2 reads hidden_activation only: its hidden_act is ignored, as in transformers.
  json g2 = neither;
  g2["model_type"] = "gemma2";
  g2["architectures"] = {"Gemma2ForCausalLM"};
  g2["hidden_act"] = "gelu";
  g2["sliding_window"] = 4096;
  EXPECT_EQ(activation(g2), models::MlpActivation::kGeluTanh);
}

TEST(HfConfigTest, FamilyOptionsComeFromTheModelType) {
  json q = Llama();
  q["model_type"] = "qwen2";
  q["architectures"] = {"Qwen2ForCausalLM"};
  q.erase("rope_scaling");
  q["use_sliding_window"] = false;
  q["sliding_window"] = 32768;  // ignored while use_sliding_window is false, as in transformers
  StatusOr<HfModelConfig> qwen = ParseHfConfig(q.dump(), "qwen");
  ASSERT_TRUE(qwen.ok()) << qwen.status().message();
  EXPECT_TRUE(qwen->args.qkv_bias);
  EXPECT_EQ(qwen->args.rope_layout, models::RopeLayout::kHalf);
  EXPECT_EQ(qwen->args.sliding_window, 0);

  json g = q;
  g["model_type"] = "gemma2";
  g["architectures"] = {"Gemma2ForCausalLM"};
  g.erase("tie_word_embeddings");  // Gemma2Config ties by default
  g["head_dim"] = 256;
  g["hidden_activation"] = "gelu_pytorch_tanh";
  g["attn_logit_softcapping"] = 50.0;
  g["final_logit_softcapping"] = nullptr;
  g["query_pre_attn_scalar"] = 144;
  g["sliding_window"] = 4096;
  StatusOr<HfModelConfig> gemma2 = ParseHfConfig(g.dump(), "gemma2");
  ASSERT_TRUE(gemma2.ok()) << gemma2.status().message();
  const DecoderArgs& a = gemma2->args;
  EXPECT_EQ(
      models::DecoderFeatures(a),
      (std::vector<std::string>{"grouped-query attention", "decoupled head_dim", "geglu (tanh)", "scaled embeddings",
                                "(1 + w) norms", "post-norms", "attention soft-cap", "query_pre_attn_scalar",
                                "sliding window", "alternating sliding window", "tied embeddings"}));
  EXPECT_EQ(a.attn_softcap, 50);
  EXPECT_EQ(a.final_softcap, 0) << "null turns it off";
  EXPECT_EQ(a.query_pre_attn_scalar, 144);

  json m = Llama();
  m["model_type"] = "mistral";
  m["architectures"] = {"MistralForSequenceClassification"};
  m.erase("rope_scaling");
  m["id2label"] = {{"0", "LABEL_0"}};
  StatusOr<HfModelConfig> reward = ParseHfConfig(m.dump(), "rm");
  ASSERT_TRUE(reward.ok()) << reward.status().message();
  EXPECT_EQ(reward->args.num_classes, 1);
  EXPECT_FALSE(reward->args.tie_word_embeddings);
}

TEST(HfConfigTest, UnsupportedFieldsAreNamedWithTheFix) {
  json j = Llama();
  j["model_type"] = "falcon";
  EXPECT_EQ(Parse(j),
            "config.json: model_type: 'falcon' is not supported; supported: " + std::string(SupportedHfModelTypes()));
  j = Llama();
  j["rope_scaling"]["rope_type"] = "yarn";
  EXPECT_EQ(Parse(j),
            "config.json: rope_scaling.rope_type: 'yarn' is not implemented; supported: llama3 (or null for plain "
            "RoPE)");
  j = Llama();
  j["rope_scaling"].erase("factor");
  EXPECT_EQ(Parse(j), "config.json: rope_scaling: factor: missing");
  j = Llama();
  j.erase("hidden_size");
  EXPECT_EQ(Parse(j), "config.json: hidden_size: missing; a llama config.json needs it");
  j = Llama();
  j["num_hidden_layers"] = "16";
  EXPECT_EQ(Parse(j), "config.json: num_hidden_layers: expected an integer, got \"16\"");
  j = Llama();
  j["attention_bias"] = true;
  EXPECT_EQ(Parse(j), "config.json: attention_bias: true is not implemented (the decoder's o_proj has no bias)");
  j = Llama();
  j["hidden_act"] = "relu";
  EXPECT_EQ(Parse(j), "config.json: hidden_act: 'relu' is not implemented; supported: silu, gelu, gelu_pytorch_tanh");
  j = Llama();
  j["architectures"] = {"LlamaForTokenClassification"};
  EXPECT_EQ(Parse(j),
            "config.json: architectures: 'LlamaForTokenClassification' is not implemented for model_type llama; "
            "supported: LlamaForCausalLM, LlamaForSequenceClassification");
  j = Llama();
  j["model_type"] = "phi3";
  j["architectures"] = {"Phi3ForCausalLM"};
  EXPECT_EQ(Parse(j).rfind("config.json: rope_scaling: ", 0), 0u) << "LongRoPE and the like are refused";
  j.erase("rope_scaling");
  j["partial_rotary_factor"] = 0.5;
  EXPECT_EQ(Parse(j), "config.json: partial_rotary_factor: 0.5 is not implemented; only 1.0 is");
  j = Llama();
  j["num_key_value_heads"] = 5;
  EXPECT_EQ(Parse(j), "config.json: num_kv_heads: must divide num_heads (32), got 5");
  EXPECT_EQ(ParseHfConfig("[1]", "x.json").status().message(),
            "x.json: not a JSON object; fix: point to a Hugging Face config.json");
  EXPECT_EQ(ParseHfConfig("{", "x.json").status().message().rfind("x.json:1:2: invalid JSON (syntax error", 0), 0u);
  EXPECT_EQ(ParseHfConfig("{\"vocab_size\": 1e999}", "x.json").status().message(),
            "x.json:1:16: in vocab_size: number 1e999 is out of range (a double holds magnitudes up to about 1.8e308); "
            "fix: write a number within that range, or regenerate the file");
  EXPECT_EQ(ReadHfConfig("/nonexistent").status().code(), Status::Code::kNotFound);
}

// Every preset writes a config.json that reads back as the same model.
TEST(HfConfigTest, EveryPresetRoundTrips) {
  for (const models::ModelPreset& p : models::ModelPresets()) {
    SCOPED_TRACE(p.builder);
    StatusOr<std::string> text = HfConfigJson(p.hf_model_type, p.args, "bfloat16");
    ASSERT_TRUE(text.ok()) << text.status().message();
    StatusOr<HfModelConfig> back = ParseHfConfig(*text, p.builder);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->model_type, p.hf_model_type);
    EXPECT_EQ(models::DecoderArgsDifferences(p.args, back->args), std::vector<std::string>{});
    EXPECT_EQ(json::parse(*text)["torch_dtype"], "bfloat16");
  }
}

// transformers 5 saves rope_theta and the scaling inside one rope_parameters object; its config.json reads as
// the 4.x one does (before, the base silently became 10000 without Llama 3 scaling).
TEST(HfConfigTest, Transformers5RopeParametersReadAsTheLegacyKeys) {
  json v5 = Llama();
  v5.erase("rope_theta");
  v5.erase("rope_scaling");
  v5["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "llama3"},         {"factor", 32.0},
                           {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  StatusOr<HfModelConfig> c = ParseHfConfig(v5.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->args.rope_base, 500000);
  ASSERT_TRUE(c->args.rope_scaling.has_value());
  EXPECT_EQ(c->args.rope_scaling->factor, 32);
  EXPECT_EQ(c->args.rope_scaling->old_context_len, 8192);
  EXPECT_EQ(models::DecoderArgsDifferences(ParseHfConfig(Llama().dump(), "4.x")->args, c->args),
            std::vector<std::string>{});
}

// Every preset's config.json rewritten the way transformers 5 saves it (rope_parameters; per layer type for
// Gemma 2, whose layers have types) reads back as the same model.
TEST(HfConfigTest, EveryPresetReadsTheSameFromTransformers5Keys) {
  for (const models::ModelPreset& p : models::ModelPresets()) {
    SCOPED_TRACE(p.builder);
    json j = json::parse(*HfConfigJson(p.hf_model_type, p.args, "bfloat16"));
    json params = j["rope_scaling"].is_null() ? json{{"rope_type", "default"}} : j["rope_scaling"];
    params["rope_theta"] = j["rope_theta"];
    j.erase("rope_theta");
    j.erase("rope_scaling");
    j["rope_parameters"] =
        j.contains("layer_types") ? json{{"sliding_attention", params}, {"full_attention", params}} : params;
    StatusOr<HfModelConfig> back = ParseHfConfig(j.dump(), p.builder);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(models::DecoderArgsDifferences(p.args, back->args), std::vector<std::string>{});
  }
}

TEST(HfConfigTest, RopeParametersTheDecoderCannotFollowAreRefused) {
  json base = Llama();
  base.erase("rope_theta");
  base.erase("rope_scaling");
  json both = base;
  both["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  both["rope_scaling"] = Llama()["rope_scaling"];
  EXPECT_EQ(Parse(both), "config.json: rope_scaling: given beside rope_parameters; keep one (rope_parameters: "
                         "transformers 5, rope_scaling: 4.x)");
  json theta = base;
  theta["rope_theta"] = 10000.0;
  theta["rope_parameters"] = {{"rope_theta", 500000.0}};
  EXPECT_EQ(Parse(theta), "config.json: rope_theta: 10000.0 disagrees with rope_parameters.rope_theta 500000.0; keep one");
  json layers = base;
  layers["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}}, {"sliding_attention", {{"rope_theta", 1e4}}}};
  EXPECT_EQ(Parse(layers).rfind("config.json: rope_parameters.sliding_attention: differs from the other layer types' (",
                                0),
            0u)
      << Parse(layers);
  json partial = base;
  partial["rope_parameters"] = {{"rope_theta", 500000.0}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(Parse(partial), "config.json: partial_rotary_factor: 0.5 is not implemented; only 1.0 is");
  json yarn = base;
  yarn["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(Parse(yarn), "config.json: rope_scaling.rope_type: 'yarn' is not implemented; supported: llama3 (or null "
                         "for plain RoPE)");
  json bad = base;
  bad["rope_parameters"] = 3;
  EXPECT_EQ(Parse(bad), "config.json: rope_parameters: expected an object or null, got 3");
}

TEST(HfConfigTest, WritingRefusesOptionsTheModelTypeCannotExpress) {
  DecoderArgs a = models::FindModelPreset("tiny_qwen3")->args;
  EXPECT_EQ(HfConfigJson("llama", a).status().message(),
            "model_type llama cannot express this model's rope_layout (half vs interleaved) (this model vs what "
            "config.json would say); fix: save with the model_type of the model's family (see "
            "ModelPreset::hf_model_type)");
  a.rope_layout = models::RopeLayout::kInterleaved;
  EXPECT_EQ(HfConfigJson("llama", a).status().message().substr(0, 54),
            "model_type llama cannot express this model's qk_norm (");
  EXPECT_EQ(HfConfigJson("gpt2", a).status().message(),
            "model_type: 'gpt2' is not supported; supported: " + std::string(SupportedHfModelTypes()));
}

}  // namespace
}  // namespace tmx::checkpoint

namespace tmx::checkpoint {
namespace {

// Llama 4 Scout's config.json (Llama4ForConditionalGeneration, model_type llama4): the text model's config is
// its text_config, whose options give the preset.
TEST(HfConfigTest, Llama4MultimodalConfigGivesTheScoutPreset) {
  const std::string json = R"({
    "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408},
    "text_config": {
      "model_type": "llama4_text", "vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192,
      "intermediate_size_mlp": 16384, "num_hidden_layers": 48, "num_attention_heads": 40,
      "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 10485760, "rms_norm_eps": 1e-05,
      "rope_theta": 500000.0, "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
      "use_qk_norm": true, "attention_chunk_size": 8192, "attn_temperature_tuning": true, "floor_scale": 8192,
      "attn_scale": 0.1, "tie_word_embeddings": false,
      "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192},
      "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0,
                         1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0]}})";
  StatusOr<HfModelConfig> c = ParseHfConfig(json, "scout/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "llama4_text");
  const models::ModelPreset* scout = models::FindModelPreset("llama4_scout_17b_16e");
  EXPECT_EQ(models::DecoderArgsDifferences(c->args, scout->args), std::vector<std::string>{});
  // Maverick's interleaving written and read back; a NoPE pattern the decoder cannot follow is named.
  const models::DecoderArgs maverick = models::FindModelPreset("llama4_maverick_17b_128e")->args;
  StatusOr<std::string> written = HfConfigJson("llama4_text", maverick);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  std::string odd = json;
  odd.replace(odd.find("[1, 1, 1, 0"), 11, "[1, 0, 1, 0");
  StatusOr<HfModelConfig> bad = ParseHfConfig(odd, "odd/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no_rope_layers"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace tmx::checkpoint
