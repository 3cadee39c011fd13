#include "recipes/models/checkpointing.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "recipes/models/llama.h"

namespace tmx::models {
namespace {

std::map<std::string, torch::Tensor> Grads(const torch::nn::Module& m) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : m.named_parameters()) {
    if (item.value().grad().defined()) grads[item.key()] = item.value().grad().clone();
  }
  return grads;
}

void ZeroGrads(torch::nn::Module& m) {
  for (auto& p : m.parameters()) p.mutable_grad() = torch::Tensor();
}

// Random next-token labels (the tied tiny model predicts its own input token almost surely, so using the
// inputs as labels would give vanishing gradients).
torch::Tensor Labels(const torch::Tensor& tokens) { return torch::randint(0, 512, tokens.sizes(), torch::kLong); }

// One loss.backward() of `model`, with the RNG seeded so dropout draws the same masks on every call.
std::map<std::string, torch::Tensor> StepGrads(Llama& model, const torch::Tensor& tokens, const torch::Tensor& labels,
                                               bool checkpointing, uint64_t seed = 1234) {
  ZeroGrads(*model);
  model->set_activation_checkpointing(checkpointing);
  torch::manual_seed(seed);
  torch::Tensor logits = model(tokens);
  torch::cross_entropy_loss(logits.flatten(0, 1), labels.flatten()).backward();
  return Grads(*model);
}

void ExpectSameGrads(const std::map<std::string, torch::Tensor>& a, const std::map<std::string, torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, grad] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    const double scale = grad.abs().max().item<double>();
    ASSERT_GT(scale, 1e-6) << name << ": gradient too small for the comparison to mean anything";
    EXPECT_TRUE(torch::allclose(grad, b.at(name), 1e-4, 1e-5 * scale))
        << name << ": max difference " << (grad - b.at(name)).abs().max().item<double>() << " of " << scale;
  }
}

// A tiny LoRA model with adapter dropout in training mode, its base frozen and its adapters drawn non-zero
// (lora_b so lora_a and dropout matter), from the current torch RNG.
Llama TinyLoraWithDropout() {
  LoraArgs lora{{"q_proj", "v_proj", "output_proj"}, /*apply_to_mlp=*/true, false, 4, 8, /*dropout=*/0.25};
  Llama model(LlamaTinyArgs(), lora);
  FreezeBaseParameters(*model);
  for (const auto& [name, p] : AdapterParameters(*model)) {
    torch::NoGradGuard no_grad;
    p.normal_(0, 0.1);
  }
  model->train();
  return model;
}

TEST(CheckpointingTest, FunctionGradientsMatchDirectEvaluation) {
  torch::manual_seed(0);
  torch::Tensor w = torch::randn({5, 5}, torch::requires_grad());
  torch::Tensor x = torch::randn({3, 5}, torch::requires_grad());
  auto fn = [w](const torch::Tensor& in) { return torch::tanh(torch::matmul(in, w)).pow(2); };

  fn(x).sum().backward();
  torch::Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.mutable_grad() = torch::Tensor();
  w.mutable_grad() = torch::Tensor();

  int calls = 0;
  torch::Tensor y = Checkpoint(
      [&](const torch::Tensor& in) {
        ++calls;
        return fn(in);
      },
      x, {w});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward();
  EXPECT_EQ(calls, 2);  // recomputed once in backward
  EXPECT_TRUE(torch::allclose(x.grad(), gx));
  EXPECT_TRUE(torch::allclose(w.grad(), gw));
}

TEST(CheckpointingTest, WorksWhenOnlyParametersRequireGrad) {
  torch::manual_seed(1);
  torch::Tensor w = torch::randn({4, 4}, torch::requires_grad());
  torch::Tensor x = torch::randn({2, 4});  // e.g. the output of a frozen embedding
  torch::Tensor y = Checkpoint([w](const torch::Tensor& in) { return torch::matmul(in, w).relu(); }, x, {w});
  ASSERT_TRUE(y.requires_grad());
  // autograd::grad works as well as backward().
  torch::Tensor gw = torch::autograd::grad({y.sum()}, {w})[0];
  torch::Tensor expected = torch::autograd::grad({torch::matmul(x, w).relu().sum()}, {w})[0];
  EXPECT_TRUE(torch::allclose(gw, expected));
}

TEST(CheckpointingTest, NoGraphWithoutGrad) {
  torch::Tensor w = torch::randn({4, 4}, torch::requires_grad());
  torch::Tensor x = torch::randn({2, 4});
  int calls = 0;
  auto fn = [&](const torch::Tensor& in) {
    ++calls;
    return torch::matmul(in, w);
  };
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(Checkpoint(fn, x, {w}).requires_grad());
  }
  torch::Tensor frozen = w.detach();
  EXPECT_FALSE(Checkpoint([&](const torch::Tensor& in) { return torch::matmul(in, frozen); }, x, {frozen})
                   .requires_grad());
  EXPECT_EQ(calls, 1);
}

TEST(CheckpointingTest, InPlaceChangeBeforeBackwardIsDetected) {
  torch::Tensor w = torch::randn({3, 3}, torch::requires_grad());
  torch::Tensor x = torch::randn({2, 3}, torch::requires_grad());
  torch::Tensor y = Checkpoint([w](const torch::Tensor& in) { return torch::matmul(in, w); }, x, {w});
  {
    torch::NoGradGuard no_grad;
    w.add_(1);  // e.g. an optimizer step between forward and backward
  }
  EXPECT_THROW(y.sum().backward(), c10::Error);
}

TEST(CheckpointingTest, TinyLlamaGradientsUnchanged) {
  torch::manual_seed(2);
  Llama model(LlamaTinyArgs());
  torch::Tensor tokens = torch::randint(0, 512, {2, 16}, torch::kLong);
  torch::Tensor labels = Labels(tokens);
  const auto plain = StepGrads(model, tokens, labels, /*checkpointing=*/false);
  EXPECT_EQ(plain.size(), model->parameters().size());
  const auto checkpointed = StepGrads(model, tokens, labels, /*checkpointing=*/true);
  ExpectSameGrads(plain, checkpointed);
}

// LoRA with a frozen base: the layer inputs do not require grad, and adapter dropout must replay identically.
TEST(CheckpointingTest, TinyLoraWithDropoutGradientsUnchanged) {
  torch::manual_seed(3);
  Llama model = TinyLoraWithDropout();
  torch::Tensor tokens = torch::randint(0, 512, {2, 16}, torch::kLong);
  torch::Tensor labels = Labels(tokens);
  const auto plain = StepGrads(model, tokens, labels, /*checkpointing=*/false);
  EXPECT_EQ(plain.size(), AdapterParameters(*model).size());
  const auto checkpointed = StepGrads(model, tokens, labels, /*checkpointing=*/true);
  ExpectSameGrads(plain, checkpointed);

  // A different dropout draw gives different gradients, so the equality above is not vacuous.
  const auto other = StepGrads(model, tokens, labels, /*checkpointing=*/true, /*seed=*/99);
  const std::string name = "layers.0.attn.q_proj.lora_a.weight";
  EXPECT_FALSE(torch::allclose(other.at(name), plain.at(name), 1e-3, 0));
}

// Offloading: the checkpoint keeps no reference to its input's storage (the host copy stands in for it), and
// the gradients are those of the kept input. On a CUDA device too, where the machine has one.
void ExpectOffloadedInputIsReleasedAndGradientsUnchanged(const torch::Device& device) {
  SCOPED_TRACE(device.str());
  torch::manual_seed(4);
  torch::Tensor w = torch::randn({6, 6}, torch::TensorOptions().device(device).requires_grad(true));
  auto fn = [w](const torch::Tensor& in) { return torch::tanh(torch::matmul(in, w)).pow(2); };
  torch::Tensor x0 = torch::randn({4, 6}, torch::TensorOptions().device(device));
  auto grads = [&](bool offload, bool drop_input_first) {
    w.mutable_grad() = torch::Tensor();
    torch::Tensor x = (x0 * 1.0).requires_grad_(false);  // a fresh storage of our own
    c10::weak_intrusive_ptr<c10::StorageImpl> storage(x.storage().getWeakStorageImpl());
    torch::Tensor y = Checkpoint(fn, x, {w}, offload);
    if (drop_input_first) {
      x = torch::Tensor();
      // Offloaded, nothing holds the input's storage any more; kept, the checkpoint does.
      EXPECT_EQ(storage.expired(), offload);
    }
    y.sum().backward();
    return w.grad().clone();
  };
  const torch::Tensor kept = grads(/*offload=*/false, true);
  const torch::Tensor offloaded = grads(/*offload=*/true, true);
  EXPECT_GT(kept.abs().max().item<double>(), 1e-3);
  EXPECT_TRUE(torch::equal(kept.cpu(), offloaded.cpu()));
}

TEST(CheckpointingTest, OffloadedInputIsReleasedAndGradientsUnchanged) {
  ExpectOffloadedInputIsReleasedAndGradientsUnchanged(torch::kCPU);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no cuda device on this machine: checked on cpu only";
  ExpectOffloadedInputIsReleasedAndGradientsUnchanged(torch::Device(torch::kCUDA, 0));
}

// The decoder passes offloading to every checkpointed layer: a tiny LoRA model with dropout (replayed) gets
// the gradients it gets with the inputs kept, and offloading without checkpointing changes nothing.
TEST(CheckpointingTest, TinyLoraOffloadedGradientsUnchanged) {
  torch::manual_seed(5);
  Llama model = TinyLoraWithDropout();
  torch::Tensor tokens = torch::randint(0, 512, {2, 16}, torch::kLong);
  torch::Tensor labels = Labels(tokens);
  const auto kept = StepGrads(model, tokens, labels, /*checkpointing=*/true);
  model->set_activation_offloading(true);
  EXPECT_TRUE(model->activation_offloading());
  const auto offloaded = StepGrads(model, tokens, labels, /*checkpointing=*/true);
  ExpectSameGrads(kept, offloaded);
  const auto plain = StepGrads(model, tokens, labels, /*checkpointing=*/false);
  ExpectSameGrads(kept, plain);
}

}  // namespace
}  // namespace tmx::models
