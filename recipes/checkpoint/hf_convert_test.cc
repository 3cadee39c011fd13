#include "recipes/checkpoint/hf_convert.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "recipes/models/presets.h"

namespace tmx::checkpoint {
namespace {

using models::Decoder;
using models::DecoderArgs;

const models::ModelPreset& Preset(const std::string& name) {
  const models::ModelPreset* p = models::FindModelPreset(name);
  TORCH_CHECK(p != nullptr, name);
  return *p;
}

std::map<std::string, at::Tensor> ByName(const NamedTensors& tensors) {
  return std::map<std::string, at::Tensor>(tensors.begin(), tensors.end());
}

NamedTensors RandomState(const DecoderArgs& args) {
  Decoder model(args);
  NamedTensors state;
  for (const auto& item : model->named_parameters()) state.emplace_back(item.key(), torch::randn(item.value().sizes()));
  return state;
}

std::vector<std::string> HfNames(const std::string& builder) {
  std::vector<std::string> names;
  for (const HfTensorMap& m : HfTensorMaps(Preset(builder).hf_model_type, Preset(builder).args)) {
    if (m.hf_name.rfind("model.layers.0.", 0) == 0) names.push_back(m.hf_name.substr(15));
    if (m.hf_name.rfind("model.layers.", 0) != 0) names.push_back(m.hf_name);
  }
  return names;
}

TEST(HfConvertTest, NamesPerModelType) {
  EXPECT_EQ(HfNames("tiny_llama3_2"),
            (std::vector<std::string>{"model.embed_tokens.weight", "input_layernorm.weight", "self_attn.q_proj.weight",
                                      "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                      "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
                                      "mlp.down_proj.weight", "model.norm.weight"}));
  EXPECT_EQ(
      HfNames("tiny_phi3"),
      (std::vector<std::string>{"model.embed_tokens.weight", "input_layernorm.weight", "self_attn.qkv_proj.weight",
                                "self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_up_proj.weight",
                                "mlp.down_proj.weight", "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(HfNames("tiny_gemma2"),
            (std::vector<std::string>{"model.embed_tokens.weight", "input_layernorm.weight", "self_attn.q_proj.weight",
                                      "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                      "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
                                      "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                                      "post_feedforward_layernorm.weight", "model.norm.weight"}));
  const std::vector<std::string> qwen3 = HfNames("tiny_qwen3");
  EXPECT_NE(std::find(qwen3.begin(), qwen3.end(), "self_attn.q_norm.weight"), qwen3.end());
  const std::vector<std::string> qwen2 = HfNames("tiny_qwen2");
  EXPECT_NE(std::find(qwen2.begin(), qwen2.end(), "self_attn.k_proj.bias"), qwen2.end());
  EXPECT_EQ(HfNames("mistral_reward_7b").back(), "score.weight");
  // Phi-3's fused tensors split into q, k, v rows and w1, w3 rows.
  for (const HfTensorMap& m : HfTensorMaps("phi3", Preset("phi4_14b").args)) {
    if (m.hf_name == "model.layers.3.self_attn.qkv_proj.weight") {
      EXPECT_EQ(m.hf_shape, (std::vector<int64_t>{(40 + 2 * 10) * 128, 5120}));
      ASSERT_EQ(m.parts.size(), 3u);
      EXPECT_EQ(m.parts[1].tune_name, "layers.3.attn.k_proj.weight");
      EXPECT_EQ(m.parts[1].rows, 10 * 128);
    }
    if (m.hf_name == "model.layers.3.mlp.gate_up_proj.weight") {
      ASSERT_EQ(m.parts.size(), 2u);
      EXPECT_EQ(m.parts[1].tune_name, "layers.3.mlp.w3.weight");
    }
  }
}

// Hugging Face keeps a head's rotation pairs as (i, i + head_dim/2); the interleaved decoder as (2i, 2i + 1).
TEST(HfConvertTest, InterleavedFamiliesPermuteQueryAndKeyRows) {
  DecoderArgs a = Preset("tiny_llama3").args;
  NamedTensors hf;
  for (const HfTensorMap& m : HfTensorMaps("llama", a)) hf.emplace_back(m.hf_name, torch::zeros(m.hf_shape));
  // Row r of q_proj holds the value r in every column.
  auto rows = [](int64_t n, int64_t cols) { return torch::arange(n, torch::kFloat).unsqueeze(1).repeat({1, cols}); };
  for (auto& [name, t] : hf) {
    if (name == "model.layers.0.self_attn.q_proj.weight" || name == "model.layers.0.self_attn.v_proj.weight") {
      t = rows(t.size(0), t.size(1));
    }
  }
  StatusOr<NamedTensors> tune = HfToTune(hf, "llama", a, "test");
  ASSERT_TRUE(tune.ok()) << tune.status().message();
  auto t = ByName(*tune);
  // head_dim 16: the first head's rows become 0, 8, 1, 9, 2, 10, ...; the second head's 16, 24, 17, ...
  at::Tensor q = t["layers.0.attn.q_proj.weight"].select(1, 0);
  EXPECT_TRUE(torch::equal(q.slice(0, 0, 6), torch::tensor({0, 8, 1, 9, 2, 10}, torch::kFloat))) << q.slice(0, 0, 6);
  EXPECT_TRUE(torch::equal(q.slice(0, 16, 20), torch::tensor({16, 24, 17, 25}, torch::kFloat))) << q.slice(0, 16, 20);
  EXPECT_TRUE(torch::equal(t["layers.0.attn.v_proj.weight"], rows(32, 64))) << "v is not rotated";
  // Half-split families keep the Hugging Face order.
  a.rope_layout = models::RopeLayout::kHalf;
  StatusOr<NamedTensors> half = HfToTune(hf, "llama", a, "test");
  ASSERT_TRUE(half.ok());
  EXPECT_TRUE(torch::equal(ByName(*half)["layers.0.attn.q_proj.weight"], rows(64, 64)));
}

// The permutation is the right one: an interleaved model and a half-split model loaded from the same Hugging Face
// tensors compute the same logits.
TEST(HfConvertTest, PermutedInterleavedModelEqualsHalfSplitModel) {
  for (const char* builder : {"tiny_llama3_1", "tiny_gemma2", "tiny_mistral"}) {
    SCOPED_TRACE(builder);
    torch::manual_seed(0);
    const models::ModelPreset& p = Preset(builder);
    Decoder interleaved(p.args);
    StatusOr<NamedTensors> hf = TuneToHf(interleaved->named_parameters().pairs(), p.hf_model_type, p.args);
    ASSERT_TRUE(hf.ok()) << hf.status().message();
    DecoderArgs half_args = p.args;
    half_args.rope_layout = models::RopeLayout::kHalf;
    StatusOr<NamedTensors> half_state = HfToTune(*hf, p.hf_model_type, half_args, builder);
    ASSERT_TRUE(half_state.ok()) << half_state.status().message();
    Decoder half(half_args);
    LoadIntoModule(*half, *half_state);
    torch::NoGradGuard no_grad;
    torch::Tensor tokens = torch::randint(0, 259, {2, 24}, torch::kLong);
    torch::Tensor a = interleaved(tokens), b = half(tokens);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5);
    EXPECT_FALSE(torch::equal(ByName(*half_state)["layers.0.attn.q_proj.weight"],
                              ByName(interleaved->named_parameters().pairs())["layers.0.attn.q_proj.weight"]));
  }
}

TEST(HfConvertTest, EveryTinyPresetRoundTrips) {
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (!p.tiny) continue;
    SCOPED_TRACE(p.builder);
    const NamedTensors state = RandomState(p.args);
    StatusOr<NamedTensors> hf = TuneToHf(state, p.hf_model_type, p.args);
    ASSERT_TRUE(hf.ok()) << hf.status().message();
    StatusOr<NamedTensors> back = HfToTune(*hf, p.hf_model_type, p.args, p.builder);
    ASSERT_TRUE(back.ok()) << back.status().message();
    ASSERT_EQ(back->size(), state.size());
    auto got = ByName(*back);
    for (const auto& [name, t] : state) EXPECT_TRUE(torch::equal(got[name], t)) << name;
  }
}

TEST(HfConvertTest, MismatchesNameTheFirstTensorWithBothNames) {
  const models::ModelPreset& p = Preset("tiny_qwen2");
  StatusOr<NamedTensors> hf = TuneToHf(RandomState(p.args), "qwen2", p.args);
  ASSERT_TRUE(hf.ok());
  DecoderArgs wider = p.args;
  wider.intermediate_dim = 128;
  EXPECT_EQ(HfToTune(*hf, "qwen2", wider, "/ckpt").status().message(),
            "/ckpt: model.layers.0.mlp.gate_proj.weight (layers.0.mlp.w1.weight): shape [256, 64] in the checkpoint, "
            "[128, 64] expected by the model; fix: build the model from the checkpoint's config.json, or choose the "
            "preset the checkpoint was published for");
  NamedTensors missing = *hf;
  missing.erase(missing.begin() + 3);  // model.layers.0.self_attn.q_proj.bias
  EXPECT_EQ(HfToTune(missing, "qwen2", p.args, "/ckpt").status().message(),
            "/ckpt: model.layers.0.self_attn.q_proj.bias (layers.0.attn.q_proj.bias): missing from the checkpoint, "
            "expected with shape [64]; fix: build the model from the checkpoint's config.json, or choose the preset "
            "the checkpoint was published for");
  NamedTensors extra = *hf;
  extra.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", torch::ones({8}));  // ignored
  extra.emplace_back("lm_head.weight", torch::ones({512, 64}));                          // tied: ignored
  EXPECT_TRUE(HfToTune(extra, "qwen2", p.args, "/ckpt").ok());
  extra.emplace_back("model.layers.2.mlp.gate_proj.weight", torch::ones({256, 64}));
  EXPECT_EQ(HfToTune(extra, "qwen2", p.args, "/ckpt").status().message(),
            "/ckpt: model.layers.2.mlp.gate_proj.weight: in the checkpoint, but a qwen2 model with this configuration "
            "has no such tensor; fix: build the model from the checkpoint's config.json, or choose the preset the "
            "checkpoint was published for");
  // A proxy cut from 3 layers to 2 (DecoderArgs::layers_cut_from) skips the checkpoint's third layer, and only
  // a layer at or past its depth: a layer named like one ("model.layers.20x") is still refused.
  DecoderArgs cut = p.args;
  cut.layers_cut_from = 3;
  EXPECT_TRUE(HfToTune(extra, "qwen2", cut, "/ckpt").ok());
  extra.emplace_back("model.layers.2x.mlp.gate_proj.weight", torch::ones({256, 64}));
  EXPECT_FALSE(HfToTune(extra, "qwen2", cut, "/ckpt").ok());
  NamedTensors with_adapter = RandomState(p.args);
  with_adapter.emplace_back("layers.0.attn.q_proj.lora_a.weight", torch::ones({8, 64}));
  EXPECT_EQ(TuneToHf(with_adapter, "qwen2", p.args).status().message(),
            "layers.0.attn.q_proj.lora_a.weight: has no place in a qwen2 checkpoint; fix: save MergedStateDict(model) "
            "(LoRA adapters merged) or the adapters separately with SavePeftAdapter");
}

// A proxy with a cut vocabulary (DecoderArgs::vocab_cut_from) takes the first rows of the checkpoint's
// embedding and output, and only from a checkpoint of the vocabulary it was cut from.
TEST(HfConvertTest, AProxyWithACutVocabularyKeepsTheFirstRows) {
  const models::ModelPreset& p = Preset("tiny_llama3");
  NamedTensors state = RandomState(p.args);
  StatusOr<NamedTensors> hf = TuneToHf(state, "llama", p.args);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  DecoderArgs cut = p.args;
  cut.vocab_cut_from = cut.vocab_size;
  cut.vocab_size = 100;
  StatusOr<NamedTensors> back = HfToTune(*hf, "llama", cut, "/ckpt");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto got = ByName(*back), whole = ByName(state);
  for (const char* name : {"tok_embeddings.weight", "output.weight"}) {
    ASSERT_EQ(got[name].size(0), 100) << name;
    EXPECT_TRUE(torch::equal(got[name], whole[name].narrow(0, 0, 100))) << name;
  }
  DecoderArgs other = cut;
  other.vocab_cut_from = p.args.vocab_size + 1;  // cut from a vocabulary the checkpoint does not have
  EXPECT_NE(HfToTune(*hf, "llama", other, "/ckpt").status().message().find("shape [512, 64] in the checkpoint"),
            std::string::npos);
}

// PEFT adds scale * B A to the Hugging Face weight, and with DoRA scales each row of the sum by magnitude / its
// norm; it must be the decoder's update, converted like the weight (q/k rows re-paired, fused parts stacked).
TEST(HfConvertTest, PeftAdaptersUpdateTheHuggingFaceWeightsAsTheDecoderDoes) {
  for (const bool dora : {false, true}) {
    for (const char* builder : {"tiny_llama3_2", "tiny_phi4", "tiny_phi3"}) {
      SCOPED_TRACE(std::string(builder) + (dora ? " DoRA" : " LoRA"));
      const models::ModelPreset& p = Preset(builder);
      models::LoraArgs lora;
      lora.attn_modules = {"q_proj", "v_proj", "output_proj"};
      lora.apply_to_mlp = true;
      lora.rank = 4;
      lora.use_dora = dora;
      torch::manual_seed(1);
      Decoder model(p.args, lora);
      torch::NoGradGuard no_grad;
      for (auto& [name, t] : models::AdapterParameters(*model)) {
        // B starts at zero and the magnitude at the row norms otherwise.
        if (name.find("magnitude") != std::string::npos) {
          t.mul_(1 + 0.3 * torch::rand_like(t));
        } else {
          t.normal_();
        }
      }
      StatusOr<PeftAdapterTensors> peft =
          TuneAdaptersToPeft(models::AdapterParameters(*model), p.hf_model_type, p.args, ModuleTensors(*model));
      ASSERT_TRUE(peft.ok()) << peft.status().message();
      const bool fused = p.hf_model_type == "phi3";
      const std::vector<std::string> fused_targets = {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"};
      const std::vector<std::string> targets = {"q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
      EXPECT_EQ(peft->target_modules, fused ? fused_targets : targets);
      if (fused) {
        EXPECT_EQ(peft->rank_multiple, (std::map<std::string, int64_t>{{"qkv_proj", 2}, {"gate_up_proj", 2}}));
      } else {
        EXPECT_TRUE(peft->rank_multiple.empty());
      }
      auto adapters = ByName(peft->tensors);
      StatusOr<NamedTensors> merged_hf = TuneToHf(models::MergedStateDict(*model), p.hf_model_type, p.args);
      ASSERT_TRUE(merged_hf.ok()) << merged_hf.status().message();
      // Unmerged base weights in Hugging Face layout: merge nothing.
      NamedTensors plain;
      for (const auto& item : model->named_parameters()) {
        if (item.key().find(".lora_") == std::string::npos && item.key().find(".magnitude") == std::string::npos) {
          plain.emplace_back(item.key(), item.value());
        }
      }
      auto hf_base = ByName(*TuneToHf(plain, p.hf_model_type, p.args));
      auto hf_merged = ByName(*merged_hf);
      const std::string prefix = "base_model.model.";
      for (const auto& [hf_name, merged] : hf_merged) {
        const std::string module = hf_name.substr(0, hf_name.size() - 7);  // strip ".weight"
        auto a = adapters.find(prefix + module + ".lora_A.weight");
        at::Tensor expected = hf_base[hf_name];
        if (a != adapters.end()) {
          const at::Tensor b = adapters[prefix + module + ".lora_B.weight"];
          expected = expected + (lora.alpha / lora.rank) * torch::matmul(b, a->second);
          auto magnitude = adapters.find(prefix + module + ".lora_magnitude_vector");
          EXPECT_EQ(magnitude != adapters.end(), dora) << hf_name;
          if (magnitude != adapters.end())
            expected = expected * (magnitude->second / expected.norm(2, {1})).unsqueeze(1);
        }
        EXPECT_TRUE(torch::allclose(merged, expected, 1e-4, 1e-5)) << hf_name;
      }
    }
  }
}

// PEFT keeps one magnitude over phi3's fused qkv_proj: k_proj's rows, without an adapter, take their weight's row
// norms, which only the base weights give.
TEST(HfConvertTest, DoraOnPartOfAFusedModuleNeedsTheBaseWeights) {
  const models::ModelPreset& p = Preset("tiny_phi3");
  models::LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  lora.rank = 4;
  lora.use_dora = true;
  torch::manual_seed(2);
  Decoder model(p.args, lora);
  EXPECT_EQ(TuneAdaptersToPeft(models::AdapterParameters(*model), "phi3", p.args).status().message(),
            "layers.0.attn.k_proj.weight: DoRA on the fused model.layers.0.self_attn.qkv_proj needs this weight's row "
            "norms for the rows without an adapter (PEFT keeps one magnitude for the whole module); fix: pass the "
            "model's weights (ModuleTensors(model)) as the base");
  StatusOr<PeftAdapterTensors> peft =
      TuneAdaptersToPeft(models::AdapterParameters(*model), "phi3", p.args, ModuleTensors(*model));
  ASSERT_TRUE(peft.ok()) << peft.status().message();
  auto adapters = ByName(peft->tensors);
  const at::Tensor magnitude = adapters.at("base_model.model.model.layers.0.self_attn.qkv_proj.lora_magnitude_vector");
  const int64_t q = model->args().num_heads * model->args().resolved_head_dim();
  const int64_t kv = model->args().num_kv_heads * model->args().resolved_head_dim();
  ASSERT_EQ(magnitude.sizes(), torch::IntArrayRef({q + 2 * kv}));
  const at::Tensor k_weight = ByName(ModuleTensors(*model)).at("layers.0.attn.k_proj.weight");
  EXPECT_TRUE(torch::allclose(magnitude.narrow(0, q, kv), k_weight.norm(2, {1}), 1e-6, 1e-6));
}

}  // namespace
}  // namespace tmx::checkpoint

namespace tmx::checkpoint {
namespace {

// Llama 4: Maverick-like interleaving (dense layer 0, mixture layer 1); the experts' gate_up_proj holds gate then
// up side by side in its last dimension; a Llama4ForConditionalGeneration checkpoint's language_model.* is the
// text model and its vision tensors are left alone; q/k rows are not permuted.
TEST(HfConvertTest, Llama4SplitsGateUpAlongTheLastDimensionAndReadsTheMultimodalCheckpoint) {
  DecoderArgs args = Preset("tiny_llama4").args;
  args.num_layers = 2;
  args.moe_every_n_layers = 2;
  args.dense_intermediate_dim = 96;
  torch::manual_seed(2);
  const NamedTensors tune = RandomState(args);
  StatusOr<NamedTensors> hf = TuneToHf(tune, "llama4_text", args);
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  std::map<std::string, at::Tensor> h = ByName(*hf), t = ByName(tune);
  EXPECT_EQ(h.at("model.layers.0.feed_forward.gate_proj.weight").sizes(), torch::IntArrayRef({96, args.embed_dim}));
  const at::Tensor gate_up = h.at("model.layers.1.feed_forward.experts.gate_up_proj");
  EXPECT_EQ(gate_up.sizes(), torch::IntArrayRef({args.num_experts, args.embed_dim, 2 * args.intermediate_dim}));
  EXPECT_TRUE(torch::equal(gate_up.narrow(2, 0, args.intermediate_dim), t.at("layers.1.mlp.experts.gate_proj")));
  EXPECT_TRUE(torch::equal(gate_up.narrow(2, args.intermediate_dim, args.intermediate_dim),
                           t.at("layers.1.mlp.experts.up_proj")));
  EXPECT_TRUE(torch::equal(h.at("model.layers.1.feed_forward.shared_expert.down_proj.weight"),
                           t.at("layers.1.mlp.shared_expert.w2.weight")));
  EXPECT_TRUE(torch::equal(h.at("model.layers.0.self_attn.q_proj.weight"), t.at("layers.0.attn.q_proj.weight")));

  NamedTensors multimodal = {{"vision_model.patch_embedding.linear.weight", torch::zeros({4, 4})},
                             {"multi_modal_projector.linear_1.weight", torch::zeros({4, 4})}};
  for (const auto& [name, tensor] : *hf) multimodal.emplace_back("language_model." + name, tensor);
  StatusOr<NamedTensors> back = HfToTune(multimodal, "llama4_text", args, "scout");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  for (const auto& [name, tensor] : *back) EXPECT_TRUE(torch::equal(tensor, t.at(name))) << name;
  EXPECT_EQ(back->size(), tune.size());
  multimodal.emplace_back("language_model.model.layers.0.feed_forward.bogus", torch::zeros({1}));
  StatusOr<NamedTensors> extra = HfToTune(multimodal, "llama4_text", args, "scout");
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("language_model.model.layers.0.feed_forward.bogus"), std::string::npos);
}

}  // namespace
}  // namespace tmx::checkpoint
