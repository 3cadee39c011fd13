#include "recipes/models/fake_quant.h"

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/decoder.h"
#include "recipes/models/lora.h"

namespace tmx::models {
namespace {

// torchao 0.11's fake quantisation of fixed tensors (scripts/make_qat_fixtures.py).
std::map<std::string, torch::Tensor> Fixture() {
  auto loaded = checkpoint::LoadSafetensors(std::string(TM_SOURCE_DIR) +
                                            "/recipes/models/testdata/fake_quant_torchao_0_11.safetensors");
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return {};
  return std::map<std::string, torch::Tensor>(loaded->tensors.begin(), loaded->tensors.end());
}

void ExpectEqual(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const torch::Tensor differ = got.ne(want).nonzero();
  EXPECT_EQ(differ.size(0), 0) << what << ": " << differ.size(0) << " values differ, max |delta| "
                               << (got.to(torch::kFloat) - want.to(torch::kFloat)).abs().max().item<float>();
}

TEST(FakeQuantTest, WeightsAndActivationsEqualTorchaoValueForValue) {
  const auto fixture = Fixture();
  int weights = 0, activations = 0;
  for (const auto& [name, input] : fixture) {
    const std::string tail = ".input";
    if (name.size() < tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail) != 0) continue;
    const std::string stem = name.substr(0, name.size() - tail.size());
    const torch::Tensor& want = fixture.at(stem + ".fq");
    if (stem.rfind("weight.", 0) == 0) {
      const int64_t group = std::stoll(stem.substr(stem.rfind("_g") + 2));
      ExpectEqual(FakeQuantizeInt4PerGroup(input, group), want, stem);
      ++weights;
    } else {
      ExpectEqual(FakeQuantizeInt8PerToken(input), want, stem);
      ++activations;
    }
  }
  EXPECT_EQ(weights, 4);
  EXPECT_EQ(activations, 2);
}

TEST(FakeQuantTest, ValuesLieOnTheGrid) {
  // Every fake-quantised weight is an integer in [-8, 7] times its group's scale, the group's extreme at +-7.5
  // scales rounding to an end of the grid.
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({4, 64});
  const torch::Tensor fq = FakeQuantizeInt4PerGroup(w, 16).reshape({4, 4, 16});
  const torch::Tensor scale = w.reshape({4, 4, 16}).abs().amax(-1, true) / 7.5;
  const torch::Tensor levels = fq / scale;
  EXPECT_TRUE(torch::allclose(levels, levels.round(), 0, 1e-4));
  EXPECT_LE(levels.max().item<float>(), 7 + 1e-4);
  EXPECT_GE(levels.min().item<float>(), -8 - 1e-4);
  EXPECT_GT(std::get<0>(at::_unique(fq)).numel(), 16);  // more than one group's worth of levels: scales are per group
  // Activations: at most 256 distinct values per token, and the extremes kept within half a step.
  const torch::Tensor x = torch::randn({3, 1000});
  const torch::Tensor fx = FakeQuantizeInt8PerToken(x);
  for (int64_t t = 0; t < 3; ++t) EXPECT_LE(std::get<0>(at::_unique(fx[t])).numel(), 256);
  const torch::Tensor step = (x.amax(-1) - x.amin(-1)) / 255;
  EXPECT_TRUE(((fx - x).abs().amax(-1) <= step * 0.5 + 1e-6).all().item<bool>());
}

TEST(FakeQuantTest, GradientsPassStraightThrough) {
  torch::manual_seed(4);
  const torch::Tensor w = torch::randn({8, 32}, torch::requires_grad());
  const torch::Tensor x = torch::randn({2, 3, 32}, torch::requires_grad());
  const torch::Tensor gw = torch::randn({8, 32}), gx = torch::randn({2, 3, 32});
  ((FakeQuantizeInt4PerGroup(w, 8) * gw).sum() + (FakeQuantizeInt8PerToken(x) * gx).sum()).backward();
  EXPECT_TRUE(torch::equal(w.grad(), gw));
  EXPECT_TRUE(torch::equal(x.grad(), gx));
}

// The bits of each value (a NaN's payload included), so that -0 and +0 or two NaNs are told apart.
torch::Tensor Bits(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? t.contiguous().view(torch::kShort) : t.contiguous().view(torch::kInt);
}

// Rows of randn scaled from 1e-7 (where the dtype's epsilon bounds the scale) to 1e4, with a row of zeros, one
// of positive values only and one of negative values only.
torch::Tensor HardRows(int64_t rows, int64_t row, torch::ScalarType dtype) {
  torch::Tensor x = torch::randn({rows, row}) * torch::logspace(-7, 4, rows).unsqueeze(1);
  x[0].zero_();
  x[1].abs_();
  x[2] = -x[2].abs();
  return x.to(dtype);
}

// ATen operations called on this thread while one is alive (RecordFunction), by name.
class CountOperations {
 public:
  CountOperations() {
    counts().clear();
    at::RecordFunctionCallback callback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          ++counts()[fn.name()];
          return nullptr;
        },
        nullptr);
    handle_ = at::addThreadLocalCallback(callback.scopes({at::RecordScope::FUNCTION}));
  }
  ~CountOperations() { at::removeCallback(handle_); }
  int operator[](const std::string& name) const { return counts().count(name) ? counts().at(name) : 0; }

 private:
  static std::map<std::string, int>& counts() {
    static std::map<std::string, int> c;
    return c;
  }
  at::CallbackHandle handle_;
};

TEST(FakeQuantTest, TheOnePassLoopsRunWhereTheyApply) {
  // On cpu, bf16 and float32 take the loop: none of the operations' reductions run.
  const torch::Tensor w = torch::randn({8, 64}).to(torch::kBFloat16);
  {
    CountOperations ops;
    FakeQuantizeInt4PerGroup(w, 32);
    FakeQuantizeInt8PerToken(w.to(torch::kFloat));
    EXPECT_EQ(ops["aten::amin"], 0);
    EXPECT_EQ(ops["aten::amax"], 0);
  }
  {
    CountOperations ops;  // a dtype without the loop: the operations
    FakeQuantizeInt8PerToken(w.to(torch::kDouble));
    EXPECT_EQ(ops["aten::amin"], 1);
  }
  EXPECT_TRUE(FakeQuantizesInOnePass(true, torch::kBFloat16));
  EXPECT_FALSE(FakeQuantizesInOnePass(false, torch::kBFloat16));
  EXPECT_FALSE(FakeQuantizesInOnePass(true, torch::kHalf));
}

TEST(FakeQuantTest, TheOnePassLoopsHaveTheOperationsBits) {
  // On cpu both functions take one pass per group or token for bf16 and float32; the operations stay for other
  // dtypes and devices. Same bits, forward, at group sizes and row lengths with and without a vector's tail.
  torch::manual_seed(7);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat}) {
    for (const auto& [rows, in, group] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {64, 512, 256}, {24, 96, 32}, {40, 72, 24}, {12, 10, 2}}) {
      const torch::Tensor w = HardRows(rows, in, dtype);
      const torch::Tensor one_pass = FakeQuantizeInt4PerGroup(w, group);
      const torch::Tensor operations = FakeQuantizeInt4PerGroupByOperations(w, group);
      EXPECT_TRUE(torch::equal(Bits(one_pass), Bits(operations)))
          << "int4 " << dtype << " [" << rows << ", " << in << "] groups of " << group;
      EXPECT_GT(std::get<0>(at::_unique(one_pass)).numel(), 16);  // not a degenerate grid
    }
    for (const auto& [rows, row] : std::vector<std::pair<int64_t, int64_t>>{{48, 2048}, {30, 1000}, {21, 37}}) {
      const torch::Tensor x = HardRows(rows, row, dtype).reshape({3, rows / 3, row});
      const torch::Tensor one_pass = FakeQuantizeInt8PerToken(x);
      EXPECT_EQ(one_pass.sizes(), x.sizes());
      EXPECT_TRUE(torch::equal(Bits(one_pass), Bits(FakeQuantizeInt8PerTokenByOperations(x))))
          << "int8 " << dtype << " [" << rows << ", " << row << "]";
    }
  }
  // A non-contiguous activation (a transposed view) gives its contiguous copy's values.
  const torch::Tensor x = torch::randn({64, 6}).to(torch::kBFloat16).t();
  EXPECT_TRUE(torch::equal(Bits(FakeQuantizeInt8PerToken(x)), Bits(FakeQuantizeInt8PerTokenByOperations(x))));
}

TEST(FakeQuantTest, AGroupOrTokenThatIsNotFiniteGetsTheOperationsValues) {
  torch::manual_seed(8);
  for (const auto dtype : {torch::kBFloat16, torch::kFloat}) {
    torch::Tensor w = torch::randn({4, 64});
    w[1][5] = std::numeric_limits<float>::infinity();
    w[2][40] = std::numeric_limits<float>::quiet_NaN();
    w = w.to(dtype);
    EXPECT_TRUE(torch::equal(Bits(FakeQuantizeInt4PerGroup(w, 32)), Bits(FakeQuantizeInt4PerGroupByOperations(w, 32))))
        << dtype;
    EXPECT_TRUE(torch::equal(Bits(FakeQuantizeInt8PerToken(w)), Bits(FakeQuantizeInt8PerTokenByOperations(w))))
        << dtype;
    // A finite group beside them is fake-quantised all the same.
    EXPECT_TRUE(torch::isfinite(FakeQuantizeInt4PerGroup(w, 32)[0]).all().item<bool>());
  }
}

TEST(FakeQuantTest, RefusesAGroupSizeThatDoesNotDivideTheInputs) {
  EXPECT_THROW(FakeQuantizeInt4PerGroup(torch::randn({4, 48}), 32), c10::Error);
  EXPECT_THROW(FakeQuantizeInt4PerGroup(torch::randn({4, 48}), 1), c10::Error);
  EXPECT_FALSE(Int4GroupsFit(48, 32));
  EXPECT_TRUE(Int4GroupsFit(64, 32));
}

TEST(FakeQuantTest, QatLinearEqualsTorchaosIncludingGradients) {
  const auto f = Fixture();
  Linear linear(64, 16, torch::TensorOptions().dtype(torch::kBFloat16));
  {
    torch::NoGradGuard no_grad;
    linear->weight().copy_(f.at("linear.weight"));
  }
  linear->SetFakeQuantization(32);
  const torch::Tensor x = f.at("linear.x").clone().requires_grad_(true);
  const torch::Tensor y = linear->forward(x);
  ExpectEqual(y.detach(), f.at("linear.y"), "y");
  (y.to(torch::kFloat) * f.at("linear.grad_out").to(torch::kFloat)).sum().backward();
  ExpectEqual(x.grad(), f.at("linear.x_grad"), "x grad");
  ExpectEqual(linear->weight().grad(), f.at("linear.weight_grad"), "weight grad");
}

TEST(FakeQuantTest, QatLoraLinearEqualsTorchtunesQatLoraLinear) {
  // torchtune's QATLoRALinear: fq(x) fq(W)^T on the frozen base, the adapter on x itself.
  const auto f = Fixture();
  Linear linear(64, 16, torch::TensorOptions().dtype(torch::kBFloat16), LoraAdapterOptions{4, 8.0, 0.0});
  {
    torch::NoGradGuard no_grad;
    linear->weight().copy_(f.at("lora.weight"));
    linear->lora_a().copy_(f.at("lora.lora_a"));
    linear->lora_b().copy_(f.at("lora.lora_b"));
  }
  FreezeBaseParameters(*linear);
  linear->SetFakeQuantization(32);
  const torch::Tensor x = f.at("lora.x").clone().requires_grad_(true);
  const torch::Tensor y = linear->forward(x);
  ExpectEqual(y.detach(), f.at("lora.y"), "y");
  (y.to(torch::kFloat) * f.at("lora.grad_out").to(torch::kFloat)).sum().backward();
  ExpectEqual(x.grad(), f.at("lora.x_grad"), "x grad");
  ExpectEqual(linear->lora_a().grad(), f.at("lora.lora_a_grad"), "lora_a grad");
  ExpectEqual(linear->lora_b().grad(), f.at("lora.lora_b_grad"), "lora_b grad");
}

DecoderArgs SmallArgs() {
  DecoderArgs a;
  a.vocab_size = 96;
  a.num_layers = 2;
  a.num_heads = 4;
  a.num_kv_heads = 2;
  a.embed_dim = 64;
  a.intermediate_dim = 96;  // w2's 96 inputs: not a multiple of 64
  a.max_seq_len = 32;
  return a;
}

std::vector<std::string> FakeQuantized(torch::nn::Module& m) {
  std::vector<std::string> names;
  for (const auto& item : m.named_modules("", false)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    if (linear != nullptr && linear->fake_quant_group_size() > 0) names.push_back(item.key());
  }
  return names;
}

TEST(FakeQuantTest, EveryLinearScopeSkipsWhatTheGroupDoesNotDivideLikeTorchao) {
  torch::manual_seed(5);
  StatusOr<Decoder> model = MakeDecoder(SmallArgs());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const torch::Tensor tokens = torch::randint(0, 96, {2, 8});
  const torch::Tensor plain = (*model)->forward(tokens);
  StatusOr<int64_t> attached = AttachFakeQuantization(**model, 64, FakeQuantScope::kEveryLinear);
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  // Per layer q, k, v, output_proj, w1, w3 (64 inputs); w2 has 96 inputs and stays plain; plus the output.
  EXPECT_EQ(*attached, 2 * 6 + 1);
  for (const std::string& name : FakeQuantized(**model)) EXPECT_EQ(name.find("w2"), std::string::npos) << name;
  const torch::Tensor quantized = (*model)->forward(tokens);
  EXPECT_FALSE(torch::allclose(quantized, plain, 1e-3, 1e-3));
  EnableFakeQuantization(**model, false);  // fake_quant_after_n_steps: off, then on
  EXPECT_TRUE(torch::equal((*model)->forward(tokens), plain));
  EnableFakeQuantization(**model, true);
  EXPECT_TRUE(torch::equal((*model)->forward(tokens), quantized));
}

TEST(FakeQuantTest, AdaptedScopeTakesTheLoraLayersOnlyAndNamesOneItCannotGroup) {
  LoraArgs lora;
  lora.attn_modules = {"q_proj", "v_proj"};
  lora.rank = 4;
  StatusOr<Decoder> model = MakeDecoder(SmallArgs(), lora);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<int64_t> attached = AttachFakeQuantization(**model, 32, FakeQuantScope::kAdaptedLinears);
  ASSERT_TRUE(attached.ok()) << attached.status().ToString();
  EXPECT_EQ(*attached, 4);
  EXPECT_EQ(FakeQuantized(**model),
            (std::vector<std::string>{"layers.0.attn.q_proj", "layers.0.attn.v_proj", "layers.1.attn.q_proj",
                                      "layers.1.attn.v_proj"}));

  lora.apply_to_mlp = true;  // w2's 96 inputs are not a multiple of 64
  StatusOr<Decoder> mlp = MakeDecoder(SmallArgs(), lora);
  ASSERT_TRUE(mlp.ok());
  StatusOr<int64_t> refused = AttachFakeQuantization(**mlp, 64, FakeQuantScope::kAdaptedLinears);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("quantizer.groupsize: 64 does not divide layers.0.mlp.w2's 96 inputs"),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(FakeQuantized(**mlp).empty());  // nothing attached on error
  EXPECT_FALSE(AttachFakeQuantization(**mlp, 1, FakeQuantScope::kEveryLinear).ok());
}

TEST(Int4LinearTest, ComputesWhatQatTrainedForValueForValue) {
  // A post-training int4 linear (the quantize recipe's) computes the QAT forward of the same weight exactly, so a
  // model trained with fake quantisation behaves the same once quantised.
  torch::manual_seed(6);
  const auto options = torch::TensorOptions().dtype(torch::kBFloat16);
  Linear qat(64, 24, options, std::nullopt, /*bias=*/true);
  Linear int4(64, 24, options, std::nullopt, /*bias=*/true);
  {
    torch::NoGradGuard no_grad;
    int4->weight().copy_(qat->weight());
    int4->bias().copy_(qat->bias());
  }
  qat->SetFakeQuantization(32);
  int4->QuantizeInt4(32);
  EXPECT_TRUE(int4->int4());
  EXPECT_EQ(int4->weight().scalar_type(), torch::kChar);
  EXPECT_FALSE(int4->weight().requires_grad());
  EXPECT_GE(int4->weight().min().item<int>(), kInt4Min);
  EXPECT_LE(int4->weight().max().item<int>(), kInt4Max);
  const auto buffers = int4->named_buffers();
  ASSERT_TRUE(buffers.contains("scales"));
  EXPECT_EQ(buffers["scales"].sizes(), (std::vector<int64_t>{24, 2}));
  EXPECT_EQ(buffers["scales"].scalar_type(), torch::kFloat);
  const torch::Tensor x = torch::randn({3, 5, 64}).to(torch::kBFloat16);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(int4->forward(x), qat->forward(x)));
}

TEST(Int4LinearTest, QuantisesEveryLinearTheGroupFitsAndRefusesAdapters) {
  StatusOr<Decoder> model = MakeDecoder(SmallArgs());
  ASSERT_TRUE(model.ok());
  StatusOr<int64_t> quantized = QuantizeInt4Linears(**model, 64);
  ASSERT_TRUE(quantized.ok()) << quantized.status().ToString();
  EXPECT_EQ(*quantized, 2 * 6 + 1);  // w2's 96 inputs stay plain, as torchao skips them
  torch::NoGradGuard no_grad;
  EXPECT_EQ((*model)->forward(torch::randint(0, 96, {1, 6})).sizes(), (std::vector<int64_t>{1, 6, 96}));

  LoraArgs lora;
  lora.attn_modules = {"q_proj"};
  StatusOr<Decoder> adapted = MakeDecoder(SmallArgs(), lora);
  ASSERT_TRUE(adapted.ok());
  StatusOr<int64_t> refused = QuantizeInt4Linears(**adapted, 64);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("layers.0.attn.q_proj: int4 quantisation takes plain linears, not LoRA "
                                            "adapters; quantise the merged model"),
            std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace tmx::models
