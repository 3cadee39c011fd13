#include "harness/registry.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tmx {
namespace {

Registry MakeRegistry() {
  Registry r;
  ComponentSpec adamw;
  adamw.name = "tune_matrix.optim.AdamW";
  adamw.aliases = {"torch.optim.AdamW"};
  adamw.kind = "optimizer";
  adamw.params = {{"lr", FieldType::kFloat, "1e-3", "learning rate"},
                  {"weight_decay", FieldType::kFloat, "0.01", "decoupled weight decay"}};
  EXPECT_TRUE(r.AddComponent(adamw).ok());
  ComponentSpec paged;
  paged.name = "bitsandbytes.optim.PagedAdamW8bit";
  paged.kind = "optimizer";
  paged.unsupported_reason = "bitsandbytes is a Python CUDA library";
  paged.device_check = [](const YAML::Node&, const Config&, const DeviceInfo& d) -> DeviceRefusal {
    if (d.type == "cuda") return {};
    return {"paged optimizers need cuda", {"optimizer._component_=torch.optim.AdamW"}};
  };
  EXPECT_TRUE(r.AddComponent(paged).ok());
  ComponentSpec model;
  model.name = "tune_matrix.models.tiny";
  model.kind = "model";
  EXPECT_TRUE(r.AddComponent(model).ok());

  RecipeSpec recipe;
  recipe.name = "lora_finetune_single_device";
  recipe.configs = {"tiny/lora"};
  FieldSpec dtype{"dtype", FieldType::kString, "fp32", "training dtype", false, false, {"fp32", "bf16"}};
  dtype.device_check = [](const YAML::Node& v, const Config&, const DeviceInfo& d) -> DeviceRefusal {
    if (v.Scalar() != "bf16" || d.bf16_matmul_backward) return {};
    return {"bf16 does not work on " + d.id, {}};
  };
  recipe.fields = {
      {"batch_size", FieldType::kInt, "1", "samples per step"},
      {"seed", FieldType::kInt, "", "random seed", /*nullable=*/true},
      {"optimizer", FieldType::kComponent, "", "optimizer", false, true, {}, "optimizer"},
      {"model", FieldType::kComponent, "", "model", false, false, {}, "model"},
      {"device", FieldType::kString, "cuda", "device"},
      dtype,
  };
  EXPECT_TRUE(r.AddRecipe(recipe).ok());
  return r;
}

Config Load(const std::string& text) {
  StatusOr<Config> c = Config::FromString(text, "c.yaml");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

std::vector<std::string> Messages(const std::vector<Problem>& problems) {
  std::vector<std::string> out;
  for (const Problem& p : problems) out.push_back(p.ToString());
  return out;
}

TEST(RegistryTest, DuplicatesAreRejected) {
  Registry r = MakeRegistry();
  ComponentSpec again;
  again.name = "x";
  again.aliases = {"torch.optim.AdamW"};
  Status s = r.AddComponent(again);
  EXPECT_EQ(s.message(), "component 'torch.optim.AdamW' is registered twice");
  EXPECT_EQ(r.FindComponent("torch.optim.AdamW")->name, "tune_matrix.optim.AdamW");
  EXPECT_EQ(r.RecipeForConfig("tiny/lora")->name, "lora_finetune_single_device");
}

// An estimate that throws (a bug in it) is reported, never propagated: `tune-matrix plan` and `run` would die on it.
TEST(RegistryTest, AnEstimateThatThrowsBecomesAnInternalStatus) {
  Registry r = MakeRegistry();
  RecipeSpec recipe = *r.FindRecipe("lora_finetune_single_device");
  DeviceInfo cpu;
  cpu.id = cpu.type = "cpu";
  const Config config = Load("batch_size: 2\n");
  StatusOr<CellEstimate> none = recipe.Estimate(config, r, cpu);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->peak_memory_bytes, 0);
  recipe.estimate = [](const Config& c, const Registry&, const DeviceInfo&) -> StatusOr<CellEstimate> {
    CellEstimate e;
    e.peak_memory_bytes = *c.GetInt("batch_size") << 30;
    return e;
  };
  EXPECT_EQ(recipe.Estimate(config, r, cpu)->peak_memory_bytes, int64_t{2} << 30);
  recipe.estimate = [](const Config&, const Registry&, const DeviceInfo&) -> StatusOr<CellEstimate> {
    throw std::runtime_error("shape '[0, 64]' is invalid");
  };
  StatusOr<CellEstimate> thrown = recipe.Estimate(config, r, cpu);
  ASSERT_FALSE(thrown.ok());
  EXPECT_EQ(thrown.status().code(), Status::Code::kInternal);
  EXPECT_EQ(thrown.status().message(),
            "recipe lora_finetune_single_device could not estimate this config on cpu (shape '[0, 64]' is invalid); a "
            "bug of the estimate, not of the config: the cell runs unpredicted");
}

TEST(RegistryTest, ValidConfigHasNoProblems) {
  Registry r = MakeRegistry();
  Config c = Load(
      "batch_size: 2\nseed: null\n_private: 1\nmetadata: {supported_devices: [cpu]}\n"
      "optimizer:\n  _component_: torch.optim.AdamW\n  lr: 3e-4\n");
  EXPECT_TRUE(ValidateConfig(c, r.recipes()[0], r, nullptr).empty());
}

TEST(RegistryTest, ListsEveryProblemWithPositionAndHint) {
  Registry r = MakeRegistry();
  Config c = Load(
      "batch_sise: 2\n"
      "seed: abc\n"
      "optimizer:\n"
      "  _component_: torch.optim.AdamW\n"
      "  lr: fast\n"
      "  weight_decy: 0.1\n"
      "model:\n"
      "  _component_: torch.optim.AdamW\n"
      "dtype: bf61\n");
  EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
            (std::vector<std::string>{
                "c.yaml:1:1: batch_sise: unknown key for recipe 'lora_finetune_single_device'; did you mean 'batch_size'?",
                "c.yaml:2:7: seed: expected an integer, got 'abc'",
                "c.yaml:6:3: optimizer.weight_decy: unknown key for component 'tune_matrix.optim.AdamW'; did you mean "
                "'weight_decay'?",
                "c.yaml:5:7: optimizer.lr: expected a number, got 'fast'",
                "c.yaml:8:16: model._component_: 'torch.optim.AdamW' is a optimizer component; model needs a model",
                "c.yaml:9:8: dtype: 'bf61' is not one of fp32, bf16; did you mean 'bf16'?",
            }));
}

TEST(RegistryTest, ANumberMustBeFinite) {
  // YAML spells infinity and not-a-number .inf and .nan; an optimizer stepping with either trains nonsense.
  Registry r = MakeRegistry();
  for (const std::string& bad : {".inf", "-.inf", ".nan", ".NaN"}) {
    Config c = Load("optimizer:\n  _component_: torch.optim.AdamW\n  lr: " + bad + "\n");
    EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
              (std::vector<std::string>{"c.yaml:3:7: optimizer.lr: '" + bad + "' is not a finite number (learning rate)"}));
  }
  EXPECT_TRUE(ValidateConfig(Load("optimizer:\n  _component_: torch.optim.AdamW\n  lr: 1e308\n"), r.recipes()[0], r,
                             nullptr)
                  .empty());
}

TEST(RegistryTest, MissingRequiredAndUnknownComponent) {
  Registry r = MakeRegistry();
  Config c = Load("model:\n  _component_: tune_matrix.models.tiyn\n");
  EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
            (std::vector<std::string>{
                "c.yaml:1:1: optimizer: missing required key (optimizer)",
                "c.yaml:2:16: model._component_: unknown component 'tune_matrix.models.tiyn'; did you mean "
                "'tune_matrix.models.tiny'? (`tune ls --components model` lists the 1 model component)",
            }));
  // A typo in the module still gets the nearest names; a family none of whose components is here is said to be
  // one, never answered with another model of a known family (issue 56: an 11B vision model got a 1B text one).
  c = Load("model:\n  _component_: tune_matrix.modles.tiny\noptimizer:\n  _component_: torch.optim.AdamW\n");
  EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
            (std::vector<std::string>{
                "c.yaml:2:16: model._component_: unknown component 'tune_matrix.modles.tiny'; did you mean "
                "'tune_matrix.models.tiny'? (`tune ls --components model` lists the 1 model component)",
            }));
  c = Load("model:\n  _component_: tune_matrix.models.tiny_vision.tiny_vision_11b\noptimizer:\n  _component_: "
           "torch.optim.AdamW\n");
  EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
            (std::vector<std::string>{
                "c.yaml:2:16: model._component_: unknown component 'tune_matrix.models.tiny_vision.tiny_vision_11b'; "
                "tune-matrix implements nothing of tune_matrix.models.tiny_vision yet (`tune ls --components model` "
                "lists the 1 model component)",
            }));
}

// A section made of keys alone (an override of profiler.enabled in a config without the section) names the
// _component_ it lacks and one to use.
TEST(RegistryTest, AComponentWithoutItsNameSaysWhichToAdd) {
  Registry r = MakeRegistry();
  Config c = Load("optimizer:\n  lr: 0.1\nmodel:\n  _component_: tune_matrix.models.tiny\n");
  EXPECT_EQ(Messages(ValidateConfig(c, r.recipes()[0], r, nullptr)),
            (std::vector<std::string>{"c.yaml:2:3: optimizer: optimizer has no _component_ (expected a component (a "
                                      "mapping with _component_)); fix: add optimizer._component_=torch.optim.AdamW"}));
}

TEST(RegistryTest, DeviceRequirementsAreChecked) {
  Registry r = MakeRegistry();
  Config c = Load("optimizer:\n  _component_: bitsandbytes.optim.PagedAdamW8bit\ndtype: bf16\n");
  DeviceInfo cpu;
  cpu.id = "cpu";
  cpu.type = "cpu";
  cpu.bf16_matmul_backward = false;
  std::vector<Problem> problems = ValidateConfig(c, r.recipes()[0], r, &cpu);
  EXPECT_EQ(Messages(problems),
            (std::vector<std::string>{
                "c.yaml:2:16: optimizer._component_: paged optimizers need cuda; use "
                "optimizer._component_=torch.optim.AdamW",
                "c.yaml:2:16: optimizer._component_: component 'bitsandbytes.optim.PagedAdamW8bit' is recognised but "
                "not supported: bitsandbytes is a Python CUDA library",
                "c.yaml:3:8: dtype: bf16 does not work on cpu",
            }));
  EXPECT_TRUE(problems[0].device_related);
  EXPECT_FALSE(problems[1].device_related);
  // The refusal's repair travels with its problem; a problem without one leaves the config unrepaired.
  EXPECT_EQ(problems[0].repair, std::vector<std::string>{"optimizer._component_=torch.optim.AdamW"});
  EXPECT_TRUE(problems[2].repair.empty());
  EXPECT_TRUE(RepairOf(problems).empty());
  EXPECT_EQ(RepairOf({problems[0], problems[0]}), problems[0].repair);  // each override once
}

TEST(RegistryTest, RepairOfJoinsEveryProblemsOverrides) {
  Problem paged{"c.yaml:2:3", "optimizer._component_", "paged", true, {"optimizer._component_=torch.optim.AdamW",
                                                                     "~optimizer.optim_bits"}};
  Problem offload{"c.yaml:9:1", "enable_activation_offloading", "offload", true,
                  {"enable_activation_offloading=False"}};
  EXPECT_EQ(RepairOf({paged, offload}),
            (std::vector<std::string>{"optimizer._component_=torch.optim.AdamW", "~optimizer.optim_bits",
                                      "enable_activation_offloading=False"}));
  EXPECT_TRUE(RepairOf({}).empty());
}

TEST(RegistryTest, AnOutputDirInsideASystemFolderIsRefused) {
  // The recipes' own check listed top-level folders only: output_dir=/usr/bin validated.
  Registry r = MakeRegistry();
  RecipeSpec recipe = r.recipes().front();
  recipe.fields.push_back({"output_dir", FieldType::kString, "", "where the run writes"});
  Config c = Load("output_dir: /usr/bin\noptimizer:\n  _component_: torch.optim.AdamW\n");
  std::vector<Problem> problems = ValidateConfig(c, recipe, r, nullptr);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, "output_dir");
  EXPECT_EQ(problems[0].where, "c.yaml:1:13");
  EXPECT_EQ(problems[0].message, "'/usr/bin' is inside the system folder /usr, and a run writes its checkpoints, "
                                 "metrics and summary.json straight into output_dir; use a folder of its own, e.g. "
                                 "output_dir=/tmp/torchtune/my_run");
  Config fine = Load("output_dir: /tmp/runs/a\noptimizer:\n  _component_: torch.optim.AdamW\n");
  EXPECT_TRUE(ValidateConfig(fine, recipe, r, nullptr).empty());
}

TEST(RegistryTest, ValidateForDeviceNamesAvailableDevicesAndOverride) {
  Registry r = MakeRegistry();
  Config c = Load("optimizer:\n  _component_: torch.optim.AdamW\ndevice: cuda\n");
  DeviceInfo cpu;
  cpu.id = "cpu";
  cpu.type = "cpu";
  DeviceCheckResult result = ValidateForDevice(c, r.recipes()[0], r, LookupAmong({cpu}));
  // The fields are judged for cuda by its traits; the absence is said apart from them.
  EXPECT_TRUE(result.problems.empty());
  ASSERT_TRUE(result.absent.has_value());
  EXPECT_EQ(result.absent->ToString(),
            "c.yaml:3:9: device: device 'cuda' is not available on this machine (available: cpu); override it with "
            "device=cpu or device=auto");
  EXPECT_FALSE(result.device_available);
  EXPECT_EQ(result.device.id, "cuda");
  EXPECT_FALSE(result.device.probed);

  Config bad = Load("optimizer:\n  _component_: torch.optim.AdamW\ndevice: gpu\n");
  DeviceCheckResult unknown = ValidateForDevice(bad, r.recipes()[0], r, LookupAmong({cpu}));
  ASSERT_EQ(unknown.problems.size(), 1u);
  EXPECT_EQ(unknown.problems[0].ToString(),
            "c.yaml:3:9: device: unknown device 'gpu'; did you mean 'cuda'? (accepted: cpu, cuda, cuda:N, xpu, xpu:N, mps, meta, auto)");

  ASSERT_TRUE(c.ApplyOverrides({"device=cpu"}).ok());
  DeviceCheckResult ok = ValidateForDevice(c, r.recipes()[0], r, LookupAmong({cpu}));
  EXPECT_TRUE(ok.problems.empty());
  EXPECT_TRUE(ok.device_available);
}

}  // namespace
}  // namespace tmx
