// The fused next-token loss against the plain one: the same value and gradients, chunked or not.
#include "recipes/loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "recipes/data/sample.h"
#include "recipes/models/llama.h"

namespace tmx::recipes {
namespace {

struct Inputs {
  torch::Tensor hidden, weight, labels;
};

Inputs Make(torch::Dtype dtype) {
  torch::manual_seed(11);
  Inputs in;
  in.hidden = torch::randn({3, 7, 16}).to(dtype).requires_grad_();
  in.weight = (torch::randn({50, 16}) * 0.3).to(dtype).requires_grad_();
  in.labels = torch::randint(0, 50, {3, 7}, torch::kLong);
  in.labels.index_put_({0, 3}, data::kIgnoreIndex);
  in.labels.index_put_({2, 1}, data::kIgnoreIndex);
  in.labels.index_put_({1, 0}, data::kIgnoreIndex);  // position 0's label is never predicted anyway
  return in;
}

TEST(LossTest, LinearLossMatchesTheLossOfTheLogitsInEveryChunking) {
  Inputs plain = Make(torch::kFloat);
  torch::Tensor expected = NextTokenLoss(at::linear(plain.hidden, plain.weight), plain.labels);
  (expected * 0.5).backward();  // a scaled loss, as gradient accumulation scales it
  // 50 classes: chunks of 1 row, 3 rows, and all 18 rows at once.
  for (int64_t chunk_elements : {int64_t{50}, int64_t{150}, int64_t{1} << 20}) {
    SCOPED_TRACE(chunk_elements);
    Inputs fused = Make(torch::kFloat);
    torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, chunk_elements);
    EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
    EXPECT_EQ(loss.scalar_type(), torch::kFloat);
    (loss * 0.5).backward();
    EXPECT_TRUE(torch::allclose(fused.hidden.grad(), plain.hidden.grad(), 1e-5, 1e-7));
    EXPECT_TRUE(torch::allclose(fused.weight.grad(), plain.weight.grad(), 1e-5, 1e-7));
    // The last position predicts nothing, so gets no gradient.
    EXPECT_EQ(fused.hidden.grad().select(1, 6).abs().max().item<float>(), 0.0f);
  }
}

TEST(LossTest, LinearLossInBf16StaysWithinRoundingOfTheLogitsLoss) {
  Inputs plain = Make(torch::kBFloat16);
  torch::Tensor expected = NextTokenLoss(at::linear(plain.hidden, plain.weight), plain.labels);
  expected.backward();
  Inputs fused = Make(torch::kBFloat16);
  torch::Tensor loss = NextTokenLinearLoss(fused.hidden, fused.weight, fused.labels, 150);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-3);
  EXPECT_EQ(fused.weight.grad().scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::allclose(fused.hidden.grad().to(torch::kFloat), plain.hidden.grad().to(torch::kFloat), 2e-2, 1e-3));
  EXPECT_TRUE(torch::allclose(fused.weight.grad().to(torch::kFloat), plain.weight.grad().to(torch::kFloat), 2e-2, 1e-3));
}

TEST(LossTest, WithoutGradModeNothingIsKeptForBackward) {
  Inputs in = Make(torch::kFloat);
  torch::Tensor expected = NextTokenLoss(at::linear(in.hidden, in.weight), in.labels);
  torch::NoGradGuard no_grad;
  torch::Tensor loss = NextTokenLinearLoss(in.hidden, in.weight, in.labels, 150);
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(), 1e-6);
  EXPECT_FALSE(loss.requires_grad());
}

TEST(LossTest, TheModelsLossFusesOnlyAPlainOutputProjection) {
  models::DecoderArgs args = models::LlamaTinyArgs();  // tied embeddings
  torch::manual_seed(2);
  models::Decoder tied(args);
  EXPECT_TRUE(tied->PlainOutputWeight().is_same(tied->named_parameters()["tok_embeddings.weight"]));
  torch::Tensor tokens = torch::randint(0, args.vocab_size, {2, 12}, torch::kLong);
  EXPECT_NEAR(ModelNextTokenLoss(*tied, tokens, tokens).item<double>(),
              NextTokenLoss(tied->forward(tokens), tokens).item<double>(), 1e-5);

  args.tie_word_embeddings = false;
  models::LoraArgs lora{{"q_proj"}, /*apply_to_mlp=*/false, /*apply_to_output=*/true, 4, 8, 0.0};
  models::Decoder adapted(args, lora);
  EXPECT_FALSE(adapted->PlainOutputWeight().defined());  // the adapter is part of the projection
  models::Decoder untied(args);
  EXPECT_TRUE(untied->PlainOutputWeight().is_same(untied->named_parameters()["output.weight"]));
  args.final_softcap = 30;
  models::Decoder capped(args);
  EXPECT_FALSE(capped->PlainOutputWeight().defined());  // the cap acts on the logits
  EXPECT_NEAR(ModelNextTokenLoss(*capped, tokens, tokens).item<double>(),
              NextTokenLoss(capped->forward(tokens), tokens).item<double>(), 1e-6);
}

}  // namespace
}  // namespace tmx::recipes
