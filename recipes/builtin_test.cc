// The built-in registry's schemas: defaults are well-formed and obey their own constraints, defaults reach
// the config the recipe reads, and constraints are reported with the position of the bad value.
#include "recipes/builtin.h"

#include <gtest/gtest.h>

#include <set>

#include "base/file_util.h"
#include "base/folder.h"
#include "harness/config_manifest.h"
#include "harness/config_store.h"
#include "harness/device.h"
#include "recipes/model_components.h"
#include "recipes/models/presets.h"
#include "recipes/models/vision_model.h"
#include "recipes/train_setup.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

// A config holding exactly `key: <default>` for one field, validated against that field alone.
std::vector<Problem> ValidateDefault(const FieldSpec& f) {
  Registry registry;
  RecipeSpec r;
  r.name = "r";
  r.fields = {f};
  StatusOr<Config> c = Config::FromString(f.name + ": " + f.default_yaml + "\n", "defaults.yaml");
  EXPECT_TRUE(c.ok()) << f.name << ": " << c.status().ToString();
  return c.ok() ? ValidateConfig(*c, r, registry, nullptr) : std::vector<Problem>{};
}

TEST(BuiltinTest, EveryDefaultParsesAndObeysItsOwnConstraints) {
  const Registry& registry = BuiltinRegistry();
  std::vector<const FieldSpec*> fields;
  for (const RecipeSpec& r : registry.recipes()) {
    for (const FieldSpec& f : r.fields) fields.push_back(&f);
  }
  for (const ComponentSpec& c : registry.components()) {
    for (const FieldSpec& f : c.params) fields.push_back(&f);
  }
  for (const FieldSpec* f : fields) {
    if (f->default_yaml.empty() || f->default_yaml.find("${") != std::string::npos) continue;
    for (const Problem& p : ValidateDefault(*f)) ADD_FAILURE() << f->name << " default " << f->default_yaml << ": " << p.ToString();
  }
}

// What each recipe is, as `tune ls --json` exports it for the config generator (issue 51: never guessed from a
// recipe's name).
TEST(BuiltinTest, EveryRecipeSaysWhatItDoes) {
  const Registry& registry = BuiltinRegistry();
  auto traits = [&](const std::string& name) {
    const RecipeSpec* r = registry.FindRecipe(name);
    EXPECT_NE(r, nullptr) << name;
    return r == nullptr ? std::string("?")
                        : std::string(RecipeTaskName(r->task)) + " " + r->trains + " " + r->data + " " + r->objective;
  };
  EXPECT_EQ(traits("full_finetune_single_device"), "train full samples fine-tuning");
  EXPECT_EQ(traits("lora_finetune_distributed"), "train lora samples fine-tuning");
  EXPECT_EQ(traits("knowledge_distillation_single_device"), "train lora samples knowledge_distillation");
  EXPECT_EQ(traits("lora_dpo_single_device"), "train lora preference_pairs dpo");
  EXPECT_EQ(traits("full_dpo_distributed"), "train full preference_pairs dpo");
  EXPECT_EQ(traits("qat_lora_finetune_distributed"), "train lora samples qat");
  EXPECT_EQ(traits("qat_single_device"), "train full samples qat");
  EXPECT_EQ(traits("ppo_full_finetune_single_device"), "train full prompts ppo");
  EXPECT_EQ(traits("generate"), "generate   ");
  EXPECT_EQ(traits("dev/generate_v2_distributed"), "generate   ");
  EXPECT_EQ(traits("quantize"), "quantize   ");
  EXPECT_EQ(traits("eleuther_eval"), "evaluate   ");
  // Every training recipe states all three traits; nothing else states any.
  for (const RecipeSpec& r : registry.recipes()) {
    const bool training = r.task == RecipeTask::kTrain;
    EXPECT_EQ(!r.trains.empty() && !r.data.empty() && !r.objective.empty(), training) << r.name;
    EXPECT_EQ(r.trains.empty() && r.data.empty() && r.objective.empty(), !training) << r.name;
  }
}

class SchemaTest : public ::testing::Test {
 protected:
  StatusOr<Config> Load(const std::string& name, const std::vector<std::string>& overrides) {
    StatusOr<LocatedConfig> located = LocateConfig(name, BuiltinRegistry());
    EXPECT_TRUE(located.ok());
    recipe_ = located->recipe;
    return LoadResolvedConfig(*located, overrides, located->recipe, &BuiltinRegistry());
  }
  std::vector<std::string> Problems(const Config& c) {
    std::vector<std::string> out;
    for (const Problem& p : ValidateConfig(c, *recipe_, BuiltinRegistry(), nullptr)) out.push_back(p.ToString());
    return out;
  }
  const RecipeSpec* recipe_ = nullptr;
};

// Llama 4's early-fusion switches: the vision encoder is not built, so encoder/fusion_trainable are accepted and
// change nothing, while a decoder that would not train, or torchtune's refused 'full', is named.
TEST_F(SchemaTest, Llama4TrainableSwitchesAreCheckedAgainstTheTextOnlyModel) {
  StatusOr<Config> ok = Load("tiny/llama4_lora_single_device",
                             {"model.encoder_trainable=lora", "model.fusion_trainable=frozen"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(Problems(*ok), std::vector<std::string>{});
  StatusOr<Config> frozen = Load("tiny/llama4_lora_single_device", {"model.decoder_trainable=frozen"});
  ASSERT_TRUE(frozen.ok());
  const std::vector<std::string> problems = Problems(*frozen);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("model.decoder_trainable: 'frozen' would train nothing"), std::string::npos)
      << problems[0];
  StatusOr<Config> full = Load("tiny/llama4_lora_single_device", {"model.encoder_trainable=full"});
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(Problems(*full).size(), 1u);
  EXPECT_NE(Problems(*full)[0].find("refused by torchtune's LoRA builders"), std::string::npos);
  StatusOr<Config> off = Load("tiny/llama4_full_single_device", {"model.decoder_trainable=False"});
  ASSERT_TRUE(off.ok());
  ASSERT_EQ(Problems(*off).size(), 1u);
  EXPECT_NE(Problems(*off)[0].find("False would train nothing"), std::string::npos);
}

// A proxy of Maverick (a mixture of experts every second layer) cuts whole dense + MoE blocks, so it keeps its 128
// experts and their routing; Scout (every layer a mixture) cuts layers.
TEST(Llama4ProxyTest, AProxyOfMaverickKeepsItsExpertsAndRouting) {
  const ComponentSpec* maverick = BuiltinRegistry().FindComponent("torchtune.models.llama4.llama4_maverick_17b_128e");
  ASSERT_NE(maverick, nullptr);
  EXPECT_EQ(maverick->layers, 24);  // blocks of 2 layers
  EXPECT_EQ(maverick->parameter_count, 400'711'848'960);
  StatusOr<Config> c = Config::FromString(
      "model:\n  _component_: torchtune.models.llama4.llama4_maverick_17b_128e\n  num_layers: 1\n", "c.yaml");
  ASSERT_TRUE(c.ok());
  StatusOr<ModelChoice> cut = ModelFromConfig(*c, BuiltinRegistry());
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->args.num_layers, 2);
  EXPECT_EQ(cut->args.layers_cut_from, 48);
  EXPECT_FALSE(cut->args.moe_in_layer(0));
  EXPECT_TRUE(cut->args.moe_in_layer(1));
  EXPECT_EQ(cut->args.num_experts, 128);
  EXPECT_EQ(BuiltinRegistry().FindComponent("torchtune.models.llama4.llama4_scout_17b_16e")->layers, 48);
}

TEST_F(SchemaTest, DefaultsReachTheConfigWithTheirOrigin) {
  StatusOr<Config> c = Load("tiny/full_single_device", {"~shuffle", "~optimizer.weight_decay"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(*c->GetBool("shuffle"));
  EXPECT_EQ(c->OriginOf("shuffle").ToString(), "default of recipe 'full_finetune_single_device'");
  EXPECT_DOUBLE_EQ(*c->GetDouble("optimizer.weight_decay"), 0.01);
  EXPECT_EQ(c->OriginOf("optimizer.weight_decay").ToString(), "default of component 'tune_matrix.optim.AdamW'");
  // Interpolated defaults resolve like written values.
  EXPECT_EQ(*c->GetString("checkpointer.output_dir"), *c->GetString("output_dir"));
  // A key the config sets keeps its value.
  EXPECT_EQ(*c->GetInt("batch_size"), 8);
  EXPECT_TRUE(Problems(*c).empty());
}

TEST_F(SchemaTest, ValuesOutOfRangeAndUnknownElementsAreProblems) {
  StatusOr<Config> c = Load("tiny/lora_single_device",
                            {"optimizer.lr=-1", "model.lora_rank=0", "clip_grad_norm=-1", "output_dir=",
                             "model.lora_attn_modules=[q_proj,x_proj]", "model.lora_dropout=1", "batch_size=0"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::string> problems = Problems(*c);
  std::vector<std::string> expected = {
      "override 'output_dir=': output_dir: must not be empty (folder for checkpoints, metrics and the run summary)",
      "override 'model.lora_attn_modules=[q_proj,x_proj]': model.lora_attn_modules: 'x_proj' is not one of q_proj, "
      "k_proj, v_proj, output_proj; did you mean 'q_proj'?",
      "override 'model.lora_rank=0': model.lora_rank: '0' is out of range: must be at least 1",
      "override 'model.lora_dropout=1': model.lora_dropout: '1' is out of range: must be in [0, 1)",
      // checkpointer.output_dir is ${output_dir} in the file: the empty value reaches it too.
      BuiltinConfigPath("tiny/lora_single_device") +
          ":33:15: checkpointer.output_dir: must not be empty (where checkpoints are written)",
      "override 'batch_size=0': batch_size: '0' is out of range: must be at least 1",
      "override 'optimizer.lr=-1': optimizer.lr: '-1' is out of range: must be at least 0",
      "override 'clip_grad_norm=-1': clip_grad_norm: '-1' is out of range: must be above 0 (or null to turn it off)",
  };
  EXPECT_EQ(problems, expected);
}

TEST_F(SchemaTest, OptimizerInBackwardRefusesAccumulationClippingAndRanksAsTorchtuneDoes) {
  StatusOr<Config> ok = Load("tiny/full_single_device", {"optimizer_in_bwd=True", "clip_grad_norm=null"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(Problems(*ok).empty());
  StatusOr<Config> c = Load("tiny/full_single_device",
                            {"optimizer_in_bwd=True", "gradient_accumulation_steps=2", "clip_grad_norm=1.0"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<std::string> expected = {
      "override 'optimizer_in_bwd=True': optimizer_in_bwd: gradient accumulation is not supported with "
      "optimizer_in_bwd=True (each gradient is applied and freed inside backward); set gradient_accumulation_steps=1 "
      "or optimizer_in_bwd=False",
      "override 'optimizer_in_bwd=True': optimizer_in_bwd: gradient clipping is not supported with "
      "optimizer_in_bwd=True (no step sees every gradient at once); set clip_grad_norm=null or optimizer_in_bwd=False",
  };
  EXPECT_EQ(Problems(*c), expected);
  StatusOr<Config> ranks = Load("tiny/full_distributed", {"optimizer_in_bwd=True", "clip_grad_norm=null"});
  ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
  const std::vector<std::string> across = {
      "override 'optimizer_in_bwd=True': optimizer_in_bwd: optimizer_in_bwd across ranks is not implemented "
      "(gradients are reduced over the ranks after backward); set optimizer_in_bwd=False"};
  EXPECT_EQ(Problems(*ranks), across);
}

// Activation offloading (single device, with checkpointing): accepted for a device type that has memory of
// its own to offload from, refused on cpu and in the distributed recipes, each with the fix.
TEST_F(SchemaTest, ActivationOffloadingNeedsCheckpointingAnAcceleratorAndOneDevice) {
  StatusOr<Config> c = Load("tiny/full_single_device",
                            {"enable_activation_offloading=True", "enable_activation_checkpointing=True"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const DeviceInfo cuda = NominalDeviceInfo(*ParseDeviceSelector("cuda"));
  EXPECT_TRUE(ValidateConfig(*c, *recipe_, BuiltinRegistry(), &cuda).empty());
  const DeviceInfo cpu = NominalDeviceInfo(*ParseDeviceSelector("cpu"));
  std::vector<std::string> on_cpu;
  std::vector<Problem> cpu_problems = ValidateConfig(*c, *recipe_, BuiltinRegistry(), &cpu);
  for (const Problem& p : cpu_problems) on_cpu.push_back(p.message);
  EXPECT_EQ(on_cpu, std::vector<std::string>{
                        "activation offloading moves activations from an accelerator's memory to page-locked host "
                        "memory (cuda, xpu); on cpu they are in host memory already; use "
                        "enable_activation_offloading=False"});
  EXPECT_EQ(RepairOf(cpu_problems), std::vector<std::string>{"enable_activation_offloading=False"});

  StatusOr<Config> alone = Load("tiny/full_single_device", {"enable_activation_offloading=True",
                                                            "enable_activation_checkpointing=False"});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(Problems(*alone), std::vector<std::string>{
                                  "override 'enable_activation_offloading=True': enable_activation_offloading: "
                                  "activation offloading needs enable_activation_checkpointing=True"});

  StatusOr<Config> ranks = Load("tiny/full_distributed",
                                {"enable_activation_offloading=True", "enable_activation_checkpointing=True"});
  ASSERT_TRUE(ranks.ok()) << ranks.status().ToString();
  EXPECT_EQ(Problems(*ranks), std::vector<std::string>{
                                  "override 'enable_activation_offloading=True': enable_activation_offloading: "
                                  "activation offloading is implemented in the single-device recipes only; set "
                                  "enable_activation_offloading=False"});
}

// torchtune's QLoRA configs carry `fsdp: {cpu_offload: False}`, which its recipe never reads: accepted while it
// changes nothing, refused naming the real switch where it would (torchtune ignores it silently).
TEST_F(SchemaTest, TorchtunesFsdpBlockIsAcceptedWhenItChangesNothing) {
  StatusOr<Config> ok = Load("tiny/lora_distributed", {"fsdp.cpu_offload=False"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(Problems(*ok).empty());
  StatusOr<Config> both = Load("tiny/lora_distributed", {"fsdp.cpu_offload=True", "fsdp_cpu_offload=True"});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_TRUE(Problems(*both).empty());
  StatusOr<Config> c = Load("tiny/lora_distributed", {"fsdp.cpu_offload=True", "fsdp.mixed_precision=bf16"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(Problems(*c),
            (std::vector<std::string>{
                "override 'fsdp.cpu_offload=True': fsdp.cpu_offload: fsdp.cpu_offload is not read (torchtune's recipe "
                "ignores it too); set fsdp_cpu_offload=True to keep the shards and their optimizer state in CPU memory",
                "override 'fsdp.mixed_precision=bf16': fsdp.mixed_precision: unknown FSDP option; the recipe's FSDP "
                "settings are fsdp_cpu_offload and fsdp_reshard_after_forward"}));
}

// torchtune's full_finetune_distributed reads ac_mode and ac_option (dev/8B_full_experimental): selective
// checkpointing of every ac_option-th layer, set when enable_activation_checkpointing is off. Both on, or
// selective without an option, is refused with its fix; the LoRA recipe, which torchtune does not give them,
// does not take them.
TEST_F(SchemaTest, SelectiveActivationCheckpointingIsReadWhereTorchtuneReadsIt) {
  StatusOr<Config> selective = Load("tiny/full_distributed", {"ac_mode=selective", "ac_option=2"});
  ASSERT_TRUE(selective.ok()) << selective.status().ToString();
  EXPECT_TRUE(Problems(*selective).empty());
  StatusOr<TrainingSettings> s = ReadTrainingSettings(*selective, TrainKind::kFull);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->activation_checkpointing);
  EXPECT_EQ(s->activation_checkpointing_every, 2);
  StatusOr<Config> every = Load("tiny/full_distributed", {"ac_mode=selective", "ac_option=0"});
  ASSERT_TRUE(every.ok()) << every.status().ToString();
  EXPECT_EQ(ReadTrainingSettings(*every, TrainKind::kFull)->activation_checkpointing_every, 1);
  StatusOr<Config> off = Load("tiny/full_distributed", {});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(ReadTrainingSettings(*off, TrainKind::kFull)->activation_checkpointing);

  StatusOr<Config> both = Load("tiny/full_distributed", {"ac_mode=full", "enable_activation_checkpointing=True"});
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_EQ(Problems(*both), std::vector<std::string>{
                                 "override 'ac_mode=full': ac_mode: ac_mode=full beside "
                                 "enable_activation_checkpointing=True: torchtune's recipe then checkpoints no layer "
                                 "at all; set enable_activation_checkpointing=False to checkpoint by ac_mode, or "
                                 "ac_mode=null to recompute every layer"});
  StatusOr<Config> no_option = Load("tiny/full_distributed", {"ac_mode=selective"});
  ASSERT_TRUE(no_option.ok()) << no_option.status().ToString();
  EXPECT_EQ(Problems(*no_option), std::vector<std::string>{
                                      "override 'ac_mode=selective': ac_option: ac_mode=selective needs ac_option, "
                                      "how often a layer is recomputed (2: every second layer); set ac_option, or "
                                      "ac_mode=full"});
  StatusOr<Config> op = Load("tiny/full_distributed", {"ac_mode=op"});
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_EQ(Problems(*op).size(), 1u);
  StatusOr<Config> lora = Load("tiny/lora_distributed", {"ac_mode=full"});
  EXPECT_TRUE(!lora.ok() || !Problems(*lora).empty());
}

TEST(BuiltinFileTest, AProblemInAFileNamesItsLineAndColumn) {
  test::ScratchDir dir("builtin_test");
  StatusOr<std::string> text = ReadFile(BuiltinConfigPath("tiny/lora_single_device"));
  ASSERT_TRUE(text.ok());
  std::string edited = *text;
  size_t at = edited.find("lora_rank: 8");
  ASSERT_NE(at, std::string::npos);
  edited.replace(at, 12, "lora_rank: 0");
  std::string path = dir.path() + "/lora.yaml";
  ASSERT_TRUE(WriteFileAtomically(path, edited).ok());
  int line = 1 + static_cast<int>(std::count(edited.begin(), edited.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  const Registry& registry = BuiltinRegistry();
  LocatedConfig located{path, path, false, registry.FindRecipe("lora_finetune_single_device")};
  StatusOr<Config> c = LoadResolvedConfig(located, {}, located.recipe, &registry);
  ASSERT_TRUE(c.ok());
  std::vector<Problem> problems = ValidateConfig(*c, *located.recipe, registry, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].ToString(),
            path + ":" + std::to_string(line) + ":14: model.lora_rank: '0' is out of range: must be at least 1");
}

TEST(BuiltinFileTest, DidYouMeanSuggestsOnlyComponentsThatCanBeBuilt) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<Config> c = Config::FromString(
      "output_dir: /tmp/x\nmodel:\n  _component_: torchtune.models.gemma.qlora_gemma_2bb\n", "c.yaml");
  ASSERT_TRUE(c.ok());
  for (const Problem& p : ValidateConfig(*c, *registry.FindRecipe("full_finetune_single_device"), registry, nullptr)) {
    if (p.key != "model._component_") continue;
    EXPECT_NE(p.message.find("did you mean 'torchtune.models.gemma.qlora_gemma_2b'"), std::string::npos) << p.message;
  }
}


// configs/MANIFEST and the files under configs/ name the same configs: a YAML file nobody lists would never be
// run or reported, and a listed name without its file fails every command that reaches it.
TEST(BuiltinManifestTest, ListsExactlyTheYamlFilesUnderConfigs) {
  const std::string dir = std::string(TM_SOURCE_DIR) + "/configs";
  StatusOr<std::vector<std::string>> files = ListRegularFiles(dir, ".yaml", nullptr);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  std::set<std::string> on_disk;
  for (const std::string& f : *files) {
    ASSERT_EQ(f.rfind(dir + "/", 0), 0u) << f;
    on_disk.insert(f.substr(dir.size() + 1, f.size() - dir.size() - 1 - 5));
  }
  std::set<std::string> listed;
  for (const ManifestEntry& e : BuiltinConfigManifest()) listed.insert(e.name);
  for (const std::string& name : on_disk) {
    EXPECT_TRUE(listed.count(name)) << "configs/" << name << ".yaml is not listed in configs/MANIFEST: add a line "
                                    << "'" << name << " <recipe> <source>' or remove the file";
  }
  for (const std::string& name : listed) {
    EXPECT_TRUE(on_disk.count(name)) << "configs/MANIFEST lists '" << name << "' but configs/" << name
                                     << ".yaml is missing";
  }
}

// Every listed config is a config of its recipe in the registry, in manifest order; a tiny config names a family
// with a tiny preset and builds that preset's model.
TEST(BuiltinManifestTest, RecipesTakeTheirConfigsFromIt) {
  const Registry& registry = BuiltinRegistry();
  size_t total = 0;
  for (const RecipeSpec& r : registry.recipes()) {
    EXPECT_EQ(r.configs, ManifestConfigsOf(BuiltinConfigManifest(), r.name)) << r.name;
    total += r.configs.size();
  }
  EXPECT_EQ(total, BuiltinConfigManifest().size());
  // Every tiny preset has a full and a LoRA single-device config, so every family's operations are cells.
  std::set<std::pair<std::string, std::string>> tiny_cells;  // recipe, family
  for (const std::string recipe : {"full_finetune_single_device", "lora_finetune_single_device"}) {
    for (const std::string& name : ManifestConfigsOf(BuiltinConfigManifest(), recipe)) {
      StatusOr<LocatedConfig> located = LocateConfig(name, registry);
      ASSERT_TRUE(located.ok()) << located.status().ToString();
      StatusOr<Config> c = LoadResolvedConfig(*located, {});
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      const ComponentSpec* model = registry.FindComponent(*c->GetString("model._component_"));
      const auto* built = model ? dynamic_cast<const ModelComponent*>(model->impl.get()) : nullptr;
      if (built != nullptr && built->preset().tiny) tiny_cells.insert({recipe, built->preset().family});
    }
  }
  for (const models::ModelPreset& p : models::ModelPresets()) {
    if (!p.tiny) continue;
    for (const std::string recipe : {"full_finetune_single_device", "lora_finetune_single_device"}) {
      EXPECT_TRUE(tiny_cells.count({recipe, p.family}))
          << "no " << recipe << " config builds the tiny " << p.family << " preset; add 'tiny/" << p.family << "_"
          << recipe.substr(0, 4) << "_single_device " << recipe << " tiny:" << p.family
          << "' to configs/MANIFEST and write it with scripts/make_builtin_configs.py";
    }
  }
  for (const ManifestEntry& e : BuiltinConfigManifest()) {
    if (e.source != ManifestEntry::Source::kTiny) continue;
    // A text family's tiny preset, or a vision family's (models/vision_model.h).
    const models::ModelPreset* preset = models::FindModelPreset("tiny_" + e.tiny_family);
    const models::VisionPreset* vision = models::FindVisionPreset("tiny_" + e.tiny_family);
    ASSERT_TRUE(preset != nullptr || vision != nullptr) << e.name << ": no tiny preset for family '" << e.tiny_family
                                                        << "'";
    EXPECT_TRUE(preset != nullptr ? preset->tiny : vision->tiny) << e.name;
    StatusOr<LocatedConfig> located = LocateConfig(e.name, registry);
    ASSERT_TRUE(located.ok()) << located.status().ToString();
    StatusOr<Config> c = LoadResolvedConfig(*located, {});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    StatusOr<std::string> model = c->GetString("model._component_");
    ASSERT_TRUE(model.ok()) << e.name;
    // Distillation trains a LoRA student.
    const bool lora = e.recipe.rfind("lora_", 0) == 0 || e.recipe.rfind("knowledge_distillation_", 0) == 0 ||
                      e.recipe.rfind("qat_lora_", 0) == 0;
    EXPECT_EQ(*model, "tune_matrix.models." + std::string(lora ? "lora_" : "") + "tiny_" + e.tiny_family) << e.name;
  }
}

}  // namespace
}  // namespace tmx::recipes
