#include "recipes/state_values.h"

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <map>

#include "harness/config.h"
#include "recipes/builtin.h"
#include "recipes/optimizers.h"
#include "recipes/train_state.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

constexpr char kEightBit[] =
    "optimizer:\n  _component_: bitsandbytes.optim.AdamW8bit\n  lr: 0.01\n  betas: [0.9, 0.95]\n  eps: 1.0e-6\n"
    "  weight_decay: 0.1\n  amsgrad: False\n  optim_bits: 32\n  min_8bit_size: 16\n  is_paged: False\n";

// An 8-bit AdamW over one quantised weight and one small one, three steps in, saved and then damaged by
// `damage`; what resuming from it says.
Status ResumeDamaged(const std::function<void(checkpoint::LoadedSafetensors*)>& damage, std::string* path) {
  StatusOr<Config> config = Config::FromString(kEightBit, "opt.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  auto build = [&](std::vector<at::Tensor>* params) {
    torch::manual_seed(3);
    *params = {torch::randn({16, 64}).requires_grad_(), torch::randn({4}).requires_grad_()};
    StatusOr<const OptimizerComponent*> component = OptimizerOf(*config, BuiltinRegistry());
    EXPECT_TRUE(component.ok()) << component.status().ToString();
    StatusOr<OptimizerPtr> built = (*component)->Build(*config, *params);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    return built.ok() ? std::move(built).value() : nullptr;
  };
  std::vector<at::Tensor> params;
  OptimizerPtr opt = build(&params);
  if (opt == nullptr) return Status::Internal("no optimizer");
  for (int step = 0; step < 3; ++step) {
    for (at::Tensor& p : params) p.mutable_grad() = torch::randn(p.sizes());
    opt->step();
  }
  static test::ScratchDir dir("tm_state_values_test");
  const std::string epoch = dir.path() + "/epoch_0";
  ::mkdir(epoch.c_str(), 0755);
  const NamedParameters named = {{"w", params[0]}, {"b", params[1]}};
  EXPECT_TRUE(SaveTrainState(epoch, named, *opt, /*lora=*/true, Progress{1, 3, 5}).ok());
  *path = epoch + "/recipe_state.safetensors";
  StatusOr<checkpoint::LoadedSafetensors> saved = checkpoint::LoadSafetensors(*path);
  EXPECT_TRUE(saved.ok());
  damage(&*saved);
  EXPECT_TRUE(checkpoint::SaveSafetensors(*path, saved->tensors, saved->metadata).ok());
  std::vector<at::Tensor> fresh;
  OptimizerPtr resumed = build(&fresh);
  if (resumed == nullptr) return Status::Internal("no optimizer");
  return LoadTrainState(dir.path(), *config, {{"w", fresh[0]}, {"b", fresh[1]}}, *resumed, /*lora=*/true,
                        [](const std::string&) { return Status::OK(); })
      .status();
}

void Set(checkpoint::LoadedSafetensors* s, const std::string& name, int64_t index, float value) {
  for (auto& [n, t] : s->tensors) {
    if (n == name) t.flatten()[index] = value;
  }
}

TEST(RecipeStateValuesTest, AnUndamagedStateResumes) {
  std::string path;
  EXPECT_TRUE(ResumeDamaged([](checkpoint::LoadedSafetensors*) {}, &path).ok());
}

// Each resumed and trained on into a non-finite loss, naming no file.
TEST(RecipeStateValuesTest, ADamagedStateIsRefusedAtLoadNamingFileAndTensor) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<void(checkpoint::LoadedSafetensors*)> damage;
    std::string expected;  // after "<path>: "
  };
  const std::vector<Case> cases = {
      {[&](auto* s) { Set(s, "w.absmax1", 2, nan); },
       "tensor 'w.absmax1': 1 of 4 values are not finite numbers of 0 or more (the first, at index 2, is nan)"},
      {[&](auto* s) { Set(s, "w.absmax2", 0, -1.5f); },
       "tensor 'w.absmax2': 1 of 4 values are not finite numbers of 0 or more (the first, at index 0, is -1.5)"},
      {[&](auto* s) { Set(s, "b.state1", 3, inf); }, "tensor 'b.state1': 1 of 4 values are not finite"},
      {[&](auto* s) { Set(s, "adapter:b", 1, nan); }, "tensor 'adapter:b': 1 of 4 values are not finite"},
      {[&](auto* s) { s->metadata["w.step"] = "-3"; }, "metadata 'w.step' is -3, below 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    std::string path;
    Status s = ResumeDamaged(c.damage, &path);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(path + ": " + c.expected, 0), 0u) << s.message();
    EXPECT_NE(s.message().find("the recipe state is damaged; fix: resume from another epoch's checkpoint"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace tmx::recipes
