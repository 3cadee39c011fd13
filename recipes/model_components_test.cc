// Model components: each preset's published parameter count equals a meta-device build of it, and models are
// chosen through the registry entry only.
#include "recipes/model_components.h"

#include <gtest/gtest.h>

#include "recipes/builtin.h"
#include "recipes/models/presets.h"
#include "recipes/models/vision_model.h"

namespace tmx::recipes {
namespace {

TEST(ModelComponentsTest, EveryPresetIsAComponentUnderTorchtunesNames) {
  // models/presets_test.cc checks each preset's published count on the meta device; here, that the registry
  // carries every preset, under torchtune's builder names, with that count.
  size_t expected = 0;
  for (const models::ModelPreset& p : models::ModelPresets()) {
    // No qlora_ builder for a mixture of experts (torchtune's grouped experts hold no NF4 base).
    const std::string qlora = p.lora_builder.empty() || p.args.num_experts > 0 ? "" : "q" + p.lora_builder;
    expected += 1 + !p.lora_builder.empty() + !qlora.empty();
    for (const std::string& builder : {p.builder, p.lora_builder, qlora}) {
      if (builder.empty()) continue;
      std::string name = p.tiny ? "tune_matrix.models." + builder : "torchtune.models." + p.family + "." + builder;
      const ComponentSpec* c = BuiltinRegistry().FindComponent(name);
      ASSERT_NE(c, nullptr) << name;
      const auto* model = dynamic_cast<const ModelComponent*>(c->impl.get());
      ASSERT_NE(model, nullptr) << name;
      EXPECT_EQ(&model->preset(), &p) << name;
      EXPECT_EQ(model->lora(), builder != p.builder) << name;
      EXPECT_EQ(c->parameter_count, p.tiny ? 0 : p.published_params) << name;
    }
  }
  size_t models = 0;
  for (const ComponentSpec& c : BuiltinRegistry().components()) models += c.impl && c.kind == "model";
  // and torchtune's llama2 builder and its two classifiers, sized by the config, and the vision presets' three
  // builders each (vision_components_test.cc)
  EXPECT_EQ(models, expected + 1 + models::SizedClassifierPresets().size() + 3 * models::VisionPresets().size());
  EXPECT_EQ(models::SizedClassifierPresets().size(), 2u);
  EXPECT_GT(expected, 100u);
}

Config Parse(const std::string& yaml) {
  StatusOr<Config> c = Config::FromString(yaml, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

// The message full_finetune_single_device's validation gives at `key` for Llama 3.2 1B with `argument` (a line
// under model:); "" when none.
std::string ProblemAt(const std::string& argument, const std::string& key) {
  const RecipeSpec* recipe = BuiltinRegistry().FindRecipe("full_finetune_single_device");
  EXPECT_NE(recipe, nullptr);
  StatusOr<Config> config = Config::FromString(
      "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  " + argument + "\n", "c.yaml");
  EXPECT_TRUE(config.ok());
  if (recipe == nullptr || !config.ok()) return "";
  for (const Problem& p : ValidateConfig(*config, *recipe, BuiltinRegistry(), nullptr)) {
    if (p.key == key) return p.message;
  }
  return "";
}

// tune-matrix's num_layers (harness/proxy.h) builds the first layers of a preset: the depth the registry
// entry carries is the preset's, a cut model remembers it for the checkpoint, and the schema refuses more
// layers than the preset has.
TEST(ModelComponentsTest, NumLayersCutsAPresetForAProxy) {
  const ComponentSpec* spec = BuiltinRegistry().FindComponent("torchtune.models.llama3_2.llama3_2_1b");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->layers, 16);
  EXPECT_EQ(BuiltinRegistry().FindComponent("torchtune.models.llama2.llama2")->layers, 0);  // sized by the config
  StatusOr<ModelChoice> whole =
      ModelFromConfig(Parse("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  num_layers: null\n"),
                      BuiltinRegistry());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->args.num_layers, 16);
  EXPECT_EQ(whole->args.layers_cut_from, 0);
  StatusOr<ModelChoice> cut =
      ModelFromConfig(Parse("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  num_layers: 2\n"),
                      BuiltinRegistry());
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->args.num_layers, 2);
  EXPECT_EQ(cut->args.layers_cut_from, 16);
  const ParameterCounts cut_counts = CountModelParameters(*cut), whole_counts = CountModelParameters(*whole);
  EXPECT_LT(cut_counts.total, whole_counts.total);
  // Only the layers are cut: what lies outside them (embeddings, final norm, output) is the whole model's.
  EXPECT_EQ(cut_counts.outside_layers, whole_counts.outside_layers);
  EXPECT_EQ(whole_counts.total - whole_counts.outside_layers, (cut_counts.total - cut_counts.outside_layers) * 8);
  // The schema names the preset's depth.
  EXPECT_NE(ProblemAt("num_layers: 17", "model.num_layers").find("16"), std::string::npos);
}

// tune-matrix's vocab_size on a real preset keeps the first ids of its embedding and output (a proxy whose
// embeddings alone do not fit): the registry entry carries the preset's vocabulary, a cut model remembers it,
// and the schema refuses more ids than the preset has.
TEST(ModelComponentsTest, VocabSizeCutsAPresetForAProxy) {
  const ComponentSpec* spec = BuiltinRegistry().FindComponent("torchtune.models.llama3_2.llama3_2_1b");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->vocab_size, 128256);
  StatusOr<ModelChoice> cut = ModelFromConfig(
      Parse("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  num_layers: 1\n  vocab_size: 1000\n"),
      BuiltinRegistry());
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->args.vocab_size, 1000);
  EXPECT_EQ(cut->args.vocab_cut_from, 128256);
  StatusOr<ModelChoice> whole = ModelFromConfig(
      Parse("model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n  vocab_size: 128256\n"), BuiltinRegistry());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->args.vocab_cut_from, 0);
  EXPECT_NE(ProblemAt("vocab_size: 128257", "model.vocab_size").find("128256"), std::string::npos);
}

TEST(ModelComponentsTest, LoraArgumentsComeFromTheConfig) {
  Config c = Parse(
      "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n  lora_attn_modules: [q_proj, v_proj]\n"
      "  apply_lora_to_mlp: True\n  apply_lora_to_output: False\n  lora_rank: 4\n  lora_alpha: 8\n"
      "  lora_dropout: 0.0\n");
  StatusOr<ModelChoice> choice = ModelFromConfig(c, BuiltinRegistry());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->component, "tune_matrix.models.llama3_2.lora_llama3_2_1b");
  ASSERT_TRUE(choice->lora.has_value());
  EXPECT_EQ(choice->lora->rank, 4);
  EXPECT_EQ(choice->lora->attn_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(choice->args.num_layers, 16);
  EXPECT_FALSE(choice->lora->use_dora);  // not written: LoRA

  Config dora = Parse(
      "model:\n  _component_: torchtune.models.llama3.lora_llama3_8b\n  lora_attn_modules: [q_proj, v_proj]\n"
      "  apply_lora_to_mlp: False\n  apply_lora_to_output: False\n  lora_rank: 8\n  lora_alpha: 16\n"
      "  lora_dropout: 0.0\n  use_dora: True\n");
  StatusOr<ModelChoice> dora_choice = ModelFromConfig(dora, BuiltinRegistry());
  ASSERT_TRUE(dora_choice.ok()) << dora_choice.status().ToString();
  ASSERT_TRUE(dora_choice->lora.has_value());
  EXPECT_TRUE(dora_choice->lora->use_dora);
}

TEST(ModelComponentsTest, TorchtunesLlama2BuilderTakesItsSizesFromTheConfig) {
  // TinyLlama 1.1B as torchtune's llama2/1B_qat_single_device builds it: no intermediate_dim, so torchtune's
  // scale_hidden_dim_for_mlp(2048) = 5632; 1,100,048,384 parameters as transformers counts TinyLlama-1.1B.
  const std::string sizes = "  vocab_size: 32000\n  num_layers: 22\n  num_heads: 32\n  num_kv_heads: 4\n"
                            "  embed_dim: 2048\n  max_seq_len: 2048\n  norm_eps: 1e-5\n";
  StatusOr<ModelChoice> choice =
      ModelFromConfig(Parse("model:\n  _component_: torchtune.models.llama2.llama2\n" + sizes), BuiltinRegistry());
  ASSERT_TRUE(choice.ok()) << choice.status().ToString();
  EXPECT_EQ(choice->component, "tune_matrix.models.llama2.llama2");
  EXPECT_EQ(choice->args.intermediate_dim, 5632);
  EXPECT_EQ(choice->args.num_kv_heads, 4);
  EXPECT_EQ(choice->args.rope_base, 10000);
  EXPECT_EQ(CountModelParameters(*choice).total, 1'100'048'384);
  EXPECT_EQ(models::ScaleHiddenDimForMlp(4096), 11008);  // Llama 2 7B's

  // A size left out, or sizes that make no model, are named at `model`.
  Config missing = Parse("model:\n  _component_: torchtune.models.llama2.llama2\n  vocab_size: 32000\n");
  StatusOr<ModelChoice> refused = ModelFromConfig(missing, BuiltinRegistry());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model.num_layers: 'tune_matrix.models.llama2.llama2' takes the model's "
                                            "sizes from the config; set model.num_layers"),
            std::string::npos)
      << refused.status().message();
  std::string three = sizes;
  three.replace(three.find("num_kv_heads: 4"), 15, "num_kv_heads: 3");
  Config odd = Parse("model:\n  _component_: torchtune.models.llama2.llama2\n" + three);
  std::vector<Problem> problems = ModelSizeChecks(odd, BuiltinRegistry(), nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "model");
  EXPECT_EQ(problems[0].message, "num_kv_heads: must divide num_heads (32), got 3");
}

// torchtune's llama2_classifier and mistral_classifier (PPO's reward and value models): the sized builders with a
// num_classes score head in place of the language-model head.
TEST(ModelComponentsTest, ClassifierBuildersHaveAScoreHeadOfNumClasses) {
  // TinyLlama's sizes: the LM head's 32000 x 2048 replaced by a 1 x 2048 score head.
  const std::string sizes = "  num_classes: 1\n  vocab_size: 32000\n  num_layers: 22\n  num_heads: 32\n"
                            "  num_kv_heads: 4\n  embed_dim: 2048\n  max_seq_len: 2048\n  intermediate_dim: 5632\n";
  StatusOr<ModelChoice> llama = ModelFromConfig(
      Parse("reward_and_value_model:\n  _component_: torchtune.models.llama2.llama2_classifier\n" + sizes),
      BuiltinRegistry(), "reward_and_value_model");
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->component, "tune_matrix.models.llama2.llama2_classifier");
  EXPECT_EQ(llama->args.num_classes, 1);
  EXPECT_EQ(llama->args.output_dim(), 1);
  EXPECT_EQ(CountModelParameters(*llama).total, 1'100'048'384 - 32000 * 2048 + 2048);
  // Mistral 7B's sizes count what transformers counts for RM-Mistral-7B (the mistral_reward_7b preset).
  StatusOr<ModelChoice> mistral = ModelFromConfig(
      Parse("model:\n  _component_: torchtune.models.mistral.mistral_classifier\n  num_classes: 1\n"
            "  vocab_size: 32000\n  num_layers: 32\n  num_heads: 32\n  num_kv_heads: 8\n  embed_dim: 4096\n"
            "  intermediate_dim: 14336\n  max_seq_len: 32768\n"),
      BuiltinRegistry());
  ASSERT_TRUE(mistral.ok()) << mistral.status().ToString();
  EXPECT_EQ(CountModelParameters(*mistral).total, models::FindModelPreset("mistral_reward_7b")->published_params);
  EXPECT_EQ(mistral->args.sliding_window, 0);  // torchtune's mistral builders have none
  Config missing = Parse("model:\n  _component_: torchtune.models.llama2.llama2_classifier\n" +
                         sizes.substr(sizes.find("  vocab_size")));
  StatusOr<ModelChoice> refused = ModelFromConfig(missing, BuiltinRegistry());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("set model.num_classes"), std::string::npos)
      << refused.status().message();
}

// torchtune's qlora_ builders are its lora_ builders with quantize_base=True, which a config may still override.
TEST(ModelComponentsTest, QloraBuildersQuantizeTheBaseByDefault) {
  const std::string lora = "  lora_attn_modules: [q_proj, v_proj]\n  apply_lora_to_mlp: True\n"
                           "  apply_lora_to_output: False\n  lora_rank: 8\n  lora_alpha: 16\n  lora_dropout: 0.0\n";
  const ComponentSpec* spec = BuiltinRegistry().FindComponent("torchtune.models.llama3_1.qlora_llama3_1_8b");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->unsupported_reason, "");
  EXPECT_EQ(spec->name, "tune_matrix.models.llama3_1.qlora_llama3_1_8b");
  bool has_default = false;
  for (const FieldSpec& f : spec->params) has_default |= f.name == "quantize_base" && f.default_yaml == "True";
  EXPECT_TRUE(has_default);
  struct Case {
    std::string yaml;
    bool quantized;
  } cases[] = {
      {"model:\n  _component_: torchtune.models.llama3_1.qlora_llama3_1_8b\n" + lora + "  quantize_base: True\n", true},
      {"model:\n  _component_: torchtune.models.llama3_1.qlora_llama3_1_8b\n" + lora + "  quantize_base: False\n", false},
      {"model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n" + lora + "  quantize_base: True\n", true},
      {"model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n" + lora, false},
  };
  for (const Case& c : cases) {
    StatusOr<ModelChoice> choice = ModelFromConfig(Parse(c.yaml), BuiltinRegistry());
    ASSERT_TRUE(choice.ok()) << c.yaml << choice.status().ToString();
    ASSERT_TRUE(choice->lora.has_value());
    EXPECT_EQ(choice->lora->quantize_base, c.quantized) << c.yaml;
  }
  // Llama 3.1 8B: 7 projections in 32 layers held as NF4, about 6.98e9 of its 8.03e9 parameters.
  StatusOr<ModelChoice> choice = ModelFromConfig(Parse(cases[0].yaml), BuiltinRegistry());
  const ParameterCounts counts = CountModelParameters(*choice);
  EXPECT_EQ(counts.quantized, int64_t{32} * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096));
  EXPECT_EQ(counts.trainable_outside_layers, 0);  // the adapters are all in the layers
  EXPECT_EQ(counts.outside_layers, 2 * int64_t{128256} * 4096 + 4096);  // embedding, output, final norm
  EXPECT_EQ(counts.trainable, int64_t{32} * (8 * (4096 + 4096) + 8 * (4096 + 1024) + 3 * 8 * (4096 + 14336)));
}

// The tiny widths are below one block of NF4 scales; each family's qlora_tiny_ builds at widths NF4 holds.
TEST(ModelComponentsTest, EveryTinyFamilyHasAQloraBuilderNf4CanHold) {
  int families = 0;
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (!p.tiny || p.lora_builder.empty()) continue;
    SCOPED_TRACE(p.family);
    if (p.args.num_experts > 0) {  // refused: no NF4 base for grouped experts
      EXPECT_EQ(BuiltinRegistry().FindComponent("tune_matrix.models.qlora_tiny_" + p.family), nullptr);
      continue;
    }
    ++families;
    const std::string yaml = "model:\n  _component_: tune_matrix.models.qlora_tiny_" + p.family +
                             "\n  lora_attn_modules: [q_proj, k_proj, v_proj, output_proj]\n  apply_lora_to_mlp: True\n"
                             "  lora_rank: 8\n  lora_alpha: 16\n  lora_dropout: 0.0\n  quantize_base: True\n";
    StatusOr<ModelChoice> choice = ModelFromConfig(Parse(yaml), BuiltinRegistry());
    EXPECT_TRUE(choice.ok()) << choice.status().ToString();
    if (!choice.ok()) continue;
    EXPECT_TRUE(choice->lora->quantize_base);
    EXPECT_EQ(choice->args.embed_dim, 256);
    EXPECT_EQ(choice->args.num_layers, p.args.num_layers);
    EXPECT_GT(CountModelParameters(*choice).quantized, 0);
    // The same settings on the tiny lora_ builder name the first projection NF4 cannot hold.
    std::string lora_yaml = yaml;
    lora_yaml.replace(lora_yaml.find("qlora_tiny_"), 1, "");
    StatusOr<ModelChoice> refused = ModelFromConfig(Parse(lora_yaml), BuiltinRegistry());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("quantize_base: layers.0.attn.q_proj.weight: shape"), std::string::npos)
        << refused.status().message();
  }
  EXPECT_GE(families, 10);
}

TEST(ModelComponentsTest, ModelsThatCannotBeBuiltAreNamed) {
  Config c = Parse("model:\n  _component_: torchtune.models.gemma.gemma_2bb\n");
  EXPECT_EQ(ModelFromConfig(c, BuiltinRegistry()).status().message(),
            "c.yaml:2:16: model 'torchtune.models.gemma.gemma_2bb' cannot be built here (see `tune validate` for "
            "the models that can)");
  Config missing = Parse("model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n");
  EXPECT_NE(ModelFromConfig(missing, BuiltinRegistry()).status().message().find("model.lora_attn_modules' is missing"),
            std::string::npos);
}

}  // namespace
}  // namespace tmx::recipes
