#include "recipes/models/presets.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <string>

namespace tmx::models {
namespace {

const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

// Parameter count from the shape alone, independently of the module code.
int64_t ExpectedParameters(const DecoderArgs& a) {
  const int64_t d = a.resolved_head_dim();
  const int64_t q = a.num_heads * d, kv = a.num_kv_heads * d;
  int64_t attn = a.embed_dim * (q + 2 * kv) + q * a.embed_dim;
  if (a.qkv_bias) attn += q + 2 * kv;
  if (a.qk_norm) attn += 2 * d;
  const int64_t norms = (a.post_norms ? 4 : 2) * a.embed_dim;
  const int64_t output = a.tie_word_embeddings ? 0 : a.output_dim() * a.embed_dim;
  int64_t layers = 0;
  for (int64_t i = 0; i < a.num_layers; ++i) {
    // A mixture of experts: the router, every expert and the shared expert, each MLP 3 x dim x hidden.
    const int64_t mlps = a.moe_in_layer(i) ? a.num_experts + (a.shared_expert ? 1 : 0) : 1;
    const int64_t router = a.moe_in_layer(i) ? a.num_experts * a.embed_dim : 0;
    layers += attn + mlps * 3 * a.embed_dim * a.mlp_dim_of_layer(i) + router + norms;
  }
  return a.vocab_size * a.embed_dim + output + layers + a.embed_dim;
}

std::vector<const ModelPreset*> Published() {
  std::vector<const ModelPreset*> out;
  for (const ModelPreset& p : ModelPresets()) {
    if (!p.tiny) out.push_back(&p);
  }
  return out;
}

class PublishedSizeTest : public ::testing::TestWithParam<const ModelPreset*> {};

TEST_P(PublishedSizeTest, ParameterCountEqualsThePublishedOneOnMeta) {
  const ModelPreset& p = *GetParam();
  SCOPED_TRACE(p.family + "." + p.builder + " (" + p.hf_checkpoint + ")");
  ASSERT_TRUE(ValidateDecoderArgs(p.args).ok()) << ValidateDecoderArgs(p.args).message();
  Decoder model(p.args, std::nullopt, kMeta);
  EXPECT_EQ(CountParameters(*model), p.published_params);
  EXPECT_EQ(ExpectedParameters(p.args), p.published_params);
  bool has_output = false;
  for (const auto& item : model->named_parameters()) {
    ASSERT_TRUE(item.value().is_meta()) << item.key();
    has_output = has_output || item.key() == "output.weight";
  }
  EXPECT_EQ(has_output, !p.args.tie_word_embeddings);
}

std::string CaseName(const ::testing::TestParamInfo<const ModelPreset*>& info) { return info.param->builder; }

INSTANTIATE_TEST_SUITE_P(Presets, PublishedSizeTest, ::testing::ValuesIn(Published()), CaseName);

TEST(PresetsTest, EveryFamilyHasSizesAndOneTinyPreset) {
  const std::vector<std::string> families = ModelFamilies();
  EXPECT_EQ(std::set<std::string>(families.begin(), families.end()).size(), families.size()) << "listed once each";
  EXPECT_FALSE(families.empty());
  for (const std::string& family : families) {
    SCOPED_TRACE(family);
    int published = 0, tiny = 0;
    for (const ModelPreset& p : ModelPresets()) {
      if (p.family != family) continue;
      (p.tiny ? tiny : published)++;
    }
    EXPECT_GE(published, 1);
    EXPECT_EQ(tiny, 1);
  }
}

TEST(PresetsTest, NamesAreTorchtunesAndUnique) {
  std::set<std::string> names;
  for (const ModelPreset& p : ModelPresets()) {
    SCOPED_TRACE(p.builder);
    EXPECT_TRUE(names.insert(p.builder).second);
    EXPECT_TRUE(names.insert(p.lora_builder).second);
    EXPECT_EQ(p.lora_builder, "lora_" + p.builder);
    if (!p.tiny) EXPECT_EQ(p.builder.rfind(p.family + "_", 0), 0u) << "builder names start with their family";
    EXPECT_FALSE(p.hf_model_type.empty());
    EXPECT_EQ(p.hf_checkpoint.empty(), p.tiny || p.builder == "llama2_reward_7b");
    EXPECT_FALSE(p.description.empty());
  }
}

TEST(PresetsTest, FindByBuilderLoraBuilderOrComponentPath) {
  const ModelPreset* q = FindModelPreset("qwen2_5_1_5b_instruct");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->family, "qwen2_5");
  EXPECT_EQ(q->hf_checkpoint, "Qwen/Qwen2.5-1.5B-Instruct");
  EXPECT_EQ(FindModelPreset("lora_qwen2_5_1_5b_instruct"), q);
  EXPECT_EQ(FindModelPreset("torchtune.models.qwen2_5.lora_qwen2_5_1_5b_instruct"), q);
  EXPECT_TRUE(IsLoraBuilder(*q, "torchtune.models.qwen2_5.lora_qwen2_5_1_5b_instruct"));
  EXPECT_FALSE(IsLoraBuilder(*q, "qwen2_5_1_5b_instruct"));
  EXPECT_EQ(FindModelPreset("torchtune.models.qwen2.qwen2_5_1_5b_instruct"), nullptr) << "wrong family";
  EXPECT_EQ(FindModelPreset("qwen2_5_2b"), nullptr);
  // The name torchtune's 14B-to-7B distillation config uses: the 7B Instruct's sizes.
  const ModelPreset* seven = FindModelPreset("torchtune.models.qwen2_5.lora_qwen2_5_7b");
  ASSERT_NE(seven, nullptr);
  const ModelPreset* instruct = FindModelPreset("qwen2_5_7b_instruct");
  ASSERT_NE(instruct, nullptr);
  EXPECT_EQ(seven->args.embed_dim, instruct->args.embed_dim);
  EXPECT_EQ(seven->args.num_layers, instruct->args.num_layers);
  EXPECT_EQ(seven->args.norm_eps, instruct->args.norm_eps);
  EXPECT_EQ(seven->args.max_seq_len, instruct->args.max_seq_len);
  EXPECT_EQ(seven->published_params, instruct->published_params);
  EXPECT_EQ(FindModelPreset(""), nullptr);
  const ModelPreset* gemma2 = FindModelPreset("torchtune.models.gemma2.lora_gemma2_2b");
  ASSERT_NE(gemma2, nullptr);
  EXPECT_EQ(gemma2->builder, "gemma2_2b");
  EXPECT_EQ(FindModelPreset("llama3_1_70b")->published_params, 70'553'706'496);
  ASSERT_NE(FindModelPreset("tiny_qwen2_5"), nullptr);
  EXPECT_TRUE(FindModelPreset("lora_tiny_gemma2")->tiny);
}

TEST(PresetsTest, LoraBuilderArgumentsFollowTorchtune) {
  auto names = [](const ModelPreset& p) {
    std::vector<std::string> out;
    for (const BuilderParam& b : p.lora_params) out.push_back(b.name);
    return out;
  };
  const std::vector<std::string> standard = {"lora_attn_modules", "apply_lora_to_mlp", "apply_lora_to_output",
                                             "lora_rank",         "lora_alpha",        "lora_dropout",
                                             "use_dora",          "quantize_base"};
  EXPECT_EQ(names(*FindModelPreset("llama2_7b")), standard);
  EXPECT_EQ(names(*FindModelPreset("qwen2_5_0_5b")), standard);  // tied, but torchtune still takes the argument
  std::vector<std::string> no_output = standard;
  no_output.erase(no_output.begin() + 2);
  EXPECT_EQ(names(*FindModelPreset("qwen2_0_5b")), no_output);
  EXPECT_EQ(names(*FindModelPreset("gemma2_27b")), no_output);
  std::vector<std::string> llama3 = standard;
  std::swap(llama3[6], llama3[7]);
  EXPECT_EQ(names(*FindModelPreset("llama3_8b")), llama3);
  std::vector<std::string> no_dora = standard;
  no_dora.erase(no_dora.begin() + 6);
  EXPECT_EQ(names(*FindModelPreset("llama3_1_405b")), no_dora);
  std::vector<std::string> llama3_2 = standard;
  llama3_2.push_back("tie_word_embeddings");
  EXPECT_EQ(names(*FindModelPreset("llama3_2_3b")), llama3_2);
  EXPECT_EQ(FindModelPreset("llama3_2_3b")->builder_params.size(), 1u);
  for (const ModelPreset& p : ModelPresets()) {
    SCOPED_TRACE(p.builder);
    ASSERT_FALSE(p.lora_params.empty());
    EXPECT_EQ(p.lora_params[0].name, "lora_attn_modules");
    EXPECT_EQ(p.lora_params[0].default_value, "") << "required";
    // A builder without apply_lora_to_output always builds a tied model.
    const std::vector<std::string> params = names(p);
    const bool takes_output = std::count(params.begin(), params.end(), "apply_lora_to_output") > 0;
    if (!takes_output) EXPECT_TRUE(p.args.tie_word_embeddings);
  }
}

TEST(PresetsTest, TinyPresetsPerformTheirFamilysOperationsSmall) {
  for (const ModelPreset& tiny : ModelPresets()) {
    if (!tiny.tiny) continue;
    SCOPED_TRACE(tiny.builder);
    EXPECT_EQ(tiny.builder, "tiny_" + tiny.family);
    const ModelPreset* first = nullptr;
    for (const ModelPreset& p : ModelPresets()) {
      if (!p.tiny && p.family == tiny.family && p.args.num_classes == 0 && first == nullptr) first = &p;
    }
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(DecoderFeatures(tiny.args), DecoderFeatures(first->args)) << "compared with " << first->builder;
    EXPECT_EQ(tiny.args.rope_base, first->args.rope_base);
    EXPECT_EQ(tiny.hf_model_type, first->hf_model_type);
    EXPECT_GE(tiny.args.vocab_size, 512);
    if (tiny.args.sliding_window > 0) EXPECT_LT(tiny.args.sliding_window, 64) << "shorter than test sequences";
    Decoder model(tiny.args, std::nullopt, kMeta);
    const int64_t params = CountParameters(*model);
    EXPECT_EQ(params, ExpectedParameters(tiny.args));
    EXPECT_GT(params, 100'000);
    EXPECT_LT(params, 500'000);
  }
}

TEST(PresetsTest, FamilyOptionsAreThePublishedOnes) {
  const DecoderArgs g2 = FindModelPreset("gemma2_27b")->args;
  EXPECT_EQ(g2.attn_softcap, 50);
  EXPECT_EQ(g2.final_softcap, 30);
  EXPECT_EQ(g2.query_pre_attn_scalar, 144);
  EXPECT_EQ(g2.head_dim, 128);
  EXPECT_EQ(g2.window_of_layer(0), 4096);
  EXPECT_EQ(g2.window_of_layer(1), 0);
  const DecoderArgs q3 = FindModelPreset("qwen3_0_6b_base")->args;
  EXPECT_EQ(q3.max_seq_len, 32768);
  EXPECT_EQ(FindModelPreset("qwen3_0_6b_instruct")->args.max_seq_len, 40960);
  EXPECT_EQ(q3.num_heads * q3.head_dim, 2048);  // wider than embed_dim 1024
  EXPECT_EQ(FindModelPreset("qwen2_5_14b_base")->args.norm_eps, 1e-5);
  EXPECT_EQ(FindModelPreset("qwen2_5_14b_instruct")->args.norm_eps, 1e-6);
  EXPECT_EQ(FindModelPreset("llama3_8b")->args.rope_scaling.has_value(), false);
  EXPECT_EQ(FindModelPreset("llama3_3_70b")->args.rope_scaling->factor, 8);
  EXPECT_EQ(FindModelPreset("code_llama2_13b")->args.rope_base, 1e6);
  EXPECT_EQ(FindModelPreset("mistral_7b")->args.sliding_window, 4096);
  EXPECT_EQ(FindModelPreset("phi4_14b")->args.rope_base, 250000);
  EXPECT_EQ(FindModelPreset("mistral_reward_7b")->args.output_dim(), 1);
}

// The text model's parameters as transformers counts them (Llama4ForCausalLM of the published text_config, built on
// the meta device; every expert counted), and torchtune's llama4 builder options.
TEST(PresetsTest, Llama4PresetsCountEveryExpert) {
  const ModelPreset* scout = FindModelPreset("torchtune.models.llama4.llama4_scout_17b_16e");
  const ModelPreset* maverick = FindModelPreset("lora_llama4_maverick_17b_128e");
  ASSERT_NE(scout, nullptr);
  ASSERT_NE(maverick, nullptr);
  EXPECT_EQ(scout->published_params, 107'769'861'120);
  EXPECT_EQ(maverick->published_params, 400'711'848'960);
  EXPECT_EQ(scout->args.num_experts, 16);
  EXPECT_EQ(maverick->args.num_experts, 128);
  EXPECT_TRUE(scout->args.moe_in_layer(0));
  EXPECT_FALSE(maverick->args.moe_in_layer(0));  // Maverick interleaves dense (16384 wide) and MoE layers
  EXPECT_TRUE(maverick->args.moe_in_layer(1));
  EXPECT_EQ(maverick->args.mlp_dim_of_layer(0), 16384);
  EXPECT_EQ(maverick->args.mlp_dim_of_layer(1), 8192);
  EXPECT_FALSE(scout->args.rope_in_layer(3));
  EXPECT_TRUE(scout->args.rope_in_layer(4));
  EXPECT_TRUE(scout->args.qk_l2_norm);
  EXPECT_FALSE(maverick->args.qk_l2_norm);
  EXPECT_EQ(scout->args.rope_scaling->factor, 16);
  EXPECT_FALSE(maverick->args.rope_scaling.has_value());
  EXPECT_EQ(scout->builder_params.front().name, "decoder_trainable");
  EXPECT_EQ(scout->lora_params[1].name, "decoder_trainable");
  EXPECT_EQ(scout->lora_params[1].default_value, "lora");
}

}  // namespace
}  // namespace tmx::models
