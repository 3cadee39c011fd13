#include "recipes/models/nf4.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "recipes/checkpoint/safetensors.h"

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

}  // namespace
}  // namespace tmx::models
