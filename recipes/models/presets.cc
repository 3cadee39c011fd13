#include "recipes/models/presets.h"

#include <set>
#include <stdexcept>

#include "recipes/models/model_types.h"

namespace tmx::models {
namespace {

// ----- Builder arguments, as torchtune's builders declare them -----

std::vector<BuilderParam> LoraParams(bool with_output = true) {
  std::vector<BuilderParam> p = {{"lora_attn_modules", ""}, {"apply_lora_to_mlp", "False"}};
  if (with_output) p.push_back({"apply_lora_to_output", "False"});
  for (BuilderParam extra : std::vector<BuilderParam>{{"lora_rank", "8"},
                                                      {"lora_alpha", "16"},
                                                      {"lora_dropout", "0.0"},
                                                      {"use_dora", "False"},
                                                      {"quantize_base", "False"}}) {
    p.push_back(extra);
  }
  return p;
}

// lora_llama3_8b / lora_llama3_70b declare quantize_base before use_dora.
std::vector<BuilderParam> Llama3LoraParams() {
  std::vector<BuilderParam> p = LoraParams();
  std::swap(p[p.size() - 1], p[p.size() - 2]);
  return p;
}

// lora_llama3_1_405b has no use_dora.
std::vector<BuilderParam> Llama3_1_405BLoraParams() {
  std::vector<BuilderParam> p = LoraParams();
  p.erase(p.end() - 2);
  return p;
}

std::vector<BuilderParam> Llama3_2LoraParams() {
  std::vector<BuilderParam> p = LoraParams();
  p.push_back({"tie_word_embeddings", "True"});
  return p;
}

// ----- Family defaults: everything but the sizes -----

DecoderArgs Sizes(int64_t vocab, int64_t layers, int64_t heads, int64_t kv_heads, int64_t dim, int64_t hidden,
                  int64_t max_seq_len) {
  DecoderArgs a;
  a.vocab_size = vocab;
  a.num_layers = layers;
  a.num_heads = heads;
  a.num_kv_heads = kv_heads;
  a.embed_dim = dim;
  a.intermediate_dim = hidden;
  a.max_seq_len = max_seq_len;
  return a;
}

DecoderArgs Llama2(DecoderArgs a, double rope_base = 10000) {
  a.rope_base = rope_base;
  a.norm_eps = 1e-5;
  return a;
}

DecoderArgs Llama3(DecoderArgs a, std::optional<double> scale_factor, bool tied = false) {
  a.rope_base = 500000;
  a.norm_eps = 1e-5;
  if (scale_factor) a.rope_scaling = RopeScaling{*scale_factor, 1, 4, 8192};
  a.tie_word_embeddings = tied;
  return a;
}

// Mistral 7B v0.1 as published: every layer attends to a 4096-token window (torchtune's mistral builder has no
// window, which only differs beyond 4096 tokens).
DecoderArgs Mistral(DecoderArgs a, int64_t window = 4096) {
  a.rope_base = 10000;
  a.norm_eps = 1e-5;
  a.sliding_window = window;
  return a;
}

// Each family's fixed traits (rope layout, biases, norms) come from its model_type's record (model_types.h),
// applied by Preset(); these set what differs between models of one type.
DecoderArgs Qwen2(DecoderArgs a, bool tied, double eps = 1e-6) {
  a.rope_base = 1e6;
  a.norm_eps = eps;
  a.tie_word_embeddings = tied;
  return a;
}

DecoderArgs Qwen3(DecoderArgs a, bool tied, int64_t head_dim = 128) {
  a.rope_base = 1e6;
  a.norm_eps = 1e-6;
  a.head_dim = head_dim;
  a.tie_word_embeddings = tied;
  return a;
}

DecoderArgs Gemma(DecoderArgs a, int64_t head_dim) {
  a.rope_base = 10000;
  a.norm_eps = 1e-6;
  a.head_dim = head_dim;
  a.mlp_activation = MlpActivation::kGeluTanh;
  a.tie_word_embeddings = true;
  return a;
}

// Gemma 2 as published (config.json): attention scores capped at 50, logits at 30, a 4096-token window on even
// layers. torchtune's gemma2 builders pass the two caps the other way round and cap the final hidden state
// instead of the logits; Hugging Face's numbers and placement are used here (logits parity with transformers).
DecoderArgs Gemma2(DecoderArgs a, int64_t head_dim, double query_pre_attn_scalar, int64_t window = 4096) {
  a = Gemma(a, head_dim);
  a.attn_softcap = 50;
  a.final_softcap = 30;
  a.query_pre_attn_scalar = query_pre_attn_scalar;
  a.sliding_window = window;
  return a;
}

// Phi-3 / Phi-4 (Hugging Face model_type phi3): fused qkv_proj and gate_up_proj in the Hub checkpoints, split
// into q/k/v and w1/w3 here as torchtune does. Phi-3-mini-4k attends to a 2047-token window (config.json);
// Phi-4 uses rope_theta 250000 (torchtune's phi4 builder leaves the phi3 default of 10000).
DecoderArgs Phi3(DecoderArgs a, double rope_base, int64_t window) {
  a.rope_base = rope_base;
  a.norm_eps = 1e-5;
  a.sliding_window = window;
  return a;
}

// Llama 4 (torchtune's llama4_decoder, Hugging Face's Llama4TextConfig): top-1 routing over `experts` experts
// plus a shared expert, every `moe_every`-th layer a mixture of experts and the others dense MLPs `dense` wide,
// no RoPE on every fourth layer, the others attending within 8192-token chunks, attention temperature tuning on
// the NoPE layers (Hugging Face's; torchtune has none, which differs from position 8191 on).
DecoderArgs Llama4(DecoderArgs a, int64_t experts, int64_t moe_every, int64_t dense, bool qk_norm,
                   std::optional<RopeScaling> scaling, int64_t chunk = 8192, double temperature_floor = 8192) {
  a.rope_base = 500000;
  a.norm_eps = 1e-5;
  a.rope_scaling = scaling;
  a.num_experts = experts;
  a.experts_per_token = 1;
  a.moe_every_n_layers = moe_every;
  a.dense_intermediate_dim = dense;
  a.shared_expert = true;
  a.nope_layer_interval = 4;
  a.attention_chunk_size = chunk;
  a.qk_l2_norm = qk_norm;
  a.attn_temperature_floor = temperature_floor;
  a.attn_temperature_scale = 0.1;
  return a;
}

// torchtune's llama4 builders: the full ones take the early-fusion model's trainable switches and image size
// (the vision encoder is not built here; see model_components.cc for what each value does), the LoRA one the
// same as strings, then the usual LoRA arguments.
std::vector<BuilderParam> Llama4Params() {
  return {{"decoder_trainable", "True"}, {"encoder_trainable", "False"}, {"fusion_trainable", "True"},
          {"image_size", "336"}};
}

std::vector<BuilderParam> Llama4LoraParams() {
  std::vector<BuilderParam> p = {{"lora_attn_modules", ""},
                                 {"decoder_trainable", "lora"},
                                 {"encoder_trainable", "frozen"},
                                 {"fusion_trainable", "lora"}};
  for (const BuilderParam& q : LoraParams()) {
    if (q.name != "lora_attn_modules") p.push_back(q);
  }
  p.push_back({"image_size", "336"});
  return p;
}

DecoderArgs Classifier(DecoderArgs a) {
  a.num_classes = 1;
  return a;
}

ModelPreset Preset(std::string family, std::string builder, DecoderArgs args, int64_t published, std::string model_type,
                   std::string checkpoint, std::string description,
                   std::vector<BuilderParam> lora_params = LoraParams()) {
  ModelPreset p;
  p.family = std::move(family);
  p.lora_builder = "lora_" + builder;
  p.builder = std::move(builder);
  p.lora_params = std::move(lora_params);
  p.args = args;
  const ModelTypeRecord* type = FindModelType(model_type);
  if (type == nullptr) throw std::logic_error("preset " + p.builder + ": model_type '" + model_type + "' has no record");
  ApplyFixedTraits(*type, &p.args);
  p.published_params = published;
  p.hf_model_type = std::move(model_type);
  p.hf_checkpoint = std::move(checkpoint);
  p.description = std::move(description);
  return p;
}

// llama4: the text decoder of torchtune's early-fusion builders (the vision encoder is not built).
void AddLlama4(std::vector<ModelPreset>* out) {
  for (ModelPreset p :
       {Preset("llama4", "llama4_scout_17b_16e",
               Llama4(Sizes(202048, 48, 40, 8, 5120, 8192, 10485760), 16, 1, 16384, true, RopeScaling{16, 1, 1, 8192}),
               107'769'861'120, "llama4_text", "meta-llama/Llama-4-Scout-17B-16E-Instruct",
               "Llama 4 Scout 17B-16E (text)", Llama4LoraParams()),
        Preset("llama4", "llama4_maverick_17b_128e",
               Llama4(Sizes(202048, 48, 40, 8, 5120, 8192, 1048576), 128, 2, 16384, false, std::nullopt),
               400'711'848'960, "llama4_text", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
               "Llama 4 Maverick 17B-128E (text)", Llama4LoraParams())}) {
    p.builder_params = Llama4Params();
    out->push_back(std::move(p));
  }
}

// llama2, code_llama2, llama3 to llama3_3 and mistral (with the reward models PPO scores with).
void AddLlamaAndMistral(std::vector<ModelPreset>* out) {
  auto add = [out](ModelPreset p) { out->push_back(std::move(p)); };
  // llama2: MHA except 70B; the 7B MLP is torchtune's scale_hidden_dim_for_mlp(4096) = 11008.
  add(Preset("llama2", "llama2_7b", Llama2(Sizes(32000, 32, 32, 32, 4096, 11008, 4096)), 6'738'415'616, "llama",
             "meta-llama/Llama-2-7b-hf", "Llama 2 7B"));
  add(Preset("llama2", "llama2_13b", Llama2(Sizes(32000, 40, 40, 40, 5120, 13824, 4096)), 13'015'864'320, "llama",
             "meta-llama/Llama-2-13b-hf", "Llama 2 13B"));
  add(Preset("llama2", "llama2_70b", Llama2(Sizes(32000, 80, 64, 8, 8192, 28672, 4096)), 68'976'648'192, "llama",
             "meta-llama/Llama-2-70b-hf", "Llama 2 70B"));
  add(Preset("llama2", "llama2_reward_7b", Classifier(Llama2(Sizes(32000, 32, 32, 32, 4096, 11008, 4096))),
             6'607'347'712, "llama", "", "Llama 2 7B with a one-score reward head"));
  // code_llama2 (removed from torchtune in 2025-05, kept for its configs): vocab 32016, rope_theta 1e6.
  add(Preset("code_llama2", "code_llama2_7b", Llama2(Sizes(32016, 32, 32, 32, 4096, 11008, 16384), 1e6), 6'738'546'688,
             "llama", "codellama/CodeLlama-7b-hf", "Code Llama 7B"));
  add(Preset("code_llama2", "code_llama2_13b", Llama2(Sizes(32016, 40, 40, 40, 5120, 13824, 16384), 1e6),
             13'016'028'160, "llama", "codellama/CodeLlama-13b-hf", "Code Llama 13B"));
  add(Preset("code_llama2", "code_llama2_70b", Llama2(Sizes(32016, 80, 64, 8, 8192, 28672, 16384), 1e6), 68'976'910'336,
             "llama", "codellama/CodeLlama-70b-hf", "Code Llama 70B"));
  // llama3: plain RoPE.
  add(Preset("llama3", "llama3_8b", Llama3(Sizes(128256, 32, 32, 8, 4096, 14336, 8192), std::nullopt), 8'030'261'248,
             "llama", "meta-llama/Meta-Llama-3-8B-Instruct", "Llama 3 8B", Llama3LoraParams()));
  add(Preset("llama3", "llama3_70b", Llama3(Sizes(128256, 80, 64, 8, 8192, 28672, 8192), std::nullopt), 70'553'706'496,
             "llama", "meta-llama/Meta-Llama-3-70B-Instruct", "Llama 3 70B", Llama3LoraParams()));
  // llama3_1: RoPE scaled by 8.
  add(Preset("llama3_1", "llama3_1_8b", Llama3(Sizes(128256, 32, 32, 8, 4096, 14336, 131072), 8), 8'030'261'248,
             "llama", "meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama 3.1 8B"));
  add(Preset("llama3_1", "llama3_1_70b", Llama3(Sizes(128256, 80, 64, 8, 8192, 28672, 131072), 8), 70'553'706'496,
             "llama", "meta-llama/Meta-Llama-3.1-70B-Instruct", "Llama 3.1 70B"));
  add(Preset("llama3_1", "llama3_1_405b", Llama3(Sizes(128256, 126, 128, 8, 16384, 53248, 131072), 8), 405'853'388'800,
             "llama", "meta-llama/Meta-Llama-3.1-405B-Instruct", "Llama 3.1 405B", Llama3_1_405BLoraParams()));
  // llama3_2: RoPE scaled by 32, tied embeddings (the builders take tie_word_embeddings, default True).
  for (ModelPreset p :
       {Preset("llama3_2", "llama3_2_1b", Llama3(Sizes(128256, 16, 32, 8, 2048, 8192, 131072), 32, true), 1'235'814'400,
               "llama", "meta-llama/Llama-3.2-1B-Instruct", "Llama 3.2 1B", Llama3_2LoraParams()),
        Preset("llama3_2", "llama3_2_3b", Llama3(Sizes(128256, 28, 24, 8, 3072, 8192, 131072), 32, true), 3'212'749'824,
               "llama", "meta-llama/Llama-3.2-3B-Instruct", "Llama 3.2 3B", Llama3_2LoraParams())}) {
    p.builder_params = {{"tie_word_embeddings", "True"}};
    add(p);
  }
  // llama3_3: torchtune's llama3_3_70b is llama3_1_70b.
  add(Preset("llama3_3", "llama3_3_70b", Llama3(Sizes(128256, 80, 64, 8, 8192, 28672, 131072), 8), 70'553'706'496,
             "llama", "meta-llama/Llama-3.3-70B-Instruct", "Llama 3.3 70B"));
  // mistral
  add(Preset("mistral", "mistral_7b", Mistral(Sizes(32000, 32, 32, 8, 4096, 14336, 32768)), 7'241'732'096, "mistral",
             "mistralai/Mistral-7B-v0.1", "Mistral 7B v0.1"));
  add(Preset("mistral", "mistral_reward_7b", Classifier(Mistral(Sizes(32000, 32, 32, 8, 4096, 14336, 32768))),
             7'110'664'192, "mistral", "weqweasdas/RM-Mistral-7B", "Mistral 7B with a one-score reward head"));
}

// qwen2, qwen2_5 and qwen3.
void AddQwen(std::vector<ModelPreset>* out) {
  auto add = [out](ModelPreset p) { out->push_back(std::move(p)); };
  // qwen2: q/k/v biases, half-split RoPE; 0.5B and 1.5B tie (their LoRA builders have no apply_lora_to_output).
  add(Preset("qwen2", "qwen2_0_5b", Qwen2(Sizes(151936, 24, 14, 2, 896, 4864, 32768), true), 494'032'768, "qwen2",
             "Qwen/Qwen2-0.5B-Instruct", "Qwen2 0.5B", LoraParams(false)));
  add(Preset("qwen2", "qwen2_1_5b", Qwen2(Sizes(151936, 28, 12, 2, 1536, 8960, 32768), true), 1'543'714'304, "qwen2",
             "Qwen/Qwen2-1.5B-Instruct", "Qwen2 1.5B", LoraParams(false)));
  add(Preset("qwen2", "qwen2_7b", Qwen2(Sizes(152064, 28, 28, 4, 3584, 18944, 32768), false), 7'615'616'512, "qwen2",
             "Qwen/Qwen2-7B-Instruct", "Qwen2 7B"));
  // qwen2_5: base builders differ from instruct ones only in max_seq_len (and norm_eps from 14B up).
  struct Qwen25 {
    const char* size;
    const char* hub;
    DecoderArgs sizes;
    bool tied;
    int64_t published;
    bool split;  // separate _base and _instruct builders
  };
  const Qwen25 qwen25[] = {
      {"0_5b", "0.5B", Sizes(151936, 24, 14, 2, 896, 4864, 32768), true, 494'032'768, false},
      {"1_5b", "1.5B", Sizes(151936, 28, 12, 2, 1536, 8960, 32768), true, 1'543'714'304, true},
      {"3b", "3B", Sizes(151936, 36, 16, 2, 2048, 11008, 32768), true, 3'085'938'688, false},
      {"7b", "7B", Sizes(152064, 28, 28, 4, 3584, 18944, 32768), false, 7'615'616'512, true},
      {"14b", "14B", Sizes(152064, 48, 40, 8, 5120, 13824, 32768), false, 14'770'033'664, true},
      {"32b", "32B", Sizes(152064, 64, 40, 8, 5120, 27648, 32768), false, 32'763'876'352, true},
      {"72b", "72B", Sizes(152064, 80, 64, 8, 8192, 29568, 32768), false, 72'706'203'648, true},
  };
  for (const Qwen25& q : qwen25) {
    const std::string name = std::string("qwen2_5_") + q.size;
    const std::string hub = std::string("Qwen/Qwen2.5-") + q.hub;
    const std::string label = std::string("Qwen2.5 ") + q.hub;
    if (!q.split) {
      add(Preset("qwen2_5", name, Qwen2(q.sizes, q.tied), q.published, "qwen2", hub + "-Instruct", label));
      continue;
    }
    DecoderArgs base = Qwen2(q.sizes, q.tied, q.sizes.num_layers >= 48 ? 1e-5 : 1e-6);
    base.max_seq_len = 131072;
    add(Preset("qwen2_5", name + "_base", base, q.published, "qwen2", hub, label + " base"));
    add(Preset("qwen2_5", name + "_instruct", Qwen2(q.sizes, q.tied), q.published, "qwen2", hub + "-Instruct",
               label + " Instruct"));
  }
  // torchtune's qwen2_5/14B_to_7B_KD_lora_single_device names lora_qwen2_5_7b, which its package lacks (it has
  // the _base and _instruct builders); the config loads Qwen2.5-7B-Instruct, so the name builds those sizes.
  add(Preset("qwen2_5", "qwen2_5_7b", Qwen2(Sizes(152064, 28, 28, 4, 3584, 18944, 32768), false), 7'615'616'512,
             "qwen2", "Qwen/Qwen2.5-7B-Instruct", "Qwen2.5 7B Instruct (the name torchtune's 14B-to-7B KD config uses)"));
  // qwen3: q/k RMSNorm, head_dim 128 independent of the width; base builders have max_seq_len 32768, instruct
  // ones 40960. Up to 4B the embeddings are tied.
  struct Qwen3Size {
    const char* size;
    const char* hub;
    DecoderArgs sizes;
    bool tied;
    int64_t published;
  };
  const Qwen3Size qwen3[] = {
      {"0_6b", "0.6B", Sizes(151936, 28, 16, 8, 1024, 3072, 40960), true, 596'049'920},
      {"1_7b", "1.7B", Sizes(151936, 28, 16, 8, 2048, 6144, 40960), true, 1'720'574'976},
      {"4b", "4B", Sizes(151936, 36, 32, 8, 2560, 9728, 40960), true, 4'022'468'096},
      {"8b", "8B", Sizes(151936, 36, 32, 8, 4096, 12288, 40960), false, 8'190'735'360},
      {"14b", "14B", Sizes(151936, 40, 40, 8, 5120, 17408, 40960), false, 14'768'307'200},
  };
  for (const Qwen3Size& q : qwen3) {
    const std::string name = std::string("qwen3_") + q.size;
    const std::string hub = std::string("Qwen/Qwen3-") + q.hub;
    DecoderArgs base = Qwen3(q.sizes, q.tied);
    base.max_seq_len = 32768;
    add(Preset("qwen3", name + "_base", base, q.published, "qwen3", hub + "-Base",
               std::string("Qwen3 ") + q.hub + " base"));
    add(Preset("qwen3", name + "_instruct", Qwen3(q.sizes, q.tied), q.published, "qwen3", hub,
               std::string("Qwen3 ") + q.hub));
  }
  add(Preset("qwen3", "qwen3_32b", Qwen3(Sizes(151936, 64, 64, 8, 5120, 25600, 40960), false), 32'762'123'264, "qwen3",
             "Qwen/Qwen3-32B", "Qwen3 32B"));
}

// gemma, gemma2, phi3 and phi4.
void AddGemmaAndPhi(std::vector<ModelPreset>* out) {
  auto add = [out](ModelPreset p) { out->push_back(std::move(p)); };
  // gemma: GeGLU, scaled embeddings, (1 + w) norms, head_dim 256, always tied.
  add(Preset("gemma", "gemma_2b", Gemma(Sizes(256000, 18, 8, 1, 2048, 16384, 8192), 256), 2'506'172'416, "gemma",
             "google/gemma-2b", "Gemma 2B", LoraParams(false)));
  add(Preset("gemma", "gemma_7b", Gemma(Sizes(256000, 28, 16, 16, 3072, 24576, 8192), 256), 8'537'680'896, "gemma",
             "google/gemma-7b", "Gemma 7B", LoraParams(false)));
  // gemma2
  add(Preset("gemma2", "gemma2_2b", Gemma2(Sizes(256000, 26, 8, 4, 2304, 9216, 8192), 256, 256), 2'614'341'888,
             "gemma2", "google/gemma-2-2b", "Gemma 2 2B", LoraParams(false)));
  add(Preset("gemma2", "gemma2_9b", Gemma2(Sizes(256000, 42, 16, 8, 3584, 14336, 8192), 256, 256), 9'241'705'984,
             "gemma2", "google/gemma-2-9b", "Gemma 2 9B", LoraParams(false)));
  add(Preset("gemma2", "gemma2_27b", Gemma2(Sizes(256000, 46, 32, 16, 4608, 36864, 8192), 128, 144), 27'227'128'320,
             "gemma2", "google/gemma-2-27b", "Gemma 2 27B", LoraParams(false)));
  // phi3 / phi4
  add(Preset("phi3", "phi3_mini", Phi3(Sizes(32064, 32, 32, 32, 3072, 8192, 4096), 10000, 2047), 3'821'079'552, "phi3",
             "microsoft/Phi-3-mini-4k-instruct", "Phi-3 mini 4k"));
  add(Preset("phi4", "phi4_14b", Phi3(Sizes(100352, 40, 40, 10, 5120, 17920, 16384), 250000, 0), 14'659'507'200, "phi3",
             "microsoft/phi-4", "Phi-4 14B"));
}

void AddPublished(std::vector<ModelPreset>* out) {
  AddLlamaAndMistral(out);
  AddQwen(out);
  AddGemmaAndPhi(out);
  AddLlama4(out);
}

// ----- Tiny presets: vocab 512 (the byte tokenizer's 259 ids fit), 2 layers, width 64, MLP 256 -----

DecoderArgs TinySizes(int64_t kv_heads = 2) { return Sizes(512, 2, 4, kv_heads, 64, 256, 512); }

void AddTiny(std::vector<ModelPreset>* out) {
  auto add = [out](std::string family, DecoderArgs args, std::string model_type, std::string what,
                   std::vector<BuilderParam> lora_params = LoraParams()) {
    ModelPreset p = Preset(family, "tiny_" + family, args, 0, std::move(model_type), "", "tiny " + family + ": " + what,
                           std::move(lora_params));
    p.tiny = true;
    // A tiny model's vocabulary can be sized to a real tokenizer's (tests train on each tokenizer).
    const BuilderParam vocab{"vocab_size", std::to_string(args.vocab_size)};
    p.builder_params.push_back(vocab);
    p.lora_params.push_back(vocab);
    out->push_back(std::move(p));
  };
  add("llama2", Llama2(TinySizes(4)), "llama", "multi-head attention, RoPE base 10000, untied");
  add("code_llama2", Llama2(TinySizes(4), 1e6), "llama", "multi-head attention, RoPE base 1e6, untied");
  add("llama3", Llama3(TinySizes(), std::nullopt), "llama", "grouped-query attention, plain RoPE, untied");
  add("llama3_1", Llama3(TinySizes(), 8), "llama", "RoPE scaled by 8, untied");
  // The same shape as the tiny model the matrix has always used (tune_matrix.models.llama_tiny).
  add("llama3_2", Llama3(TinySizes(), 32, true), "llama", "RoPE scaled by 32, tied embeddings", Llama3_2LoraParams());
  out->back().builder_params.insert(out->back().builder_params.begin(), {"tie_word_embeddings", "True"});
  add("llama3_3", Llama3(TinySizes(), 8), "llama", "RoPE scaled by 8, untied");
  add("mistral", Mistral(TinySizes(), 16), "mistral", "16-token sliding window, untied");
  add("qwen2", Qwen2(TinySizes(), true), "qwen2", "q/k/v biases, half-split RoPE, tied", LoraParams(false));
  add("qwen2_5", Qwen2(TinySizes(), true), "qwen2", "q/k/v biases, half-split RoPE, tied");
  add("qwen3", Qwen3(TinySizes(), true, 32), "qwen3", "q/k RMSNorm, head_dim 32 (4 x 32 != 64), tied");
  add("gemma", Gemma(TinySizes(1), 16), "gemma", "GeGLU, embeddings * 8, (1 + w) norms, one kv head, tied",
      LoraParams(false));
  add("gemma2", Gemma2(TinySizes(), 32, 24, 16), "gemma2",
      "Gemma's options plus post-norms, scores capped at 50, logits at 30, score scale 24^-0.5, a 16-token "
      "window on layer 0",
      LoraParams(false));
  add("phi3", Phi3(TinySizes(4), 10000, 32), "phi3", "half-split RoPE, 32-token sliding window, untied");
  add("phi4", Phi3(TinySizes(), 250000, 0), "phi3", "grouped-query attention, RoPE base 250000, untied");
  // As Scout: every layer a mixture (4 experts, top-1, a shared expert), layer 3 without RoPE.
  DecoderArgs llama4 = Llama4(Sizes(512, 4, 4, 2, 64, 64, 512), 4, 1, 0, true, RopeScaling{16, 1, 1, 8192},
                              /*chunk=*/16, /*temperature_floor=*/8);
  add("llama4", llama4, "llama4_text",
      "4 experts (top-1) and a shared expert in every layer, NoPE layer 3, 16-token chunks, q/k L2 norm, "
      "attention temperature from position 7",
      Llama4LoraParams());
  const std::vector<BuilderParam> switches = Llama4Params();
  out->back().builder_params.insert(out->back().builder_params.begin(), switches.begin(), switches.end());
}

std::vector<ModelPreset> BuildTable() {
  std::vector<ModelPreset> table;
  AddPublished(&table);
  AddTiny(&table);
  return table;
}

// "torchtune.models.qwen2_5.lora_qwen2_5_3b" -> family "qwen2_5", name "lora_qwen2_5_3b"; a plain name has no
// family.
void SplitComponent(std::string_view name, std::string_view* family, std::string_view* builder) {
  const size_t last = name.rfind('.');
  if (last == std::string_view::npos) {
    *family = {};
    *builder = name;
    return;
  }
  *builder = name.substr(last + 1);
  const std::string_view head = name.substr(0, last);
  const size_t prev = head.rfind('.');
  *family = prev == std::string_view::npos ? head : head.substr(prev + 1);
}

}  // namespace

const std::vector<ModelPreset>& ModelPresets() {
  static const std::vector<ModelPreset> table = BuildTable();
  return table;
}

std::vector<std::string> TinyFamilies() {
  std::vector<std::string> families;
  for (const ModelPreset& p : ModelPresets()) {
    if (p.tiny) families.push_back(p.family);
  }
  return families;
}

const ModelPreset* FindModelPreset(std::string_view name) {
  std::string_view family, builder;
  SplitComponent(name, &family, &builder);
  for (const ModelPreset& p : ModelPresets()) {
    if (builder != p.builder && builder != p.lora_builder) continue;
    if (!family.empty() && family != p.family) return nullptr;
    return &p;
  }
  return nullptr;
}

bool IsLoraBuilder(const ModelPreset& preset, std::string_view name) {
  std::string_view family, builder;
  SplitComponent(name, &family, &builder);
  return builder == preset.lora_builder;
}

std::vector<std::string> ModelFamilies() {
  std::vector<std::string> families;
  std::set<std::string> seen;
  for (const ModelPreset& p : ModelPresets()) {
    if (seen.insert(p.family).second) families.push_back(p.family);
  }
  return families;
}

const std::vector<ModelPreset>& SizedClassifierPresets() {
  static const std::vector<ModelPreset> presets = [] {
    const std::vector<BuilderParam> sizes = {{"num_classes", ""},  {"vocab_size", ""},   {"num_layers", ""},
                                             {"num_heads", ""},    {"num_kv_heads", ""}, {"embed_dim", ""}};
    ModelPreset llama = Preset("llama2", "llama2_classifier", Classifier(Llama2(DecoderArgs{})), 0, "llama", "",
                               "Llama 2 architecture at the config's sizes with a num_classes score head instead of "
                               "the language-model head (torchtune's llama2_classifier: reward and value models)");
    llama.builder_params = sizes;
    for (BuilderParam p : std::vector<BuilderParam>{
             {"max_seq_len", ""}, {"attn_dropout", "0.0"}, {"intermediate_dim", "None"}, {"norm_eps", "1e-5"}}) {
      llama.builder_params.push_back(p);
    }
    // torchtune's mistral builders have no sliding window.
    ModelPreset mistral = Preset("mistral", "mistral_classifier", Classifier(Mistral(DecoderArgs{}, 0)), 0,
                                 "mistral", "",
                                 "Mistral architecture at the config's sizes with a num_classes score head "
                                 "(torchtune's mistral_classifier: reward and value models)");
    mistral.builder_params = sizes;
    for (BuilderParam p : std::vector<BuilderParam>{{"intermediate_dim", ""},
                                                    {"max_seq_len", ""},
                                                    {"attn_dropout", "0.0"},
                                                    {"norm_eps", "1e-5"},
                                                    {"rope_base", "10000"}}) {
      mistral.builder_params.push_back(p);
    }
    std::vector<ModelPreset> out = {llama, mistral};
    for (ModelPreset& p : out) {
      p.lora_builder.clear();  // torchtune's lora_ classifiers: no config here uses them
      p.lora_params.clear();
      p.sized_by_config = true;
    }
    return out;
  }();
  return presets;
}

const ModelPreset& SizedLlama2Preset() {
  static const ModelPreset preset = [] {
    ModelPreset p = Preset("llama2", "llama2", Llama2(DecoderArgs{}), 0, "llama", "",
                           "Llama 2 architecture at the sizes the config gives (torchtune's llama2 builder)");
    p.lora_builder.clear();  // torchtune's lora_llama2 takes the sizes too; no config here uses it
    p.lora_params.clear();
    p.sized_by_config = true;
    p.builder_params = {{"vocab_size", ""},      {"num_layers", ""},        {"num_heads", ""},
                        {"num_kv_heads", ""},    {"embed_dim", ""},         {"max_seq_len", ""},
                        {"attn_dropout", "0.0"}, {"intermediate_dim", "None"}, {"norm_eps", "1e-5"},
                        {"rope_base", "10000.0"}};
    return p;
  }();
  return preset;
}

int64_t ScaleHiddenDimForMlp(int64_t dim, int64_t multiple_of) {
  const int64_t hidden = 4 * (2 * dim / 3);
  return multiple_of * ((hidden + multiple_of - 1) / multiple_of);
}

}  // namespace tmx::models
