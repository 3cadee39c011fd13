#include "recipes/models/lora.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>

#include "recipes/models/llama.h"

namespace tmx::models {
namespace {

const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsLoraName(const std::string& name) { return EndsWith(name, ".lora_a.weight") || EndsWith(name, ".lora_b.weight"); }

// Copies tensors into the same-named parameters of `dst`; every parameter of `dst` must be covered.
void LoadByName(torch::nn::Module& dst, const std::vector<std::pair<std::string, torch::Tensor>>& src) {
  std::map<std::string, torch::Tensor> by_name(src.begin(), src.end());
  torch::NoGradGuard no_grad;
  for (auto& item : dst.named_parameters()) {
    auto it = by_name.find(item.key());
    ASSERT_NE(it, by_name.end()) << "missing " << item.key();
    item.value().copy_(it->second);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

// Trainable parameters LoRA adds to a Llama model, from its shape: rank * (in + out) per adapted linear.
int64_t ExpectedLoraParameters(const LlamaArgs& a, const LoraArgs& lora) {
  const int64_t head_dim = a.embed_dim / a.num_heads;
  const std::map<std::string, std::pair<int64_t, int64_t>> attn = {
      {"q_proj", {a.embed_dim, a.num_heads * head_dim}},
      {"k_proj", {a.embed_dim, a.num_kv_heads * head_dim}},
      {"v_proj", {a.embed_dim, a.num_kv_heads * head_dim}},
      {"output_proj", {a.num_heads * head_dim, a.embed_dim}}};
  int64_t per_layer = 0;
  for (const std::string& m : lora.attn_modules) per_layer += lora.rank * (attn.at(m).first + attn.at(m).second);
  if (lora.apply_to_mlp) per_layer += 3 * lora.rank * (a.embed_dim + a.intermediate_dim);
  int64_t total = a.num_layers * per_layer;
  if (lora.apply_to_output) total += lora.rank * (a.embed_dim + a.vocab_size);
  return total;
}

TEST(LoraTest, ValidateLoraArgsNamesTheBadValue) {
  LoraArgs lora;
  lora.attn_modules = {"q_proj", "query"};
  Status s = ValidateLoraArgs(lora);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "lora.attn_modules: unknown module 'query'; allowed: q_proj, k_proj, v_proj, output_proj");

  lora.attn_modules = {"q_prj"};
  EXPECT_EQ(ValidateLoraArgs(lora).message(),
            "lora.attn_modules: unknown module 'q_prj' (did you mean 'q_proj'?); allowed: q_proj, k_proj, v_proj, "
            "output_proj");
  lora.attn_modules = {"o_proj"};
  EXPECT_EQ(ValidateLoraArgs(lora).message(),
            "lora.attn_modules: unknown module 'o_proj' (did you mean 'output_proj'?); allowed: q_proj, k_proj, "
            "v_proj, output_proj");
  lora.attn_modules = {"v_proj", "v_proj"};
  EXPECT_EQ(ValidateLoraArgs(lora).message(), "lora.attn_modules: 'v_proj' is listed twice; list each module once");

  lora.attn_modules = {"q_proj", "v_proj"};
  EXPECT_TRUE(ValidateLoraArgs(lora).ok());
  lora.rank = 0;
  EXPECT_EQ(ValidateLoraArgs(lora).message(), "lora.rank: must be a positive integer, got 0");
  lora.rank = 8;
  lora.alpha = -1;
  EXPECT_EQ(ValidateLoraArgs(lora).message(), "lora.alpha: must be a positive number, got -1");
  lora.alpha = 16;
  lora.dropout = 1;
  EXPECT_EQ(ValidateLoraArgs(lora).message(), "lora.dropout: must be in [0, 1), got 1");
  lora.dropout = 0.05;
  EXPECT_TRUE(ValidateLoraArgs(lora).ok());

  LoraArgs nothing;
  EXPECT_EQ(ValidateLoraArgs(nothing).message(),
            "lora: no layer is adapted; set attn_modules (a subset of q_proj, k_proj, v_proj, output_proj), "
            "apply_to_mlp or apply_to_output");

  LoraArgs output;
  output.apply_to_output = true;
  EXPECT_TRUE(ValidateLoraArgs(output).ok());
  EXPECT_TRUE(ValidateLoraArgs(output, Llama3_1_8BArgs()).ok());
  Status tied = ValidateLoraArgs(output, Llama3_2_1BArgs());
  EXPECT_EQ(tied.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(tied.message().find("lora.apply_to_output"), std::string::npos) << tied.message();
  EXPECT_EQ(MakeLlama(Llama3_2_1BArgs(), output, kMeta).status().code(), Status::Code::kInvalidArgument);
}

TEST(LoraTest, TrainableParameterCountsOnMeta) {
  struct Case {
    const char* name;
    LlamaArgs args;
    LoraArgs lora;
    int64_t base;
  };
  LoraArgs qv_out_mlp64{{"q_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, /*rank=*/64, 128};
  LoraArgs qv8{{"q_proj", "v_proj"}, false, false, 8, 16};
  LoraArgs all16{{"q_proj", "k_proj", "v_proj", "output_proj"}, true, /*apply_to_output=*/true, 16, 32};
  const Case cases[] = {
      {"llama3_2_1b q,v,output_proj + mlp, rank 64", Llama3_2_1BArgs(), qv_out_mlp64, 1'235'814'400},
      {"llama3_2_3b q,v rank 8", Llama3_2_3BArgs(), qv8, 3'212'749'824},
      {"llama3_1_8b everything rank 16", Llama3_1_8BArgs(), all16, 8'030'261'248},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Llama model(c.args, c.lora, kMeta);
    const int64_t lora = ExpectedLoraParameters(c.args, c.lora);
    EXPECT_EQ(CountParameters(*model), c.base + lora);
    FreezeBaseParameters(*model);
    EXPECT_EQ(CountParameters(*model, /*trainable_only=*/true), lora);
    int64_t adapter = 0;
    for (const auto& [name, p] : AdapterParameters(*model)) adapter += p.numel();
    EXPECT_EQ(adapter, lora);
  }
  // Spot-check the formula for the first case: per layer 64 * (4096 + 2560 + 4096 + 3 * 10240), 16 layers.
  EXPECT_EQ(ExpectedLoraParameters(Llama3_2_1BArgs(), qv_out_mlp64), 16 * 64 * (4096 + 2560 + 4096 + 3 * 10240));
}

TEST(LoraTest, AdapterShapesNamesAndInit) {
  torch::manual_seed(0);
  Linear linear(32, 48, c10::TensorOptions(), LoraAdapterOptions{4, 8, 0.0});
  EXPECT_TRUE(linear->has_adapter());
  EXPECT_DOUBLE_EQ(linear->adapter_scaling(), 2.0);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : linear->named_parameters()) shapes[item.key()] = item.value().sizes().vec();
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"weight", {48, 32}}, {"lora_a.weight", {4, 32}}, {"lora_b.weight", {48, 4}}};
  EXPECT_EQ(shapes, expected);
  EXPECT_EQ(linear->lora_b().abs().sum().item<double>(), 0.0);
  // kaiming_uniform(a=sqrt(5)) on fan_in 32: U(-1/sqrt(32), 1/sqrt(32)).
  EXPECT_LE(linear->lora_a().abs().max().item<double>(), 1 / std::sqrt(32.0));
  EXPECT_GT(linear->lora_a().abs().max().item<double>(), 0.5 / std::sqrt(32.0));

  Linear plain(32, 48);
  EXPECT_FALSE(plain->has_adapter());
  EXPECT_EQ(plain->named_parameters().size(), 1u);
  EXPECT_THROW(plain->lora_a(), c10::Error);
}

TEST(LoraTest, AtInitTheAdaptedModelEqualsTheBase) {
  torch::manual_seed(1);
  const LlamaArgs args = LlamaTinyArgs();
  LoraArgs lora{{"q_proj", "k_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, 4, 8};
  Llama adapted(args, lora);
  Llama base(args);
  std::vector<std::pair<std::string, torch::Tensor>> base_weights;
  for (const auto& [name, tensor] : NamedParameters(*adapted)) {
    if (!IsLoraName(name)) base_weights.emplace_back(name, tensor);
  }
  LoadByName(*base, base_weights);
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 10}, torch::kLong);
  EXPECT_TRUE(torch::equal(adapted(tokens), base(tokens)));
}

TEST(LoraTest, FreezeLeavesOnlyAdaptersTrainable) {
  torch::manual_seed(2);
  LoraArgs lora{{"q_proj", "v_proj"}, false, false, 4, 8};
  Llama model(LlamaTinyArgs(), lora);
  FreezeBaseParameters(*model);
  std::set<std::string> trainable;
  for (const auto& item : model->named_parameters()) {
    if (item.value().requires_grad()) trainable.insert(item.key());
  }
  std::set<std::string> expected;
  for (int i = 0; i < 2; ++i) {
    for (const char* proj : {"q_proj", "v_proj"}) {
      for (const char* ab : {"lora_a", "lora_b"}) {
        expected.insert("layers." + std::to_string(i) + ".attn." + proj + "." + ab + ".weight");
      }
    }
  }
  EXPECT_EQ(trainable, expected);
  std::set<std::string> adapter_names;
  for (const auto& [name, p] : AdapterParameters(*model)) adapter_names.insert(name);
  EXPECT_EQ(adapter_names, expected);

  // A training step reaches only the adapters (lora_a gets a gradient once lora_b is non-zero).
  for (const auto& [name, p] : AdapterParameters(*model)) {
    if (EndsWith(name, "lora_b.weight")) {
      torch::NoGradGuard no_grad;
      p.normal_(0, 0.1);
    }
  }
  torch::Tensor tokens = torch::randint(0, 512, {2, 8}, torch::kLong);
  model(tokens).logsumexp(-1).mean().backward();
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.value().grad().defined(), expected.count(item.key()) > 0) << item.key();
  }
}

TEST(LoraTest, MergedStateDictReproducesTheAdaptedModel) {
  torch::manual_seed(3);
  LlamaArgs args = LlamaTinyArgs();
  args.tie_word_embeddings = false;
  LoraArgs lora{{"q_proj", "k_proj", "v_proj", "output_proj"}, true, /*apply_to_output=*/true, 4, 16};
  Llama adapted(args, lora);
  adapted->eval();
  for (const auto& [name, p] : AdapterParameters(*adapted)) {
    if (EndsWith(name, "lora_b.weight")) {
      torch::NoGradGuard no_grad;
      p.normal_(0, 0.05);
    }
  }
  const auto merged = MergedStateDict(*adapted);
  Llama plain(args);
  std::vector<std::string> merged_names, plain_names;
  for (const auto& [name, t] : merged) merged_names.push_back(name);
  for (const auto& [name, t] : NamedParameters(*plain)) plain_names.push_back(name);
  EXPECT_EQ(merged_names, plain_names);
  for (const auto& [name, t] : merged) EXPECT_FALSE(t.requires_grad()) << name;
  LoadByName(*plain, merged);

  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 10}, torch::kLong);
  torch::Tensor expected = adapted(tokens);
  torch::Tensor actual = plain(tokens);
  EXPECT_TRUE(torch::allclose(actual, expected, 1e-4, 1e-4)) << (actual - expected).abs().max();
  // The adapters matter: the plain model with the unmerged base weights differs.
  Llama unmerged(args);
  std::vector<std::pair<std::string, torch::Tensor>> base;
  for (const auto& [name, t] : NamedParameters(*adapted)) {
    if (!IsLoraName(name)) base.emplace_back(name, t);
  }
  LoadByName(*unmerged, base);
  EXPECT_FALSE(torch::allclose(unmerged(tokens), expected, 1e-4, 1e-4));
}

TEST(LoraTest, MergedWeightIsBasePlusScaledProduct) {
  torch::manual_seed(4);
  Linear linear(6, 5, c10::TensorOptions(), LoraAdapterOptions{2, 6, 0.0});
  {
    torch::NoGradGuard no_grad;
    linear->lora_b().normal_();
  }
  torch::Tensor expected = linear->weight() + 3.0 * torch::matmul(linear->lora_b(), linear->lora_a());
  EXPECT_TRUE(torch::allclose(linear->MergedWeight(), expected.detach(), 1e-6, 1e-6));
  torch::Tensor x = torch::randn({3, 6});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(linear(x), torch::matmul(x, expected.t()), 1e-5, 1e-5));
}

TEST(LoraTest, DropoutAppliesToTheAdapterInputInTrainingOnly) {
  torch::manual_seed(5);
  Linear linear(16, 16, c10::TensorOptions(), LoraAdapterOptions{4, 8, 0.5});
  torch::Tensor x = torch::randn({8, 16});
  torch::NoGradGuard no_grad;
  torch::Tensor base = torch::matmul(x, linear->weight().t());
  // lora_b is zero: dropout cannot show.
  linear->train();
  EXPECT_TRUE(torch::allclose(linear(x), base));
  linear->lora_b().normal_();
  linear->eval();
  torch::Tensor eval_out = linear(x);
  EXPECT_TRUE(torch::allclose(linear(x), eval_out));
  linear->train();
  EXPECT_FALSE(torch::allclose(linear(x), eval_out));
}

}  // namespace
}  // namespace tmx::models
