// The quantize recipe end to end on a tiny model, in-process on the CPU: what it writes, that it computes what
// quantisation-aware training trained for, and that generation loads it.
#include "recipes/quantize.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "base/file_util.h"
#include "recipes/builtin.h"
#include "recipes/checkpoint/safetensors.h"
#include "recipes/models/decoder.h"
#include "recipes/models/fake_quant.h"
#include "recipes/models/lora.h"
#include "recipes/models/presets.h"
#include "tests/in_process_run.h"
#include "tests/scratch_dir.h"

namespace tmx::recipes {
namespace {

class QuantizeTest : public ::testing::Test {
 protected:
  // Runs the built-in config `name`'s recipe with `overrides` on the cpu; returns its status and what it printed.
  Status Run(const std::string& name, std::vector<std::string> overrides, std::string* printed = nullptr) {
    overrides.insert(overrides.begin(), "device=cpu");
    const InProcessRun run = RunInProcess(name, overrides);
    if (printed != nullptr) *printed = run.printed;
    return run.status;
  }

  const models::DecoderArgs& Args() { return models::FindModelPreset("tiny_llama3_2")->args; }

  test::ScratchDir scratch_{"tm_quantize_test"};
};

TEST_F(QuantizeTest, WritesInt4CodesThatComputeWhatQatTrainedFor) {
  // A bf16 checkpoint of seeded weights, quantised by the recipe.
  torch::manual_seed(7);
  models::Decoder plain(Args(), std::nullopt, torch::TensorOptions().dtype(torch::kBFloat16));
  ASSERT_TRUE(MakeDirs(scratch_.path() + "/in").ok());
  ASSERT_TRUE(checkpoint::SaveSafetensors(scratch_.path() + "/in/model.safetensors",
                                          checkpoint::ModuleTensors(*plain))
                  .ok());
  std::string printed;
  Status s = Run("tiny/quantize", {"output_dir=" + scratch_.path() + "/out",
                                   "checkpointer.checkpoint_dir=" + scratch_.path() + "/in"},
                 &printed);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << printed;
  EXPECT_NE(printed.find("Quantised 14 linears"), std::string::npos) << printed;
  const std::string file = scratch_.path() + "/out/model-8da4w.safetensors";
  StatusOr<checkpoint::LoadedSafetensors> loaded = checkpoint::LoadSafetensors(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->metadata.at("quantization"), "8da4w");
  EXPECT_EQ(loaded->metadata.at("groupsize"), "32");
  std::map<std::string, torch::Tensor> tensors(loaded->tensors.begin(), loaded->tensors.end());
  EXPECT_EQ(tensors.at("layers.0.attn.q_proj.weight").scalar_type(), torch::kChar);
  EXPECT_EQ(tensors.at("layers.0.attn.q_proj.scales").sizes(), (std::vector<int64_t>{64, 2}));
  EXPECT_EQ(tensors.at("layers.1.mlp.w2.scales").sizes(), (std::vector<int64_t>{64, 256 / 32}));
  EXPECT_EQ(tensors.at("tok_embeddings.weight").scalar_type(), torch::kBFloat16);

  // Loaded into a quantised model, it computes the fake-quantised (QAT) forward of the original weights exactly.
  models::Decoder int4(Args(), std::nullopt, torch::TensorOptions().dtype(torch::kBFloat16));
  ASSERT_TRUE(models::QuantizeInt4Linears(*int4, 32).ok());
  ASSERT_TRUE(checkpoint::LoadIntoModule(*int4, loaded->tensors).ok());
  ASSERT_TRUE(models::AttachFakeQuantization(*plain, 32, models::FakeQuantScope::kEveryLinear).ok());
  torch::NoGradGuard no_grad;
  const torch::Tensor tokens = torch::randint(0, 512, {2, 12});
  EXPECT_TRUE(torch::equal(int4->forward(tokens), plain->forward(tokens)));

  // Plain weights into quantised codes, and quantised ones into a plain model, are refused with the fix.
  models::Decoder other(Args(), std::nullopt, torch::TensorOptions().dtype(torch::kBFloat16));
  Status into_codes = checkpoint::LoadIntoModule(*int4, checkpoint::ModuleTensors(*other));
  EXPECT_NE(into_codes.message().find("BFloat16 values in the checkpoint, quantised Char codes in the model; fix: "
                                      "load the checkpoint the quantize recipe wrote"),
            std::string::npos)
      << into_codes.message();
  Status into_plain = checkpoint::LoadIntoModule(*other, loaded->tensors);
  EXPECT_NE(into_plain.message().find(".scales: the checkpoint holds int4-quantised weights"), std::string::npos)
      << into_plain.message();
}

TEST_F(QuantizeTest, GenerationLoadsTheQuantisedCheckpointWithTheQuantizer) {
  ASSERT_TRUE(Run("tiny/quantize", {"output_dir=" + scratch_.path() + "/q"}).ok());
  const std::vector<std::string> from_file = {"output_dir=" + scratch_.path() + "/g",
                                              "checkpointer.checkpoint_dir=" + scratch_.path() + "/q",
                                              "checkpointer.checkpoint_files=[model-8da4w.safetensors]",
                                              "temperature=0", "max_new_tokens=8"};
  std::vector<std::string> quantized = from_file;
  quantized.push_back(
      "quantizer={_component_: torchtune.training.quantization.Int8DynActInt4WeightQuantizer, groupsize: 32}");
  std::string printed;
  Status s = Run("tiny/llama3_2_generation", quantized, &printed);
  ASSERT_TRUE(s.ok()) << s.ToString() << "\n" << printed;
  EXPECT_NE(printed.find("Generated 8 tokens"), std::string::npos) << printed;
  // Without the quantizer, the run stops at loading, saying what to set.
  s = Run("tiny/llama3_2_generation", from_file, &printed);
  EXPECT_NE(s.message().find("fix: set quantizer to the quantizer it was written with"), std::string::npos)
      << s.ToString();
}

// int4 per group of 32 on seeded bf16 weights: every element within half a step (and bf16's rounding of the
// scale and the dequantised value), the relative RMS what uniform rounding gives; scales 3% off or one code two
// steps off are caught by the largest error.
TEST(QuantizationErrorsTest, Int4PerGroupIsWithinItsBoundsAndAPerturbedOneIsCaught) {
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({64, 128}).to(torch::kBFloat16);
  const models::Int4Weight q = models::QuantizeInt4PerGroup(w, 32);
  QuantizationErrors right(32, "bf16");
  right.Add("layers.0.attn.q_proj", w, q.codes, q.scales);
  right.Add("layers.1.attn.q_proj", w, q.codes, q.scales);
  const std::vector<QuantizedKind> kinds = right.Kinds();
  ASSERT_EQ(kinds.size(), 1u);
  const QuantizedKind& k = kinds[0];
  EXPECT_EQ(k.kind, "q_proj");
  EXPECT_EQ(k.scheme, "int4 per group of 32");
  EXPECT_EQ(k.tensors, 2);
  EXPECT_NEAR(k.max_bound, 0.5 + 16.0 / 256 + 1e-5, 1e-12);  // bf16: 7 mantissa bits, 16 x 2^-8
  EXPECT_GT(k.max_error, 0.45);  // 8192 elements: some lie near half a step
  EXPECT_LE(k.max_error, k.max_bound);
  EXPECT_NEAR(k.relative_rms / (k.relative_rms_bound / 1.5), 1.0, 0.15);  // uniform rounding, as expected
  EXPECT_GT(k.relative_rms, 0.03);
  EXPECT_LT(k.relative_rms, 0.2);
  EXPECT_FALSE(k.Exceeds());

  QuantizationErrors scaled(32, "bf16");
  scaled.Add("output", w, q.codes, q.scales * 1.03);
  EXPECT_TRUE(scaled.Kinds()[0].Exceeds()) << scaled.Kinds()[0].max_error;
  QuantizationErrors one_code(32, "bf16");
  torch::Tensor codes = q.codes.clone();
  codes[5][7] = codes[5][7].item<int>() > 0 ? codes[5][7] - 2 : codes[5][7] + 2;
  one_code.Add("w1", w, codes, q.scales);
  EXPECT_GT(one_code.Kinds()[0].max_error, 1.4);
  EXPECT_TRUE(one_code.Kinds()[0].Exceeds());
}

}  // namespace
}  // namespace tmx::recipes
