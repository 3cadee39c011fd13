#include "recipes/models/lora.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "recipes/models/llama.h"

namespace tmx::models {
namespace {

const c10::TensorOptions kMeta = c10::TensorOptions().device(torch::kMeta);

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsLoraName(const std::string& name) {
  return EndsWith(name, ".lora_a.weight") || EndsWith(name, ".lora_b.weight") || EndsWith(name, ".magnitude");
}

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

// A model without adapters holding MergedStateDict(adapted), whose names are exactly the plain model's.
Llama MergedIntoPlain(const LlamaArgs& args, const torch::nn::Module& adapted) {
  const auto merged = MergedStateDict(adapted);
  Llama plain(args);
  std::vector<std::string> merged_names, plain_names;
  for (const auto& [name, t] : merged) merged_names.push_back(name);
  for (const auto& [name, t] : NamedParameters(*plain)) plain_names.push_back(name);
  EXPECT_EQ(merged_names, plain_names);
  for (const auto& [name, t] : merged) EXPECT_FALSE(t.requires_grad()) << name;
  LoadByName(*plain, merged);
  return plain;
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
  Llama plain = MergedIntoPlain(args, *adapted);

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

// The largest |actual - expected|, for messages.
double MaxDiff(const torch::Tensor& actual, const torch::Tensor& expected) {
  return (actual.detach() - expected).abs().max().item<double>();
}

// A frozen dense base is one autograd node (LoraProduct in lora.cc): its output and the gradients of the input,
// A and B equal autograd's through the composite x W^T + b + scale (x A^T) B^T, for an input that needs its
// gradient and for one that does not (the first layer's, below a frozen embedding).
TEST(LoraTest, FrozenBaseProductHasTheCompositesValuesAndGradients) {
  torch::manual_seed(6);
  Linear linear(12, 10, c10::TensorOptions(), LoraAdapterOptions{3, 6, 0.0}, /*bias=*/true);
  FreezeBaseParameters(*linear);
  {
    torch::NoGradGuard no_grad;
    linear->lora_b().normal_();
    const_cast<torch::Tensor&>(linear->bias()).normal_();
  }
  const torch::Tensor w = linear->weight().detach();
  const torch::Tensor bias = linear->bias().detach();
  const double scale = 6.0 / 3.0;
  const torch::Tensor upstream = torch::randn({2, 4, 10});
  for (const bool input_grad : {true, false}) {
    SCOPED_TRACE(input_grad ? "input needs its gradient" : "input frozen");
    for (auto& p : linear->parameters()) p.mutable_grad() = torch::Tensor();
    const torch::Tensor x = torch::randn({2, 4, 12}).requires_grad_(input_grad);
    torch::Tensor y = linear(x);
    (y * upstream).sum().backward();
    EXPECT_EQ(y.sizes(), torch::IntArrayRef({2, 4, 10}));

    const torch::Tensor x_ref = x.detach().clone().requires_grad_(input_grad);
    const torch::Tensor a_ref = linear->lora_a().detach().clone().requires_grad_(true);
    const torch::Tensor b_ref = linear->lora_b().detach().clone().requires_grad_(true);
    torch::Tensor y_ref =
        torch::matmul(x_ref, w.t()) + bias + scale * torch::matmul(torch::matmul(x_ref, a_ref.t()), b_ref.t());
    (y_ref * upstream).sum().backward();

    EXPECT_TRUE(torch::allclose(y.detach(), y_ref.detach(), 1e-5, 1e-5)) << MaxDiff(y, y_ref);
    const torch::Tensor grad_a = linear->lora_a().grad(), grad_b = linear->lora_b().grad();
    EXPECT_TRUE(torch::allclose(grad_a, a_ref.grad(), 1e-5, 1e-5)) << MaxDiff(grad_a, a_ref.grad());
    EXPECT_TRUE(torch::allclose(grad_b, b_ref.grad(), 1e-5, 1e-5)) << MaxDiff(grad_b, b_ref.grad());
    ASSERT_EQ(x.grad().defined(), input_grad);
    if (input_grad) EXPECT_TRUE(torch::allclose(x.grad(), x_ref.grad(), 1e-5, 1e-5)) << MaxDiff(x.grad(), x_ref.grad());
    EXPECT_FALSE(linear->weight().grad().defined());
  }
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

// --- DoRA ---

// recipes/models/testdata/dora_torchtune_0_6_1.json, made by scripts/make_dora_fixtures.py from torchtune 0.6.1's
// DoRALinear in float32.
nlohmann::json DoraFixture() {
  const std::string path = std::string(TM_SOURCE_DIR) + "/recipes/models/testdata/dora_torchtune_0_6_1.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing fixture " << path << "; make it with scripts/make_dora_fixtures.py";
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

torch::Tensor FixtureTensor(const nlohmann::json& values, std::vector<int64_t> shape) {
  std::vector<float> v = values.get<std::vector<float>>();
  return torch::tensor(v, torch::kFloat).reshape(shape);
}

LoraAdapterOptions Dora(int64_t rank, double alpha, double dropout = 0.0) { return {rank, alpha, dropout, true}; }

TEST(DoraTest, ForwardAndGradientsEqualTorchtuneDoRALinear) {
  const nlohmann::json fixture = DoraFixture();
  ASSERT_TRUE(fixture.contains("cases")) << "unreadable fixture";
  ASSERT_EQ(fixture["cases"].size(), 3u);  // no bias, bias, and QDoRA (an NF4 base)
  constexpr double kTol = 1e-5;
  for (const nlohmann::json& c : fixture["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const int64_t in = c["in_dim"], out = c["out_dim"], rank = c["rank"];
    const bool use_bias = c["use_bias"], quantize_base = c["quantize_base"];
    Linear linear(in, out, c10::TensorOptions(), Dora(rank, c["alpha"].get<double>()), use_bias, quantize_base);
    ASSERT_EQ(linear->quantized(), quantize_base);

    std::set<std::string> names, adapters;
    for (const auto& item : linear->named_parameters()) names.insert(item.key());
    for (const auto& [n, p] : AdapterParameters(*linear)) adapters.insert(n);
    EXPECT_EQ(names, c["state_dict_keys"].get<std::set<std::string>>());
    EXPECT_EQ(adapters, c["adapter_params"].get<std::set<std::string>>());

    {
      torch::NoGradGuard no_grad;
      // QDoRA: the weight before quantisation, quantised here as torchtune's to_nf4 does (nf4_test.cc).
      ASSERT_TRUE(linear->SetBaseWeight(FixtureTensor(c["weight"], {out, in}), "weight").ok());
      if (use_bias) linear->bias().copy_(FixtureTensor(c["bias"], {out}));
      linear->lora_a().copy_(FixtureTensor(c["lora_a"], {rank, in}));
      linear->lora_b().copy_(FixtureTensor(c["lora_b"], {out, rank}));
    }
    linear->InitializeDoraMagnitude();
    const torch::Tensor magnitude_init = FixtureTensor(c["magnitude_init"], {out});
    EXPECT_LE(MaxDiff(linear->magnitude(), magnitude_init), kTol);
    {
      torch::NoGradGuard no_grad;
      linear->magnitude().copy_(FixtureTensor(c["magnitude"], {out}));
    }
    // The fixture moved the magnitude off its initial value, so the forward's magnitude / norm is not 1.
    EXPECT_GT(MaxDiff(linear->magnitude(), magnitude_init), 1e-3);
    for (auto& p : linear->parameters()) {
      if (!p.is_meta()) p.requires_grad_(true);
    }

    std::vector<int64_t> x_shape = c["input_shape"].get<std::vector<int64_t>>();
    std::vector<int64_t> y_shape = x_shape;
    y_shape.back() = out;
    torch::Tensor x = FixtureTensor(c["input"], x_shape).requires_grad_(true);
    torch::Tensor y = linear(x);
    EXPECT_LE(MaxDiff(y, FixtureTensor(c["output"], y_shape)), kTol);
    (y * FixtureTensor(c["grad_output"], y_shape)).sum().backward();

    const nlohmann::json& grad = c["grad"];
    struct Grad {
      const char* key;
      torch::Tensor actual;
      std::vector<int64_t> shape;
    };
    std::vector<Grad> grads = {{"lora_a", linear->lora_a().grad(), {rank, in}},
                               {"lora_b", linear->lora_b().grad(), {out, rank}},
                               {"magnitude", linear->magnitude().grad(), {out}},
                               {"input", x.grad(), x_shape}};
    if (use_bias) grads.push_back({"bias", linear->bias().grad(), {out}});
    // An NF4 base is frozen: its forward passes the input's gradient and none to the weight (torchtune's too).
    if (!quantize_base) grads.push_back({"weight", linear->weight().grad(), {out, in}});
    EXPECT_EQ(grad.contains("weight"), !quantize_base);
    for (const Grad& g : grads) {
      ASSERT_TRUE(g.actual.defined()) << g.key;
      const torch::Tensor expected = FixtureTensor(grad[g.key], g.shape);
      EXPECT_GT(expected.abs().max().item<double>(), 1e-3) << g.key << ": a zero gradient would test nothing";
      EXPECT_LE(MaxDiff(g.actual, expected), kTol) << g.key;
    }
    if (quantize_base) {
      // torchtune 0.6.1 merges no NF4 base; the merged layer must compute what the QDoRA layer does.
      Linear merged(in, out);
      {
        torch::NoGradGuard no_grad;
        merged->weight().copy_(linear->MergedWeight());
      }
      torch::NoGradGuard no_grad;
      EXPECT_LE(MaxDiff(merged(x), y), kTol);
      continue;
    }
    // torchtune's get_merged_lora_ckpt: magnitude / ||W + s B A|| * (W + s B A).
    EXPECT_LE(MaxDiff(linear->MergedWeight(), FixtureTensor(c["merged_weight"], {out, in})), kTol);
  }
}

TEST(DoraTest, MagnitudeIsAnAdapterParameterCountedPerOutputRow) {
  const LlamaArgs args = Llama3_2_1BArgs();
  LoraArgs lora{{"q_proj", "v_proj"}, /*apply_to_mlp=*/true, false, 8, 16};
  Llama plain_lora(args, lora, kMeta);
  lora.use_dora = true;
  Llama dora(args, lora, kMeta);
  FreezeBaseParameters(*plain_lora);
  FreezeBaseParameters(*dora);
  // Per layer a magnitude per output row of q (2048), v (8 kv heads x 64 = 512), w1 and w3 (8192) and w2 (2048).
  const int64_t magnitudes = args.num_layers * (2048 + 512 + 8192 + 8192 + 2048);
  EXPECT_EQ(CountParameters(*dora), CountParameters(*plain_lora) + magnitudes);
  EXPECT_EQ(CountParameters(*dora, /*trainable_only=*/true),
            CountParameters(*plain_lora, /*trainable_only=*/true) + magnitudes);
  std::set<std::string> trainable;
  for (const auto& item : dora->named_parameters()) {
    if (item.value().requires_grad()) trainable.insert(item.key());
  }
  EXPECT_EQ(trainable.count("layers.0.attn.q_proj.magnitude"), 1u);
  EXPECT_EQ(trainable.count("layers.15.mlp.w2.magnitude"), 1u);
  EXPECT_EQ(trainable.count("layers.0.attn.k_proj.magnitude"), 0u);  // not adapted
  EXPECT_EQ(trainable.size(), AdapterParameters(*dora).size());
  EXPECT_EQ(trainable.size(), static_cast<size_t>(args.num_layers * 5 * 3));
}

TEST(DoraTest, AtInitTheModelEqualsItsBaseAndInitializingFollowsTheLoadedWeights) {
  torch::manual_seed(11);
  const LlamaArgs args = LlamaTinyArgs();
  LoraArgs lora{{"q_proj", "k_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, 4, 8};
  lora.use_dora = true;
  Llama adapted(args, lora);
  Llama base(args);
  // Weights "loaded" after building: the magnitudes still hold the old row norms until initialised again.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : base->parameters()) p.mul_(1.5);
  }
  std::vector<std::pair<std::string, torch::Tensor>> base_weights = NamedParameters(*base);
  LoadByName(*adapted, [&] {
    auto all = base_weights;
    for (const auto& [name, t] : NamedParameters(*adapted)) {
      if (IsLoraName(name)) all.emplace_back(name, t.detach().clone());
    }
    return all;
  }());
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 10}, torch::kLong);
  const torch::Tensor expected = base(tokens);
  EXPECT_FALSE(torch::allclose(adapted(tokens), expected, 1e-4, 1e-4));
  InitializeDoraMagnitudes(*adapted);
  EXPECT_TRUE(torch::allclose(adapted(tokens), expected, 1e-5, 1e-5));
}

TEST(DoraTest, DropoutAppliesToTheAdapterPathOnly) {
  torch::manual_seed(12);
  Linear linear(16, 8, c10::TensorOptions(), Dora(4, 8, /*dropout=*/0.5));
  torch::NoGradGuard no_grad;
  linear->lora_b().normal_();
  linear->magnitude().mul_(1.2);
  const torch::Tensor x = torch::randn({5, 16});
  const torch::Tensor w = linear->weight() + 2.0 * torch::matmul(linear->lora_b(), linear->lora_a());
  const torch::Tensor scale = linear->magnitude() / w.norm(2, {1});
  auto expected = [&](const torch::Tensor& adapter_in) {
    return scale * (torch::matmul(x, linear->weight().t()) +
                    2.0 * torch::matmul(adapter_in, torch::matmul(linear->lora_b(), linear->lora_a()).t()));
  };
  linear->eval();
  EXPECT_LE(MaxDiff(linear(x), expected(x)), 1e-5);
  linear->train();
  torch::manual_seed(13);
  const torch::Tensor trained = linear(x);
  torch::manual_seed(13);
  const torch::Tensor dropped = torch::dropout(x, 0.5, /*train=*/true);
  EXPECT_LE(MaxDiff(trained, expected(dropped)), 1e-5);
  EXPECT_GT(MaxDiff(trained, expected(x)), 1e-2);
}

// A model with DoRA on every kind of layer (q/k/v with biases, as Qwen2's, output and MLP) and trained-looking
// adapters: the merged state dict in a plain model gives the adapted model's logits.
TEST(DoraTest, MergedStateDictReproducesTheAdaptedModel) {
  torch::manual_seed(14);
  LlamaArgs args = LlamaTinyArgs();
  args.tie_word_embeddings = false;
  args.qkv_bias = true;
  LoraArgs lora{{"q_proj", "k_proj", "v_proj", "output_proj"}, true, /*apply_to_output=*/true, 4, 16};
  lora.use_dora = true;
  Llama adapted(args, lora);
  adapted->eval();
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, p] : AdapterParameters(*adapted)) {
      if (EndsWith(name, "lora_b.weight")) p.normal_(0, 0.05);
      if (EndsWith(name, "magnitude")) p.mul_(1 + 0.2 * torch::rand_like(p));
    }
  }
  Llama plain = MergedIntoPlain(args, *adapted);

  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 10}, torch::kLong);
  const torch::Tensor expected = adapted(tokens);
  EXPECT_LE(MaxDiff(plain(tokens), expected), 1e-4);
  // Both the magnitude and the biases matter: merging as LoRA, or leaving the biases, gives other logits.
  std::vector<std::pair<std::string, torch::Tensor>> unscaled_bias;
  const auto named = NamedParameters(*adapted);
  std::map<std::string, torch::Tensor> params(named.begin(), named.end());
  for (const auto& [name, t] : MergedStateDict(*adapted)) {
    unscaled_bias.emplace_back(name, EndsWith(name, ".bias") ? params.at(name).detach() : t);
  }
  LoadByName(*plain, unscaled_bias);
  EXPECT_GT(MaxDiff(plain(tokens), expected), 1e-3);
}

TEST(DoraTest, TinyDecoderTrainsAndOnlyAdaptersMove) {
  torch::manual_seed(15);
  const LlamaArgs args = LlamaTinyArgs();
  LoraArgs lora{{"q_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, 4, 8};
  lora.use_dora = true;
  Llama model(args, lora);
  FreezeBaseParameters(*model);
  std::map<std::string, torch::Tensor> before;
  for (const auto& [name, t] : NamedParameters(*model)) before[name] = t.detach().clone();
  std::vector<torch::Tensor> trained;
  for (const auto& [name, p] : AdapterParameters(*model)) trained.push_back(p);
  torch::optim::AdamW optimizer(trained, torch::optim::AdamWOptions(1e-2).weight_decay(0));
  const torch::Tensor tokens = torch::randint(0, args.vocab_size, {4, 16}, torch::kLong);
  const torch::Tensor inputs = tokens.narrow(1, 0, 15), labels = tokens.narrow(1, 1, 15);
  std::vector<double> losses;
  for (int step = 0; step < 8; ++step) {
    optimizer.zero_grad();
    torch::Tensor logits = model(inputs);
    torch::Tensor loss = torch::cross_entropy_loss(logits.reshape({-1, args.vocab_size}), labels.reshape({-1}));
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  EXPECT_LT(losses.back(), losses.front() - 0.05) << losses.front() << " -> " << losses.back();
  for (const auto& [name, t] : NamedParameters(*model)) {
    const bool moved = !torch::equal(t.detach(), before.at(name));
    EXPECT_EQ(moved, IsLoraName(name)) << name;
  }
}

}  // namespace
}  // namespace tmx::models
