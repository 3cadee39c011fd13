// bitsandbytes' AdamW8bit in C++: the dynamic maps, the uint8 codes and absmax of both moments and the weights
// after each of three steps equal what bitsandbytes 0.50.2 computes on cpu (recipes/testdata/
// bitsandbytes_adamw8bit.json, made by bitsandbytes itself with scripts/make_bitsandbytes_fixtures.py); the
// components' schemas, the paged variants' device check, state saved and resumed, and paged state on cuda.
#include "recipes/adamw8bit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/stat.h>

#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/config_store.h"
#include "recipes/builtin.h"
#include "recipes/estimate.h"
#include "recipes/optimizers.h"
#include "recipes/train_schema.h"
#include "recipes/train_state.h"
#include "tests/scratch_dir.h"

#ifdef TUNE_MATRIX_HAS_CUDA
#include <torch/cuda.h>
#endif

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
      // atol 1e-7: the fixture's weights are within +-1, and the update's float32 arithmetic rounds differently
      // in other CPUs' kernels (measured: 6.0e-8 on an Intel Xeon with AMX; within 1e-9 on the AMD EPYC
      // machines before).
      EXPECT_TRUE(torch::allclose(weight, expected, /*rtol=*/1e-6, /*atol=*/1e-7))
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


// The operations' step (other devices') works through a tensor a run of blocks at a time: the same codes and
// weights in runs of one block.
TEST(AdamW8bitTest, StepsInRunsOfBlocksAsInOne) {
  std::vector<at::Tensor> whole = {LcgTensor(11, 4800).reshape({48, 100}).requires_grad_()};
  std::vector<at::Tensor> runs = {LcgTensor(11, 4800).reshape({48, 100}).requires_grad_()};
  BnbAdamW a(whole, BnbAdamWOptions(0.01).weight_decay(0.1).fused_cpu(false));
  BnbAdamW b(runs, BnbAdamWOptions(0.01).weight_decay(0.1).blocks_per_pass(1).fused_cpu(false));
  for (int step = 1; step <= 3; ++step) {
    whole[0].mutable_grad() = LcgTensor(20 + step, 4800).reshape({48, 100});
    runs[0].mutable_grad() = LcgTensor(20 + step, 4800).reshape({48, 100});
    a.step();
    b.step();
  }
  const auto& sa = static_cast<const BnbAdamWParamState&>(*a.state().at(whole[0].unsafeGetTensorImpl()));
  const auto& sb = static_cast<const BnbAdamWParamState&>(*b.state().at(runs[0].unsafeGetTensorImpl()));
  ASSERT_TRUE(sb.quantized());
  EXPECT_TRUE(torch::equal(sa.state1(), sb.state1()));
  EXPECT_TRUE(torch::equal(sa.state2(), sb.state2()));
  EXPECT_TRUE(torch::equal(sa.absmax2(), sb.absmax2()));
  EXPECT_TRUE(torch::allclose(whole[0], runs[0], 1e-6, 1e-9));
  EXPECT_FALSE(torch::equal(runs[0], LcgTensor(11, 4800).reshape({48, 100})));
}

// The share of `n` positive float32 values whose square root by ATen's vectorised operation is not std::sqrt's
// (correctly rounded): a property of the CPU and of the instruction set ATen chose, which the one-pass step's
// comparison with the operations' step allows for.
double VectorisedSqrtOffRate(int64_t n) {
  const at::Tensor x = LcgTensor(99, n).abs().to(torch::kFloat) + 1e-6f;
  const at::Tensor root = at::sqrt(x).contiguous();
  const float* in = x.data_ptr<float>();
  const float* out = root.data_ptr<float>();
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) off += out[i] != std::sqrt(in[i]) ? 1 : 0;
  return static_cast<double>(off) / static_cast<double>(n);
}

// On cpu the 8-bit step is one pass per tensor (BnbAdamWOptions::fused_cpu): the moments' codes and absmax bit for
// bit the operations' step's, the weights within an ulp, for float32 and bf16 weights and gradients, a tensor whose
// last block and last vector are partial, weight decay on, a block of zeros (codes 0) and a block that becomes NaN
// (its codes 0, its absmax NaN), over steps.
TEST(AdamW8bitTest, TheOnePassCpuStepHasTheOperationsBits) {
  for (torch::Dtype dtype : {torch::kFloat, torch::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const int64_t n = 70001;
    std::vector<at::Tensor> fused = {LcgTensor(7, n).to(dtype).requires_grad_()};
    std::vector<at::Tensor> ops = {LcgTensor(7, n).to(dtype).requires_grad_()};
    BnbAdamW a(fused, BnbAdamWOptions(0.01).weight_decay(0.1));
    BnbAdamW b(ops, BnbAdamWOptions(0.01).weight_decay(0.1).fused_cpu(false));
    for (int step = 1; step <= 4; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      at::Tensor grad = LcgTensor(30 + step, n).to(dtype);
      grad.slice(0, 512, 768).zero_();                           // block 2: zeros at step 1, then decaying moments
      if (step == 3) grad.slice(0, 1024, 1280).fill_(NAN);       // block 4: NaN from step 3 on
      fused[0].mutable_grad() = grad.clone();
      ops[0].mutable_grad() = grad.clone();
      a.step();
      b.step();
      const auto& sa = static_cast<const BnbAdamWParamState&>(*a.state().at(fused[0].unsafeGetTensorImpl()));
      const auto& sb = static_cast<const BnbAdamWParamState&>(*b.state().at(ops[0].unsafeGetTensorImpl()));
      ASSERT_TRUE(sa.quantized());
      EXPECT_TRUE(torch::equal(sa.state1(), sb.state1()));
      EXPECT_TRUE(torch::equal(sa.state2(), sb.state2()));
      // NaN != NaN: compare the bits.
      EXPECT_TRUE(torch::equal(sa.absmax1().view(torch::kInt), sb.absmax1().view(torch::kInt)));
      EXPECT_TRUE(torch::equal(sa.absmax2().view(torch::kInt), sb.absmax2().view(torch::kInt)));
      // The weights within a few ulps: ATen's vectorised square root is not always correctly rounded (434 of 70001
      // float32 roots an ulp off std::sqrt's on the Xeon this was written on, about a sixth on an AMD EPYC with
      // AVX-512), the update (lr 0.01 times the moments' quotient) divides by it, and its error is ulps of a 0.01
      // update, not of a smaller weight: up to 2 on the Xeon, 3 on the EPYC (2.8e-9 on a weight of 0.0016). NaN of
      // either sign counts alike.
      at::Tensor w1 = fused[0].detach().to(torch::kDouble), w2 = ops[0].detach().to(torch::kDouble);
      const double ulp = dtype == torch::kFloat ? std::ldexp(1.0, -23) : std::ldexp(1.0, -7);
      EXPECT_TRUE(torch::allclose(w1, w2, /*rtol=*/2 * ulp, /*atol=*/0.01 * 4 * ulp, /*equal_nan=*/true))
          << "largest difference " << (w1 - w2).abs().nan_to_num(0).max().item<double>();
      // Where the roots agree, so do the weights: the weights that differ are bounded by how often this CPU's root
      // differs from std::sqrt, over the steps so far, not by a constant.
      const double off = VectorisedSqrtOffRate(n);
      const double most = n / 100.0 + std::min(1.0, 1.5 * step * off) * static_cast<double>(n);
      EXPECT_LT((w1 != w2).logical_and(w1.isnan().logical_not()).sum().item<int64_t>(), most)
          << "this CPU's vectorised float32 square root differs from std::sqrt for " << off * 100 << "% of values";
    }
    const auto& sa = static_cast<const BnbAdamWParamState&>(*a.state().at(fused[0].unsafeGetTensorImpl()));
    EXPECT_EQ(sa.state1().slice(0, 1024, 1280).max().item<uint8_t>(), 0);  // the NaN block's codes
    EXPECT_TRUE(std::isnan(sa.absmax1()[4].item<float>()));
    EXPECT_FALSE(torch::equal(fused[0].detach(), LcgTensor(7, n).to(dtype)));  // it moved
  }
}

DeviceInfo Device(const std::string& type) {
  DeviceInfo d;
  d.id = d.type = type;
  d.bf16_matmul_backward = true;
  return d;
}

// The problems under optimizer.* of tiny/full_single_device with `overrides`, validated for `device`.
std::vector<Problem> OptimizerProblems(std::vector<std::string> overrides, const DeviceInfo& device) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig("tiny/full_single_device", registry);
  EXPECT_TRUE(located.ok());
  StatusOr<Config> c = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  std::vector<Problem> out;
  for (Problem& p : ValidateConfig(*c, *located->recipe, registry, &device)) {
    if (p.key.rfind("optimizer", 0) == 0) out.push_back(p);
  }
  return out;
}

TEST(AdamW8bitTest, SchemasTakeBitsandbytesArgumentsAndRefuseWhatItRefuses) {
  const DeviceInfo cpu = Device("cpu");
  EXPECT_TRUE(OptimizerProblems({"optimizer=bitsandbytes.optim.AdamW8bit", "optimizer.betas=[0.9,0.95]",
                                 "optimizer.min_8bit_size=1024", "optimizer.optim_bits=32"},
                                cpu)
                  .empty());
  struct Case {
    std::vector<std::string> overrides;
    std::string key, message;
    std::vector<std::string> repair;  // the problem's (device problems only)
  } cases[] = {
      {{"optimizer=bitsandbytes.optim.AdamW8bit", "optimizer.amsgrad=True"}, "optimizer.amsgrad",
       "bitsandbytes' AdamW8bit has no AMSGrad variant; set optimizer.amsgrad=False"},
      {{"optimizer=bitsandbytes.optim.PagedAdamW8bit", "optimizer.optim_bits=8"}, "optimizer.optim_bits",
       "'8' is refused: PagedAdamW8bit keeps 8-bit state whatever optim_bits says, and bitsandbytes accepts only "
       "the default 32 here; remove optimizer.optim_bits"},
      {{"optimizer=bitsandbytes.optim.PagedAdamW", "optimizer.optim_bits=16"}, "optimizer.optim_bits",
       "'16' is not 8 or 32 (bits of optimizer state)"},
      {{"optimizer=bitsandbytes.optim.AdamW8bit", "optimizer.betas=[0.9,1.5]"}, "optimizer.betas",
       "expected two numbers in [0, 1), e.g. [0.9, 0.999]"},
      // Paging is CUDA unified memory: refused on cpu with the override that runs the config there.
      // Each repair keeps the state's bits and drops the keys the new optimizer does not take.
      {{"optimizer=bitsandbytes.optim.PagedAdamW8bit"}, "optimizer._component_",
       "a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not cpu; use "
       "optimizer._component_=bitsandbytes.optim.AdamW8bit",
       {"optimizer._component_=bitsandbytes.optim.AdamW8bit"}},
      {{"optimizer=bitsandbytes.optim.PagedAdamW"}, "optimizer._component_",
       "a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not cpu; use "
       "optimizer._component_=torch.optim.AdamW optimizer.fused=True",
       {"optimizer._component_=torch.optim.AdamW", "optimizer.fused=True"}},
      {{"optimizer=bitsandbytes.optim.PagedAdamW", "optimizer.min_8bit_size=64"}, "optimizer._component_",
       "a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not cpu; use "
       "optimizer._component_=torch.optim.AdamW optimizer.fused=True ~optimizer.min_8bit_size",
       {"optimizer._component_=torch.optim.AdamW", "optimizer.fused=True", "~optimizer.min_8bit_size"}},
      {{"optimizer=bitsandbytes.optim.PagedAdamW", "optimizer.optim_bits=8"}, "optimizer._component_",
       "a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not cpu; use "
       "optimizer._component_=bitsandbytes.optim.AdamW8bit ~optimizer.optim_bits",
       {"optimizer._component_=bitsandbytes.optim.AdamW8bit", "~optimizer.optim_bits"}},
      {{"optimizer=bitsandbytes.optim.AdamW8bit", "optimizer.is_paged=True"}, "optimizer._component_",
       "a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not cpu; use "
       "optimizer.is_paged=False",
       {"optimizer.is_paged=False"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.overrides.back());
    std::vector<Problem> problems;  // the paged ones on cpu also have the device's problem, checked below
    for (const Problem& p : OptimizerProblems(c.overrides, cpu)) {
      if (p.key == c.key) problems.push_back(p);
    }
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].key, c.key);
    EXPECT_EQ(problems[0].message, c.message);
    EXPECT_EQ(problems[0].device_related, c.key == "optimizer._component_");
    EXPECT_EQ(problems[0].repair, c.repair);
  }
  // Each repair makes the config valid on cpu.
  for (const Case& c : cases) {
    if (c.repair.empty()) continue;
    SCOPED_TRACE(c.overrides.back());
    std::vector<std::string> repaired = c.overrides;
    repaired.insert(repaired.end(), c.repair.begin(), c.repair.end());
    std::vector<Problem> left = OptimizerProblems(repaired, cpu);
    EXPECT_TRUE(left.empty()) << left[0].ToString();
  }
#ifdef TUNE_MATRIX_HAS_CUDA
  // The same paged configs are valid for cuda (this build can allocate unified memory).
  EXPECT_TRUE(OptimizerProblems({"optimizer=bitsandbytes.optim.PagedAdamW8bit"}, Device("cuda")).empty());
  EXPECT_TRUE(OptimizerProblems({"optimizer=bitsandbytes.optim.AdamW8bit", "optimizer.is_paged=True"}, Device("cuda"))
                  .empty());
#endif
}

TEST(AdamW8bitTest, ShardedDataParallelIsRefused) {
  for (const char* shard : {"-1", "1"}) {
    StatusOr<Config> c = Config::FromString(std::string("optimizer:\n  _component_: bitsandbytes.optim.AdamW8bit\n"
                                                        "data_parallel_shard_dim: ") + shard + "\n",
                                            "d.yaml");
    ASSERT_TRUE(c.ok());
    std::vector<Problem> problems = DistributedChecks(*c, BuiltinRegistry(), nullptr);
    if (std::string(shard) == "1") {
      EXPECT_TRUE(problems.empty()) << problems[0].ToString();
      continue;
    }
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].key, "data_parallel_shard_dim");
    EXPECT_NE(problems[0].message.find("set data_parallel_shard_dim=1 (replicate), or use "
                                       "optimizer._component_=torch.optim.AdamW"),
              std::string::npos)
        << problems[0].message;
  }
}

TEST(AdamW8bitTest, MemoryEstimateCountsEightBitState) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig("tiny/full_single_device", registry);
  ASSERT_TRUE(located.ok());
  auto estimate = [&](const std::string& optimizer) {
    StatusOr<Config> c = LoadResolvedConfig(*located, {"optimizer=" + optimizer, "dtype=bf16"}, located->recipe,
                                            &registry);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    StatusOr<CellEstimate> e = located->recipe->estimate(*c, registry, Device("cpu"));
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    StatusOr<CheckpointBytes> saved = EstimateCheckpointBytes(*c, registry);
    EXPECT_TRUE(saved.ok());
    return std::make_tuple(e->peak_memory_bytes, e->trainable_parameters, saved->train_state);
  };
  auto [adamw, trainable, adamw_saved] = estimate("torch.optim.AdamW");
  auto [eight_bit, trainable2, eight_bit_saved] = estimate("bitsandbytes.optim.AdamW8bit");
  auto [paged32, trainable3, paged32_saved] = estimate("bitsandbytes.optim.PagedAdamW");
  ASSERT_GT(trainable, 0);
  const double n = static_cast<double>(trainable);
  // AdamW: two bf16 moments (4 bytes); AdamW8bit: two codes and two float32 absmax per 256 (2.03125 bytes);
  // PagedAdamW: two float32 moments (8 bytes) whatever the weights' dtype.
  EXPECT_NEAR(static_cast<double>(adamw - eight_bit), n * (4.0 - 2.03125), 2.0);
  EXPECT_NEAR(static_cast<double>(paged32 - adamw), n * (8.0 - 4.0), 2.0);
  EXPECT_NEAR(static_cast<double>(adamw_saved - eight_bit_saved), n * (4.0 - 2.03125), 2.0);
}

// The fixture's optimizer over two tensors (one quantised, one under min_8bit_size), with gradients of step s.
struct Trainee {
  std::vector<at::Tensor> params;
  OptimizerPtr opt;
  Trainee() {
    params = {LcgTensor(7, 64 * 80).reshape({64, 80}).requires_grad_(), LcgTensor(8, 10).requires_grad_()};
    opt = BuildFromConfig(kFixtureConfig, params);
  }
  void Steps(int from, int to) {
    for (int step = from; step <= to; ++step) {
      for (size_t k = 0; k < params.size(); ++k) {
        params[k].mutable_grad() = LcgTensor(50 * step + k, params[k].numel()).reshape(params[k].sizes());
      }
      opt->step();
    }
  }
  NamedParameters Named() const { return {{"w", params[0]}, {"b", params[1]}}; }
};

TEST(AdamW8bitTest, SavedStateResumesToTheSameWeights) {
  Trainee straight, interrupted, resumed;
  straight.Steps(1, 5);
  interrupted.Steps(1, 3);
  test::ScratchDir dir("adamw8bit");
  ASSERT_EQ(::mkdir((dir.path() + "/epoch_0").c_str(), 0755), 0);
  ASSERT_TRUE(SaveTrainState(dir.path() + "/epoch_0", interrupted.Named(), *interrupted.opt, /*lora=*/true,
                             Progress{1, 3, 5})
                  .ok());
  // What was saved: the codes as uint8, absmax per block, float32 moments for the small tensor.
  StatusOr<checkpoint::LoadedSafetensors> saved =
      checkpoint::LoadSafetensors(dir.path() + "/epoch_0/recipe_state.safetensors");
  ASSERT_TRUE(saved.ok());
  std::map<std::string, at::Tensor> by_name(saved->tensors.begin(), saved->tensors.end());
  EXPECT_EQ(by_name.at("w.state1").scalar_type(), torch::kByte);
  EXPECT_EQ(by_name.at("w.absmax2").numel(), 20);
  EXPECT_EQ(by_name.at("b.state2").scalar_type(), torch::kFloat);
  EXPECT_EQ(by_name.count("b.absmax1"), 0u);
  EXPECT_EQ(saved->metadata.at("w.step"), "3");

  StatusOr<Config> config = Config::FromString(kFixtureConfig, "opt.yaml");
  ASSERT_TRUE(config.ok());
  StatusOr<ResumePoint> point = LoadTrainState(dir.path(), *config, resumed.Named(), *resumed.opt, /*lora=*/true,
                                               [](const std::string&) { return Status::OK(); });
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(point->global_step, 3);
  resumed.Steps(4, 5);
  for (size_t k = 0; k < straight.params.size(); ++k) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(torch::equal(resumed.params[k], straight.params[k]));
    EXPECT_FALSE(torch::equal(resumed.params[k], interrupted.params[k]));  // two more steps moved it
    const auto& a = static_cast<const BnbAdamWParamState&>(*straight.opt->state().at(straight.params[k].unsafeGetTensorImpl()));
    const auto& b = static_cast<const BnbAdamWParamState&>(*resumed.opt->state().at(resumed.params[k].unsafeGetTensorImpl()));
    EXPECT_EQ(b.step(), 5);
    EXPECT_TRUE(torch::equal(a.state1(), b.state1()));
    EXPECT_TRUE(torch::equal(a.state2(), b.state2()));
  }
  // State saved with float32 moments does not go into 8-bit buffers: resuming says so.
  std::string all_8bit = kFixtureConfig;
  all_8bit.replace(all_8bit.find("min_8bit_size: 4096"), 19, "min_8bit_size: 1");
  Trainee other;
  other.opt = BuildFromConfig(all_8bit, other.params);
  StatusOr<Config> other_config = Config::FromString(all_8bit, "o.yaml");
  ASSERT_TRUE(other_config.ok());
  StatusOr<ResumePoint> refused = LoadTrainState(dir.path(), *other_config, other.Named(), *other.opt, /*lora=*/true,
                                                 [](const std::string&) { return Status::OK(); });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("b.state1: not the state this optimizer keeps for b (saved with "
                                             "another optim_bits or min_8bit_size?)"),
            std::string::npos)
      << refused.status().ToString();
}

TEST(AdamW8bitTest, PagedStateLivesInUnifiedMemoryOnCuda) {
#ifndef TUNE_MATRIX_HAS_CUDA
  GTEST_SKIP() << "this build has no CUDA toolkit (TUNE_MATRIX_HAS_CUDA unset): no unified memory to test";
#else
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no cuda device on this machine: paged state needs one";
  auto make = [](const char* component, std::vector<at::Tensor>& params) {
    params = {LcgTensor(3, 400 * 300).reshape({400, 300}).to(torch::kCUDA).requires_grad_(),
              LcgTensor(4, 5000).to(torch::kCUDA).requires_grad_()};
    return BuildFromConfig(std::string("optimizer:\n  _component_: ") + component + "\n", params);
  };
  std::vector<at::Tensor> paged_params, plain_params;
  OptimizerPtr paged = make("bitsandbytes.optim.PagedAdamW8bit", paged_params);
  OptimizerPtr plain = make("bitsandbytes.optim.AdamW8bit", plain_params);
  for (int step = 1; step <= 2; ++step) {
    for (auto* set : {&paged_params, &plain_params}) {
      for (size_t k = 0; k < set->size(); ++k) {
        (*set)[k].mutable_grad() = LcgTensor(10 * step + k, (*set)[k].numel()).reshape((*set)[k].sizes()).to(torch::kCUDA);
      }
    }
    paged->step();
    plain->step();
  }
  auto state = [](const OptimizerPtr& o, const at::Tensor& p) -> const BnbAdamWParamState& {
    return static_cast<const BnbAdamWParamState&>(*o->state().at(p.unsafeGetTensorImpl()));
  };
  // 120,000 elements: paged; 5,000 (under bitsandbytes' 1e5): device memory, as bitsandbytes does.
  EXPECT_TRUE(BnbAdamW::InUnifiedMemory(state(paged, paged_params[0]).state1()));
  EXPECT_TRUE(BnbAdamW::InUnifiedMemory(state(paged, paged_params[0]).state2()));
  EXPECT_FALSE(BnbAdamW::InUnifiedMemory(state(paged, paged_params[1]).state1()));
  EXPECT_FALSE(BnbAdamW::InUnifiedMemory(state(plain, plain_params[0]).state1()));
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(torch::equal(paged_params[k], plain_params[k]));
    EXPECT_TRUE(torch::equal(state(paged, paged_params[k]).state1(), state(plain, plain_params[k]).state1()));
  }
#endif
}

}  // namespace
}  // namespace tmx::recipes
