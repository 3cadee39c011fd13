#include "recipes/models/nf4.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <set>
#include <string>

#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/decoder.h"
#include "recipes/models/llama.h"
#include "recipes/models/lora.h"

namespace tmx::models {
namespace {

// torchao 0.11's NF4Tensor of seeded weights (scripts/make_nf4_fixtures.py).
std::map<std::string, torch::Tensor> Fixture() {
  auto loaded = checkpoint::LoadSafetensors(std::string(TM_SOURCE_DIR) +
                                            "/recipes/models/testdata/nf4_torchao_0_11.safetensors");
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return {};
  return std::map<std::string, torch::Tensor>(loaded->tensors.begin(), loaded->tensors.end());
}

// Byte-for-byte equality, NaN included, with the first differing element on failure.
void ExpectSameBytes(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  torch::Tensor a = got.contiguous().view({-1}).view(torch::kByte);
  torch::Tensor b = want.contiguous().view({-1}).view(torch::kByte);
  torch::Tensor differ = a.ne(b).nonzero();
  EXPECT_EQ(differ.size(0), 0) << what << ": " << differ.size(0) << " bytes differ, the first at byte "
                               << (differ.size(0) ? differ[0][0].item<int64_t>() : -1);
}

TEST(Nf4Test, QuantiseAndDequantiseEqualTorchaoByteForByte) {
  const auto fixture = Fixture();
  int cases = 0;
  for (const auto& [key, weight] : fixture) {
    const std::string suffix = ".weight";
    if (key.size() < suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string name = key.substr(0, key.size() - suffix.size());
    SCOPED_TRACE(name);
    ++cases;
    Nf4Tensor q = QuantizeNf4(weight, name);
    EXPECT_EQ(q.dtype, weight.scalar_type());
    ExpectSameBytes(q.quantized_data, fixture.at(name + ".quantized_data"), "quantized_data");
    ExpectSameBytes(q.quantized_scalers, fixture.at(name + ".quantized_scalers"), "quantized_scalers");
    ExpectSameBytes(q.quantization_factor, fixture.at(name + ".quantization_factor"), "quantization_factor");
    ExpectSameBytes(q.scaler_mean.reshape({1}), fixture.at(name + ".scaler_mean"), "scaler_mean");
    ExpectSameBytes(q.Dequantize(), fixture.at(name + ".dequantized"), "dequantized");
    EXPECT_EQ(q.nbytes(), weight.numel() / 2 + weight.numel() / 64 +
                              (weight.numel() / 16384 + 1) * static_cast<int64_t>(weight.element_size()));
  }
  EXPECT_EQ(cases, 5);
}

TEST(Nf4Test, CodesPackTheEvenElementInTheHighNibble) {
  // One block of 64 holding exactly the 16 levels: codes 0..15 in order, scaled by the block's absmax of 1.
  torch::Tensor levels = Nf4Levels(torch::TensorOptions().dtype(torch::kFloat));
  torch::Tensor w = levels.repeat({Nf4Tensor::kGranule / 16}).view({128, 128});
  Nf4Tensor q = QuantizeNf4(w);
  EXPECT_EQ(q.quantized_data[0].item<int64_t>(), 0x01);
  EXPECT_EQ(q.quantized_data[7].item<int64_t>(), 0xEF);
  EXPECT_TRUE(torch::equal(q.Dequantize(), w));
}

// On cpu dequantisation is one pass of its own; it gives the operations' bits (every device's path), in bf16 and
// float32, over blocks of every scale (the weights' magnitudes spread over five orders).
TEST(Nf4Test, TheOnePassDequantisationHasTheOperationsBits) {
  for (torch::Dtype dtype : {torch::kBFloat16, torch::kFloat}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(3);
    torch::Tensor w = torch::randn({256, 192}) * torch::pow(10.0, torch::randint(-4, 1, {256, 1}));
    Nf4Tensor q = QuantizeNf4(w.to(dtype));
    torch::Tensor one_pass = q.DequantizeInOnePass(), operations = q.DequantizeByOperations();
    EXPECT_EQ(one_pass.scalar_type(), dtype);
    EXPECT_EQ(one_pass.sizes(), operations.sizes());
    EXPECT_TRUE(torch::equal(one_pass, operations));
    EXPECT_TRUE(torch::equal(q.Dequantize(), operations));
    EXPECT_GT((one_pass.to(torch::kFloat) - w).abs().max().item<float>(), 0.0f);  // really quantised
  }
}

TEST(Nf4Test, RefusesShapesTorchaoRefusesNamingTheTensorAndTheFix) {
  Status s = CheckNf4Shape("layers.0.attn.q_proj.weight", {100, 64});
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("layers.0.attn.q_proj.weight: shape [100, 64] holds 6400 weights"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("fix: set model.quantize_base=False"), std::string::npos) << s.message();
  EXPECT_TRUE(CheckNf4Shape("w", {256, 64}).ok());
  EXPECT_FALSE(CheckNf4Shape("w", {2, 128, 64}).ok());
  try {
    QuantizeNf4(torch::zeros({3, 64}), "w1.weight");
    ADD_FAILURE() << "quantised a [3, 64] weight";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("w1.weight: shape [3, 64]"), std::string::npos) << e.what();
  }
}

TEST(Nf4Test, BytesPerWeight) {
  EXPECT_DOUBLE_EQ(Nf4BytesPerWeight(2), 0.5 + 1.0 / 64 + 2.0 / 16384);
  Nf4Tensor q = QuantizeNf4(torch::randn({256, 128}).to(torch::kBFloat16));
  EXPECT_DOUBLE_EQ(static_cast<double>(q.nbytes() - 2 /* the mean */), Nf4BytesPerWeight(2) * 256 * 128);
}

TEST(Nf4Test, LinearNf4GivesTheInputTheGradientOfTheDequantisedWeight) {
  torch::manual_seed(1);
  Nf4Tensor w = QuantizeNf4(torch::randn({128, 256}));
  torch::Tensor x = torch::randn({3, 256}, torch::requires_grad());
  torch::Tensor y = LinearNf4(x, w);
  torch::Tensor g = torch::randn({3, 128});
  y.backward(g);
  const torch::Tensor dense = w.Dequantize();
  EXPECT_TRUE(torch::equal(y, torch::linear(x.detach(), dense)));
  EXPECT_TRUE(torch::allclose(x.grad(), g.matmul(dense), 1e-6, 1e-6));
}

// A tiny Llama whose seven projections per layer NF4 can hold (every weight count a multiple of 16384).
DecoderArgs QloraTinyArgs() {
  DecoderArgs args = LlamaTinyArgs();  // 4 heads, 2 kv heads, vocab 512
  args.embed_dim = 256;
  args.intermediate_dim = 512;
  args.tie_word_embeddings = false;
  return args;
}

LoraArgs QloraArgs() {
  LoraArgs lora{{"q_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, /*apply_to_output=*/true, 8, 16};
  lora.quantize_base = true;
  return lora;
}

// Gives every lora_b a non-zero value, so the adapters change the output.
void PerturbAdapters(DecoderImpl& model) {
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : AdapterParameters(model)) {
    if (name.find("lora_b") != std::string::npos) p.normal_(0, 0.05);
  }
}

// The LoRA twin of `qlora`: the same parameters, with the NF4 bases dequantised into plain weights.
Decoder DequantisedTwin(DecoderImpl& qlora, const DecoderArgs& args, c10::ScalarType dtype) {
  LoraArgs lora = *qlora.lora();
  lora.quantize_base = false;
  Decoder twin(args, lora, torch::TensorOptions().dtype(dtype));
  const auto quantized = QuantizedLinears(qlora);
  std::map<std::string, torch::Tensor> source;
  for (const auto& item : qlora.named_parameters()) {
    auto it = quantized.find(item.value().unsafeGetTensorImpl());
    source[item.key()] = it != quantized.end() ? it->second->BaseWeight() : item.value().detach();
  }
  torch::NoGradGuard no_grad;
  for (auto& item : twin->named_parameters()) item.value().copy_(source.at(item.key()));
  return twin;
}

TEST(QloraTest, QuantisesTheSevenProjectionsOfEveryLayerAndNothingElse) {
  const DecoderArgs args = QloraTinyArgs();
  Decoder model(args, QloraArgs());
  std::set<std::string> quantized;
  const auto linears = QuantizedLinears(*model);
  for (const auto& item : model->named_parameters()) {
    if (linears.count(item.value().unsafeGetTensorImpl()) == 0) {
      EXPECT_FALSE(item.value().is_meta()) << item.key();
      continue;
    }
    quantized.insert(item.key());
    EXPECT_TRUE(item.value().is_meta()) << item.key();
    EXPECT_FALSE(item.value().requires_grad()) << item.key();
  }
  std::set<std::string> expected;
  for (int layer = 0; layer < args.num_layers; ++layer) {
    for (const char* name : {"attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.output_proj", "mlp.w1", "mlp.w2",
                             "mlp.w3"}) {
      expected.insert("layers." + std::to_string(layer) + "." + name + ".weight");
    }
  }
  EXPECT_EQ(quantized, expected);  // output (adapted here), embeddings and norms stay in the model's dtype
  EXPECT_EQ(CountQuantizedParameters(*model), args.num_layers * (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256));
  // On the meta device (parameter counts) nothing is quantised, and the count is the same.
  Decoder meta(args, QloraArgs(), torch::TensorOptions().device(torch::kMeta));
  EXPECT_EQ(CountParameters(*meta), CountParameters(*model));
  EXPECT_EQ(CountQuantizedParameters(*meta), CountQuantizedParameters(*model));
}

TEST(QloraTest, SizesNf4CannotHoldAreRefusedBeforeBuilding) {
  LoraArgs lora = QloraArgs();
  DecoderArgs tiny = LlamaTinyArgs();  // q_proj [64, 64]: 4096 weights
  tiny.tie_word_embeddings = false;
  Status s = ValidateLoraArgs(lora, tiny);
  ASSERT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("quantize_base: layers.0.attn.q_proj.weight: shape [64, 64] holds 4096 weights"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(ValidateLoraArgs(lora, QloraTinyArgs()).ok());
}

TEST(QloraTest, ForwardAndAdapterGradientsEqualLoraOverTheDequantisedBase) {
  for (c10::ScalarType dtype : {torch::kFloat, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    torch::manual_seed(7);
    const DecoderArgs args = QloraTinyArgs();
    Decoder qlora(args, QloraArgs(), torch::TensorOptions().dtype(dtype));
    PerturbAdapters(*qlora);
    FreezeBaseParameters(*qlora);
    Decoder lora = DequantisedTwin(*qlora, args, dtype);
    FreezeBaseParameters(*lora);
    torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 12}, torch::kLong);
    torch::Tensor a = qlora(tokens), b = lora(tokens);
    EXPECT_TRUE(torch::equal(a, b)) << (a - b).abs().max();
    if (dtype != torch::kFloat) continue;
    a.to(torch::kFloat).pow(2).mean().backward();
    b.to(torch::kFloat).pow(2).mean().backward();
    const auto qa = AdapterParameters(*qlora), la = AdapterParameters(*lora);
    ASSERT_EQ(qa.size(), la.size());
    for (size_t i = 0; i < qa.size(); ++i) {
      ASSERT_TRUE(qa[i].second.grad().defined()) << qa[i].first;
      EXPECT_TRUE(torch::allclose(qa[i].second.grad(), la[i].second.grad(), 1e-5, 1e-6)) << qa[i].first;
    }
  }
}

TEST(QloraTest, TrainsWhileTheNf4BaseStaysFixed) {
  torch::manual_seed(11);
  const DecoderArgs args = QloraTinyArgs();
  Decoder model(args, QloraArgs());
  FreezeBaseParameters(*model);
  auto* q_proj = QuantizedLinears(*model).begin()->second;
  const torch::Tensor codes = q_proj->nf4().quantized_data.clone();
  std::vector<torch::Tensor> trained;
  for (const auto& [name, p] : AdapterParameters(*model)) trained.push_back(p);
  torch::optim::AdamW optimizer(trained, torch::optim::AdamWOptions(1e-2));
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 16}, torch::kLong);
  auto loss_of = [&] {
    torch::Tensor logits = model(tokens.narrow(1, 0, 15));
    return torch::cross_entropy_loss(logits.reshape({-1, args.vocab_size}), tokens.narrow(1, 1, 15).reshape({-1}));
  };
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = loss_of();
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  for (size_t i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "step " << i;
  EXPECT_LT(losses.back(), losses.front() - 0.1);
  EXPECT_TRUE(torch::equal(q_proj->nf4().quantized_data, codes));
}

TEST(QloraTest, SavesTheBaseDequantisedAndLoadsByQuantising) {
  torch::manual_seed(13);
  const DecoderArgs args = QloraTinyArgs();
  Decoder model(args, QloraArgs());
  PerturbAdapters(*model);
  // Saving: the names of the model without LoRA, every projection dequantised (and merged where adapted) in
  // the model's dtype.
  const auto merged = MergedStateDict(*model);
  Decoder plain(args);
  std::vector<std::string> merged_names, plain_names;
  for (const auto& [name, t] : merged) merged_names.push_back(name);
  for (const auto& item : plain->named_parameters()) plain_names.push_back(item.key());
  EXPECT_EQ(merged_names, plain_names);
  std::map<std::string, torch::Tensor> saved(merged.begin(), merged.end());
  auto* k_proj = dynamic_cast<LinearImpl*>(model->named_modules()["layers.1.attn.k_proj"].get());
  auto* v_proj = dynamic_cast<LinearImpl*>(model->named_modules()["layers.1.attn.v_proj"].get());
  ASSERT_TRUE(k_proj != nullptr && v_proj != nullptr);
  EXPECT_TRUE(torch::equal(saved.at("layers.1.attn.k_proj.weight"), k_proj->nf4().Dequantize()));
  EXPECT_TRUE(torch::equal(saved.at("layers.1.attn.v_proj.weight"), v_proj->MergedWeight()));
  EXPECT_FALSE(torch::equal(saved.at("layers.1.attn.v_proj.weight"), v_proj->BaseWeight()));
  // The merged checkpoint loads into a plain model that computes what the QLoRA model does.
  ASSERT_TRUE(checkpoint::LoadIntoModule(*plain, merged).ok());
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {1, 9}, torch::kLong);
  EXPECT_TRUE(torch::allclose(plain(tokens), model(tokens), 1e-4, 1e-4));

  // Loading a base checkpoint quantises each projection on load, as torchao's copy_ into an NF4Tensor.
  Decoder source(args);
  checkpoint::NamedTensors base;
  for (const auto& item : source->named_parameters()) base.emplace_back(item.key(), item.value().detach());
  Decoder reloaded(args, QloraArgs());
  ASSERT_TRUE(checkpoint::LoadIntoModule(*reloaded, base, /*strict=*/false).ok());
  auto* w2 = dynamic_cast<LinearImpl*>(reloaded->named_modules()["layers.0.mlp.w2"].get());
  ASSERT_NE(w2, nullptr);
  Nf4Tensor want = QuantizeNf4(source->named_parameters()["layers.0.mlp.w2.weight"]);
  EXPECT_TRUE(torch::equal(w2->nf4().quantized_data, want.quantized_data));
  EXPECT_TRUE(torch::equal(w2->nf4().quantized_scalers, want.quantized_scalers));
  EXPECT_TRUE(torch::equal(w2->BaseWeight(), want.Dequantize()));
  EXPECT_TRUE(torch::equal(reloaded->named_parameters()["tok_embeddings.weight"],
                           source->named_parameters()["tok_embeddings.weight"]));
}

}  // namespace
}  // namespace tmx::models
