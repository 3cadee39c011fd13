// Llama 4's mixture-of-experts layer, as torchtune's MoE (torchtune/modules/moe) builds it for llama4:
//
//   router:  logits = gate(x) [tokens, experts]; each token takes its top-k experts by logit, scored
//            sigmoid(logit) (in float32, cast back); the other experts get nothing
//   experts: each a SwiGLU MLP, down(silu(x gate) * (x up)), whose INPUT is the token scaled by its score
//   output:  shared_expert(x) + the sum of the chosen experts' outputs
//
// The experts run as one matrix product per expert over the tokens routed to it: tokens are sorted by expert
// (a stable sort of the routing), split into one contiguous slice per expert, and the slices' results go back to
// their tokens through the inverse permutation and are summed over each token's choices. Both permutations are
// gathers forward and backward (no scatter, which is slow in bf16 on the CPU). No loop over tokens.
//
// State-dict names are torchtune's: <layer>.mlp.router.gate.weight [experts, dim],
// <layer>.mlp.experts.gate_proj / up_proj [experts, dim, hidden], <layer>.mlp.experts.down_proj [experts,
// hidden, dim] (x W, not x W^T, as Hugging Face's gate_up_proj too), <layer>.mlp.shared_expert.w1/w2/w3.weight,
// and with LoRA (torchtune's LoRAGroupedExperts) <layer>.mlp.experts.lora_{gate,up,down}_{a,b}: A [experts, in,
// rank], B [experts, rank, out], the update x A B scaled by alpha / rank.
//
// The tokens' top-k is taken on the logits, as Hugging Face's Llama4Router does; torchtune takes it on the
// sigmoid scores, which is the same choice except where the scores round to equal values (saturated, or in bf16).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "recipes/models/lora.h"

namespace tmx::models {

// How the tokens of one batch go to the experts, sorted by expert (stable: tokens in order within an expert).
struct MoeRouting {
  torch::Tensor tokens;         // [tokens * k] long: the token each routed row reads
  torch::Tensor scores;         // [tokens * k] in the logits' dtype: the row's score
  torch::Tensor experts;        // [tokens, k] long: each token's chosen experts, best first
  torch::Tensor order;          // [tokens * k] long: row i of the sorted rows is (token, choice) row order[i]
  torch::Tensor inverse;        // [tokens * k] long: order's inverse permutation
  std::vector<int64_t> counts;  // [experts]: rows per expert
};

// Routes `logits` [tokens, experts] to each token's `top_k` experts. REQUIRES: 1 <= top_k <= experts.
MoeRouting RouteTokens(const torch::Tensor& logits, int64_t top_k);

// The experts of one layer: num_experts SwiGLU MLPs held as stacked weights, optionally with LoRA adapters
// (torchtune's GroupedExperts and LoRAGroupedExperts; no DoRA, no NF4 base, as there).
class GroupedExpertsImpl : public torch::nn::Module, public AdapterHolder {
 public:
  GroupedExpertsImpl(int64_t dim, int64_t hidden, int64_t num_experts, c10::TensorOptions options = {},
                     std::optional<LoraAdapterOptions> adapter = std::nullopt);
  // x [rows, dim] sorted by expert, `counts` rows per expert -> [rows, dim], row for row.
  torch::Tensor forward(const torch::Tensor& x, const std::vector<int64_t>& counts);

  int64_t num_experts() const { return num_experts_; }
  const torch::Tensor& gate_proj() const { return gate_; }
  const torch::Tensor& up_proj() const { return up_; }
  const torch::Tensor& down_proj() const { return down_; }

  // AdapterHolder
  std::vector<torch::Tensor> AdapterTensors() const override;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> MergedBaseTensors() const override;
  void set_adapter_enabled(bool on) override { adapter_enabled_ = on; }
  bool adapter_enabled() const override { return adapter_enabled_; }

 private:
  // One expert's x W (+ scaling x A B).
  torch::Tensor Project(const torch::Tensor& x, int64_t expert, const torch::Tensor& w, const torch::Tensor& a,
                        const torch::Tensor& b);
  int64_t num_experts_;
  std::optional<LoraAdapterOptions> adapter_;
  bool adapter_enabled_ = true;
  torch::Tensor gate_, up_, down_;
  torch::Tensor gate_a_, gate_b_, up_a_, up_b_, down_a_, down_b_;  // undefined without an adapter
};
TORCH_MODULE(GroupedExperts);

// The router's gate, kept in a module of its own for torchtune's name router.gate.weight.
class MoeRouterImpl : public torch::nn::Module {
 public:
  MoeRouterImpl(int64_t dim, int64_t num_experts, c10::TensorOptions options = {});
  torch::Tensor forward(const torch::Tensor& x) { return gate_(x); }  // [..., dim] -> logits [..., experts]

 private:
  Linear gate_{nullptr};
};
TORCH_MODULE(MoeRouter);

// What a mixture-of-experts layer is built from.
struct MoeOptions {
  int64_t dim = 0;
  int64_t hidden = 0;  // each expert's (and the shared expert's) width
  int64_t num_experts = 0;
  int64_t experts_per_token = 1;
  bool shared_expert = true;
  std::optional<LoraAdapterOptions> adapter;  // LoRA on the experts and the shared expert (apply_lora_to_mlp)
};

class MoeImpl : public torch::nn::Module {
 public:
  // The shared expert is the decoder's gated MLP (decoder.h's FeedForward), built there and handed in with its
  // forward; null `shared` when options.shared_expert is false.
  using SharedForward = std::function<torch::Tensor(const torch::Tensor&)>;
  MoeImpl(const MoeOptions& options, c10::TensorOptions tensor_options, std::shared_ptr<torch::nn::Module> shared,
          SharedForward shared_forward);
  // x [B, T, dim] -> [B, T, dim].
  torch::Tensor forward(const torch::Tensor& x);
  // The routing of the last forward (for tests and statistics).
  const MoeRouting& last_routing() const { return last_routing_; }
  GroupedExpertsImpl& experts() { return *experts_; }

 private:
  int64_t experts_per_token_;
  MoeRouter router_{nullptr};
  GroupedExperts experts_{nullptr};
  std::shared_ptr<torch::nn::Module> shared_;  // null without a shared expert
  SharedForward shared_forward_;
  MoeRouting last_routing_;
};
TORCH_MODULE(Moe);

}  // namespace tmx::models
