// bitsandbytes' AdamW8bit in C++: the dynamic maps, the uint8 codes and absmax of both moments and the weights
// after each of three steps equal what bitsandbytes 0.50.2 computes on cpu (recipes/testdata/
// bitsandbytes_adamw8bit.json, made by bitsandbytes itself with scripts/make_bitsandbytes_fixtures.py); the
// components' schemas, the paged variants' device check, state saved and resumed, and paged state on cuda.
#include "recipes/adamw8bit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "recipes/builtin.h"
#include "recipes/optimizers.h"
#include "recipes/train_state.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

nlohmann::json Fixture() {
  std::ifstream in(std::string(TM_SOURCE_DIR) + "/recipes/testdata/bitsandbytes_adamw8bit.json");
  EXPECT_TRUE(in.good()) << "missing fixture; make it with scripts/make_bitsandbytes_fixtures.py";
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
}

// The fixture's tensors: hex of little-endian bytes.
at::Tensor FromHex(const std::string& hex, torch::Dtype dtype) {
  std::vector<uint8_t> bytes(hex.size() / 2);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  const int64_t n = static_cast<int64_t>(bytes.size()) / static_cast<int64_t>(c10::elementSize(dtype));
  return torch::from_blob(bytes.data(), {n}, dtype).clone();
}

// scripts/make_bitsandbytes_fixtures.py's lcg_tensor: 24-bit fractions in [-1, 1) from a 64-bit LCG, scaled per
// block of 256 by 2^-(3 (block % 5)); exact in float32.
at::Tensor LcgTensor(uint64_t seed, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  uint64_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double unit = static_cast<double>(state >> 40) / static_cast<double>(1 << 24) * 2.0 - 1.0;
    out[static_cast<size_t>(i)] = static_cast<float>(unit * std::ldexp(1.0, -3 * static_cast<int>((i / 256) % 5)));
  }
  return torch::tensor(out, torch::kFloat);
}

TEST(AdamW8bitTest, DynamicMapsAreBitsandbytes) {
  nlohmann::json f = Fixture();
  at::Tensor signed_map = DynamicMap(true), unsigned_map = DynamicMap(false);
  ASSERT_EQ(signed_map.numel(), 256);
  EXPECT_TRUE(torch::equal(signed_map, FromHex(f["qmap_signed"], torch::kFloat)));
  EXPECT_TRUE(torch::equal(unsigned_map, FromHex(f["qmap_unsigned"], torch::kFloat)));
  EXPECT_EQ(signed_map[255].item<float>(), 1.0f);
  EXPECT_EQ(unsigned_map[0].item<float>(), 0.0f);
  EXPECT_LT(signed_map[0].item<float>(), -0.99f);
}

TEST(AdamW8bitTest, QuantizesBlockwise) {
  at::Tensor code = DynamicMap(true);
  // Block 0: a ramp whose largest magnitude is negative; block 1 zeros; block 2 (partial) one value.
  at::Tensor x = torch::zeros({256 * 2 + 3});
  x.slice(0, 0, 256).copy_(torch::linspace(-3.0, 1.5, 256));
  x[514] = 0.25f;
  BlockwiseQuantized q = QuantizeBlockwise(x, code);
  ASSERT_EQ(q.absmax.numel(), 3);
  EXPECT_EQ(q.absmax[0].item<float>(), 3.0f);
  EXPECT_EQ(q.absmax[1].item<float>(), 0.0f);
  EXPECT_EQ(q.absmax[2].item<float>(), 0.25f);
  EXPECT_EQ(q.codes[0].item<uint8_t>(), 0);    // -absmax: the map's most negative code
  EXPECT_EQ(q.codes[514].item<uint8_t>(), 255);  // +absmax: 1.0
  EXPECT_EQ(q.codes.slice(0, 256, 512).max().item<uint8_t>(), 0);  // a block of zeros keeps codes 0
  at::Tensor back = DequantizeBlockwise(q.codes, q.absmax, code);
  EXPECT_EQ(back[514].item<float>(), 0.25f);
  EXPECT_TRUE(torch::equal(back.slice(0, 256, 512), torch::zeros({256})));
  // The map's codes are 1/70 apart at most (in [-1, 1]): each value within half that of its block's absmax.
  EXPECT_LE((back.slice(0, 0, 256) - x.slice(0, 0, 256)).abs().max().item<float>(), 3.0f * 0.0071f);
}

OptimizerPtr BuildFromConfig(const std::string& yaml, const std::vector<at::Tensor>& params) {
  StatusOr<Config> config = Config::FromString(yaml, "opt.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  StatusOr<const OptimizerComponent*> component = OptimizerOf(*config, BuiltinRegistry());
  EXPECT_TRUE(component.ok()) << component.status().ToString();
  StatusOr<OptimizerPtr> built = (*component)->Build(*config, params);
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return built.ok() ? std::move(built).value() : nullptr;
}

const char* kFixtureConfig =
    "optimizer:\n"
    "  _component_: bitsandbytes.optim.AdamW8bit\n"
    "  lr: 0.01\n"
    "  betas: [0.8, 0.95]\n"
    "  eps: 1.0e-6\n"
    "  weight_decay: 0.1\n"
    "  amsgrad: False\n"
    "  optim_bits: 32\n"
    "  min_8bit_size: 4096\n"
    "  is_paged: False\n";

TEST(AdamW8bitTest, ThreeStepsEqualBitsandbytes) {
  nlohmann::json f = Fixture();
  ASSERT_FALSE(f.is_discarded());
  const std::vector<std::string> names = {"big", "small"};
  std::vector<at::Tensor> params;
  for (size_t k = 0; k < names.size(); ++k) {
    std::vector<int64_t> shape = f["shapes"][names[k]].get<std::vector<int64_t>>();
    const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    params.push_back(LcgTensor(1000 + k, n).reshape(shape).requires_grad_());
  }
  OptimizerPtr opt = BuildFromConfig(kFixtureConfig, params);
  ASSERT_NE(opt, nullptr);
  ASSERT_NE(dynamic_cast<BnbAdamW*>(opt.get()), nullptr);
  for (int step = 1; step <= 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (size_t k = 0; k < params.size(); ++k) {
      params[k].mutable_grad() = LcgTensor(100 * step + k, params[k].numel()).reshape(params[k].sizes());
    }
    opt->step();
    const nlohmann::json& record = f["steps"][step - 1];
    for (size_t k = 0; k < params.size(); ++k) {
      SCOPED_TRACE(names[k]);
      const nlohmann::json& want = record[names[k]];
      const auto& st = static_cast<const BnbAdamWParamState&>(*opt->state().at(params[k].unsafeGetTensorImpl()));
      EXPECT_EQ(st.step(), want["step"].get<int64_t>());
      at::Tensor weight = params[k].detach().reshape(-1);
      at::Tensor expected = FromHex(want["weight"], torch::kFloat);
      EXPECT_TRUE(torch::allclose(weight, expected, /*rtol=*/1e-6, /*atol=*/1e-9))
          << "largest difference " << (weight - expected).abs().max().item<float>();
      EXPECT_FALSE(torch::equal(weight, LcgTensor(1000 + k, weight.numel())));  // it moved
      if (want["state_dtype"] == "uint8") {
        ASSERT_TRUE(st.quantized());
        EXPECT_TRUE(torch::equal(st.state1().reshape(-1), FromHex(want["state1"], torch::kByte)));
        EXPECT_TRUE(torch::equal(st.state2().reshape(-1), FromHex(want["state2"], torch::kByte)));
        EXPECT_TRUE(torch::equal(st.absmax1(), FromHex(want["absmax1"], torch::kFloat)));
        EXPECT_TRUE(torch::equal(st.absmax2(), FromHex(want["absmax2"], torch::kFloat)));
        EXPECT_EQ(st.absmax1().numel(), 19);  // 4800 elements: 18 blocks of 256 and one of 192
      } else {
        ASSERT_FALSE(st.quantized());  // under min_8bit_size: float32 moments
        EXPECT_EQ(params[k].numel(), 300);
        EXPECT_TRUE(torch::allclose(st.state1().reshape(-1), FromHex(want["state1"], torch::kFloat), 1e-6, 1e-12));
        EXPECT_TRUE(torch::allclose(st.state2().reshape(-1), FromHex(want["state2"], torch::kFloat), 1e-6, 1e-12));
      }
    }
  }
}

}  // namespace
}  // namespace tmx::recipes
