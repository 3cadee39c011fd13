#include "recipes/models/adapters_off.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "recipes/models/llama.h"
#include "recipes/models/lora.h"

namespace tmx::models {
namespace {

bool IsAdapterName(const std::string& name) {
  for (const char* suffix : {".lora_a.weight", ".lora_b.weight", ".magnitude"}) {
    const std::string s(suffix);
    if (name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

// A LoRA (or DoRA) model whose adapters change its output, and the plain model with its base weights.
struct Pair {
  Llama adapted{nullptr};
  Llama base{nullptr};
};

Pair MakePair(bool dora) {
  torch::manual_seed(11);
  const LlamaArgs args = LlamaTinyArgs();
  LoraArgs lora{{"q_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, 4, 8};
  lora.use_dora = dora;
  Pair p{Llama(args, lora), Llama(args)};
  torch::NoGradGuard no_grad;
  auto base_params = p.base->named_parameters();
  for (const auto& item : p.adapted->named_parameters()) {
    if (IsAdapterName(item.key())) {
      item.value().normal_(0.5, 0.1);  // lora_b (and DoRA's magnitude) away from their neutral start
    } else {
      base_params[item.key()].copy_(item.value());
    }
  }
  return p;
}

TEST(AdaptersOffTest, TheAdaptedModelRunsAsItsBaseInsideTheScopeOnly) {
  for (bool dora : {false, true}) {
    SCOPED_TRACE(dora ? "DoRA" : "LoRA");
    Pair p = MakePair(dora);
    torch::NoGradGuard no_grad;
    const torch::Tensor tokens = torch::randint(0, p.base->args().vocab_size, {2, 9}, torch::kLong);
    const torch::Tensor base = p.base(tokens), adapted = p.adapted(tokens);
    ASSERT_FALSE(torch::allclose(adapted, base, 1e-3, 1e-3));  // the adapters matter
    {
      AdaptersOff off(*p.adapted);
      EXPECT_EQ(off.count(), 2u * (3 + 3));  // 2 layers x (q_proj, v_proj, output_proj + w1, w2, w3)
      EXPECT_TRUE(torch::equal(p.adapted(tokens), base));
    }
    EXPECT_TRUE(torch::equal(p.adapted(tokens), adapted));
  }
}

TEST(AdaptersOffTest, NestedScopesAndPlainModelsAreLeftAsFound) {
  Pair p = MakePair(false);
  {
    AdaptersOff outer(*p.adapted);
    {
      AdaptersOff inner(*p.adapted);  // nothing left to turn off
      EXPECT_EQ(inner.count(), 0u);
    }
    for (const auto& m : p.adapted->modules()) {
      if (auto linear = std::dynamic_pointer_cast<LinearImpl>(m); linear && linear->has_adapter()) {
        EXPECT_FALSE(linear->adapter_enabled());
      }
    }
  }
  for (const auto& m : p.adapted->modules()) {
    if (auto linear = std::dynamic_pointer_cast<LinearImpl>(m)) EXPECT_TRUE(linear->adapter_enabled());
  }
  AdaptersOff plain(*p.base);
  EXPECT_EQ(plain.count(), 0u);
}

}  // namespace
}  // namespace tmx::models
