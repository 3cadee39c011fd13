#include "recipes/models/moe.h"

#include <torch/torch.h>

#include <cmath>

#include "recipes/models/init.h"
#include "recipes/models/swiglu.h"

namespace tmx::models {
namespace {

// Uniform in +-1/sqrt(fan_in), as torch::nn::Linear and this decoder's Linear start.
torch::Tensor StackedWeight(int64_t experts, int64_t in, int64_t out, c10::TensorOptions options) {
  torch::Tensor w = torch::empty({experts, in, out}, options);
  if (w.is_meta()) return w;
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  UniformInit(w, -bound, bound);
  return w;
}

// Rows of x in the order `order` (a permutation of x's rows), whose backward takes the gradient's rows back
// through `inverse` (order's inverse): two gathers, where index_select's own backward scatters (an index_add
// over the rows, slow in bf16 on the CPU).
class PermuteRows : public torch::autograd::Function<PermuteRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& order, const torch::Tensor& inverse) {
    ctx->saved_data["inverse"] = inverse;
    return x.index_select(0, order);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor inverse = ctx->saved_data["inverse"].toTensor();
    return {grads[0].index_select(0, inverse), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

MoeRouting RouteTokens(const torch::Tensor& logits, int64_t top_k) {
  TORCH_CHECK(logits.dim() == 2, "RouteTokens: expected logits [tokens, experts], got ", logits.sizes());
  const int64_t experts = logits.size(1);
  TORCH_CHECK(top_k >= 1 && top_k <= experts, "RouteTokens: top_k ", top_k, " is outside [1, ", experts, "]");
  auto [top_logits, chosen] = torch::topk(logits, top_k, /*dim=*/1);
  // The scores are the chosen logits' sigmoid in float32, in the logits' dtype (Hugging Face and torchtune).
  const torch::Tensor top_scores = torch::sigmoid(top_logits.to(torch::kFloat)).to(logits.scalar_type());
  const torch::Tensor flat = chosen.reshape({-1});
  const torch::Tensor order = std::get<1>(torch::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  MoeRouting r;
  r.experts = chosen;
  r.order = order;
  r.inverse = torch::empty_like(order).scatter_(0, order, torch::arange(order.size(0), order.options()));
  r.tokens = torch::div(order, top_k, "floor");
  r.scores = top_scores.reshape({-1}).index_select(0, order);
  const torch::Tensor counts = torch::bincount(flat, /*weights=*/{}, /*minlength=*/experts).to(torch::kCPU);
  r.counts.assign(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + experts);
  return r;
}

GroupedExpertsImpl::GroupedExpertsImpl(int64_t dim, int64_t hidden, int64_t num_experts, c10::TensorOptions options,
                                       std::optional<LoraAdapterOptions> adapter)
    : num_experts_(num_experts), adapter_(adapter) {
  TORCH_CHECK(dim > 0 && hidden > 0 && num_experts > 0, "GroupedExperts: sizes must be positive, got dim ", dim,
              ", hidden ", hidden, ", experts ", num_experts);
  TORCH_CHECK(!adapter || !adapter->use_dora, "GroupedExperts: DoRA on experts is not implemented (torchtune has "
              "none either); use LoRA");
  options = options.requires_grad(false);
  gate_ = register_parameter("gate_proj", StackedWeight(num_experts, dim, hidden, options));
  down_ = register_parameter("down_proj", StackedWeight(num_experts, hidden, dim, options));
  up_ = register_parameter("up_proj", StackedWeight(num_experts, dim, hidden, options));
  if (!adapter_) return;
  const int64_t r = adapter_->rank;
  // A starts as LoRALinear's lora_a (uniform in +-1/sqrt(in)), B at zero: an adapted model starts as its base.
  gate_a_ = register_parameter("lora_gate_a", StackedWeight(num_experts, dim, r, options));
  gate_b_ = register_parameter("lora_gate_b", torch::zeros({num_experts, r, hidden}, options));
  down_a_ = register_parameter("lora_down_a", StackedWeight(num_experts, hidden, r, options));
  down_b_ = register_parameter("lora_down_b", torch::zeros({num_experts, r, dim}, options));
  up_a_ = register_parameter("lora_up_a", StackedWeight(num_experts, dim, r, options));
  up_b_ = register_parameter("lora_up_b", torch::zeros({num_experts, r, hidden}, options));
}

torch::Tensor GroupedExpertsImpl::Project(const torch::Tensor& x, int64_t expert, const torch::Tensor& w,
                                          const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor out = torch::matmul(x, w.select(0, expert));
  if (!adapter_ || !adapter_enabled_) return out;
  torch::Tensor in = x;
  if (adapter_->dropout > 0 && is_training()) in = torch::dropout(x, adapter_->dropout, /*train=*/true);
  const double scaling = adapter_->alpha / static_cast<double>(adapter_->rank);
  return out + torch::matmul(torch::matmul(in, a.select(0, expert)), b.select(0, expert)) * scaling;
}

torch::Tensor GroupedExpertsImpl::forward(const torch::Tensor& x, const std::vector<int64_t>& counts) {
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == num_experts_, "GroupedExperts: ", counts.size(),
              " counts for ", num_experts_, " experts");
  const std::vector<torch::Tensor> slices = x.split_with_sizes(counts, /*dim=*/0);
  std::vector<torch::Tensor> outs;
  outs.reserve(slices.size());
  for (int64_t e = 0; e < num_experts_; ++e) {
    const torch::Tensor& slice = slices[static_cast<size_t>(e)];
    if (slice.size(0) == 0) continue;
    const torch::Tensor h = SiluMul(Project(slice, e, gate_, gate_a_, gate_b_), Project(slice, e, up_, up_a_, up_b_));
    outs.push_back(Project(h, e, down_, down_a_, down_b_));
  }
  if (outs.empty()) return torch::zeros_like(x);
  return outs.size() == 1 ? outs.front() : torch::cat(outs, 0);
}

std::vector<torch::Tensor> GroupedExpertsImpl::AdapterTensors() const {
  if (!adapter_) return {};
  return {gate_a_, gate_b_, down_a_, down_b_, up_a_, up_b_};
}

std::vector<std::pair<torch::Tensor, torch::Tensor>> GroupedExpertsImpl::MergedBaseTensors() const {
  if (!adapter_) return {};
  const double scaling = adapter_->alpha / static_cast<double>(adapter_->rank);
  auto merged = [scaling](const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b) {
    torch::NoGradGuard no_grad;
    return (w.to(torch::kFloat) + torch::bmm(a.to(torch::kFloat), b.to(torch::kFloat)) * scaling).to(w.scalar_type());
  };
  return {{gate_, merged(gate_, gate_a_, gate_b_)},
          {down_, merged(down_, down_a_, down_b_)},
          {up_, merged(up_, up_a_, up_b_)}};
}

MoeRouterImpl::MoeRouterImpl(int64_t dim, int64_t num_experts, c10::TensorOptions options) {
  gate_ = register_module("gate", Linear(dim, num_experts, options));
}

MoeImpl::MoeImpl(const MoeOptions& o, c10::TensorOptions tensor_options, std::shared_ptr<torch::nn::Module> shared,
                 SharedForward shared_forward)
    : experts_per_token_(o.experts_per_token), shared_(std::move(shared)), shared_forward_(std::move(shared_forward)) {
  TORCH_CHECK(o.experts_per_token >= 1 && o.experts_per_token <= o.num_experts, "Moe: experts_per_token ",
              o.experts_per_token, " is outside [1, num_experts=", o.num_experts, "]");
  TORCH_CHECK(o.shared_expert == (shared_ != nullptr), "Moe: shared_expert is ", o.shared_expert,
              " but a shared expert was ", shared_ ? "" : "not ", "given");
  router_ = register_module("router", MoeRouter(o.dim, o.num_experts, tensor_options));
  experts_ = register_module("experts", GroupedExperts(o.dim, o.hidden, o.num_experts, tensor_options, o.adapter));
  if (shared_) register_module("shared_expert", shared_);
}

torch::Tensor MoeImpl::forward(const torch::Tensor& x) {
  const int64_t dim = x.size(-1);
  const torch::Tensor flat = x.reshape({-1, dim});
  const MoeRouting r = RouteTokens(router_(flat), experts_per_token_);
  last_routing_ = r;
  last_routing_.scores = r.scores.detach();  // kept for statistics: no hold on this step's graph
  // Each token's rows, one per chosen expert, in (token, choice) order, then sorted by expert; back after the
  // experts, summed over the choices.
  const int64_t k = experts_per_token_;
  const torch::Tensor per_choice = k == 1 ? flat : flat.repeat_interleave(k, /*dim=*/0);
  const torch::Tensor routed = PermuteRows::apply(per_choice, r.order, r.inverse) * r.scores.unsqueeze(1);
  const torch::Tensor expert_out = PermuteRows::apply(experts_(routed, r.counts), r.inverse, r.order);
  const torch::Tensor summed = k == 1 ? expert_out : expert_out.view({-1, k, dim}).sum(1);
  return (shared_ ? shared_forward_(flat) + summed : summed).view(x.sizes());
}

}  // namespace tmx::models
