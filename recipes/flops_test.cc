#include "recipes/flops.h"

#include <gtest/gtest.h>

#include "recipes/models/presets.h"

namespace tmx {
namespace {

// A model small enough to count by hand: width 8, 2 query heads and 1 key/value head of 4, MLP 16, 32 ids.
// Its linears hold q 64 + k 32 + v 32 + output_proj 64 + w1, w3, w2 3 x 128 + output 256 = 832 weights.
FlopModel HandCounted() {
  FlopModel m;
  m.args.vocab_size = 32;
  m.args.num_layers = 1;
  m.args.num_heads = 2;
  m.args.num_kv_heads = 1;
  m.args.embed_dim = 8;
  m.args.intermediate_dim = 16;
  m.args.max_seq_len = 64;
  return m;
}

TEST(FlopsTest, AttendedPairsAreCausalAndWithinTheWindow) {
  EXPECT_EQ(AttendedPairs(4, 0), 10);   // 1 + 2 + 3 + 4
  EXPECT_EQ(AttendedPairs(4, 2), 7);    // 1 + 2 + 2 + 2
  EXPECT_EQ(AttendedPairs(4, 4), 10);   // a window as long as the sequence is no window
  EXPECT_EQ(AttendedPairs(4, 9), 10);
  EXPECT_EQ(AttendedPairs(0, 0), 0);
}

TEST(FlopsTest, FullFineTuningCountsSixPerWeightAndAttentionThreeTimes) {
  const FlopModel m = HandCounted();
  // 2 rows of 4 positions: 8 positions x 6 x 832, plus attention 3 x 2 rows x (4 x 8 x 10 pairs).
  EXPECT_DOUBLE_EQ(TrainingFlops(m, 2, 4), 8 * 6 * 832 + 3 * 2 * 320);
  EXPECT_DOUBLE_EQ(ForwardFlops(m, 2, 4), 8 * 2 * 832 + 2 * 320);
}

TEST(FlopsTest, LoraCountsFourPerFrozenWeightAndSixPerAdapterWeight) {
  FlopModel m = HandCounted();
  m.lora = models::LoraArgs{};
  m.lora->attn_modules = {"q_proj", "v_proj"};
  m.lora->rank = 2;
  // Adapters: q 2 x (8 + 8) = 32, v 2 x (8 + 4) = 24 weights.
  EXPECT_DOUBLE_EQ(TrainingFlops(m, 2, 4), 8 * (4 * 832 + 6 * 56) + 3 * 2 * 320);
  EXPECT_DOUBLE_EQ(ForwardFlops(m, 2, 4), 8 * 2 * (832 + 56) + 2 * 320);
  m.lora->apply_to_mlp = true;  // + w1, w3 2 x (8 + 16), w2 2 x (16 + 8): 144 more
  m.lora->apply_to_output = true;  // + 2 x (8 + 32) = 80
  EXPECT_DOUBLE_EQ(TrainingFlops(m, 1, 1), 4 * 832 + 6 * (56 + 144 + 80) + 3 * 4 * 8 * 1);
}

TEST(FlopsTest, AlternatingWindowsCountEachLayersOwnPairs) {
  FlopModel m = HandCounted();
  m.args.num_layers = 2;
  m.args.sliding_window = 2;
  m.args.alternate_sliding_window = true;  // layer 0 windowed (7 pairs of 4), layer 1 global (10)
  const double weights = 2 * (832 - 256) + 256;  // two layers' projections and one output
  EXPECT_DOUBLE_EQ(ForwardFlops(m, 1, 4), 4 * 2 * weights + 4 * 8 * (7 + 10));
  EXPECT_DOUBLE_EQ(TrainingFlops(m, 1, 4), 4 * 6 * weights + 3 * 4 * 8 * (7 + 10));
}

// For a real model at a short sequence the count is the familiar 6 x parameters x tokens: Llama 3.2 1B's
// published 1,235,814,400 parameters are its linears (the tied embedding counted once, as the output) and 33
// RMSNorms of 2048, at 4 x 32 tokens; attention adds a little.
TEST(FlopsTest, ARealModelAtShortSequencesIsSixTimesItsParametersPerToken) {
  const models::ModelPreset* preset = models::FindModelPreset("llama3_2_1b");
  ASSERT_NE(preset, nullptr);
  const FlopModel m{preset->args, std::nullopt};
  const double linears = static_cast<double>(preset->published_params) - 33 * 2048;
  const double flops = TrainingFlops(m, 4, 32);
  EXPECT_GT(flops, 6 * linears * 128);
  EXPECT_LT(flops, 1.01 * 6 * linears * 128);
}

TEST(FlopsTest, PrefillCountsTheOutputProjectionOfTheLastPositionOnly) {
  const FlopModel m = HandCounted();
  // 576 weights before the output, 256 in it: 2 x 576 per position, 2 x 256 once, and attention's forward.
  EXPECT_EQ(PrefillFlops(m, 1, 3), 2.0 * 576 * 3 + 2.0 * 256 + 4.0 * 8 * AttendedPairs(3, 0));
  EXPECT_EQ(PrefillFlops(m, 2, 3), 2 * PrefillFlops(m, 1, 3));
}

TEST(FlopsTest, ADecodeStepOfLlama321BReadsItsWeightsAndItsCache) {
  // The 1B decode of issue 53: 1,235,814,400 parameters in bf16 (tied embeddings: the output projection reads the
  // table whole) are 2.47 GB a token, and each position of its KV cache 16 layers x 2 x 8 heads x 64 x 2 bytes.
  const models::ModelPreset* preset = models::FindModelPreset("llama3_2_1b");
  ASSERT_NE(preset, nullptr);
  const double weights = DecodeWeightBytes(preset->args, 1235814400.0 * 2, 2);
  EXPECT_EQ(weights, 2471628800.0);
  EXPECT_EQ(DecodeStepBytes(preset->args, weights, 1, 100, 2), 2471628800.0 + 100 * 32768.0);
  EXPECT_EQ(DecodeStepBytes(preset->args, weights, 4, 100, 2), 2471628800.0 + 4 * 100 * 32768.0);
  // An untied table is read a row per token, not whole; a sliding window caps the positions read.
  FlopModel m = HandCounted();
  EXPECT_EQ(DecodeWeightBytes(m.args, 1000, 4), 1000 - 32 * 8 * 4);
  m.args.sliding_window = 10;
  EXPECT_EQ(DecodeStepBytes(m.args, 0, 1, 50, 4), 2.0 * 4 * 10 * 4);
}

}  // namespace
}  // namespace tmx
