#include "recipes/models/lora.h"

#include "recipes/models/fake_quant.h"
#include "recipes/models/init.h"
#include "recipes/models/scaled_mm.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace tmx::models {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean 'x'?)" for a likely misspelling or another library's name, else "".
std::string Suggestion(const std::string& name) {
  // Hugging Face spells the attention output projection o_proj; it is one edit from q_proj, so map it first.
  if (name == "o_proj") return " (did you mean 'output_proj'?)";
  const std::string* best = nullptr;
  size_t best_distance = 3;  // suggest only names within two edits
  for (const std::string& allowed : LoraAttnModuleNames()) {
    const size_t d = EditDistance(name, allowed);
    if (d < best_distance) {
      best_distance = d;
      best = &allowed;
    }
  }
  return best ? " (did you mean '" + *best + "'?)" : "";
}

// y = x W^T (+ bias) + scale (x A^T) B^T with the base (W, bias) frozen, x 2-D: LoRA's product as one autograd
// node. Autograd of the composite gives the input's gradient as two products and a separate pass adding them
// ([tokens, in] read twice and written once, 70 ms of a 1B LoRA step for w2's input alone); here the adapter's
// product accumulates into the base's in place (addmm_ with beta 1), and the scale is each product's alpha
// (no [tokens, rank] or [out, rank] multiply). Saved: x, A x and the three weights, as the composite saves.
class LoraProduct : public torch::autograd::Function<LoraProduct> {
 public:
  // `bias` (frozen, so no input of the node) may be undefined.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& a, const torch::Tensor& b, double scale,
                               const std::optional<torch::Tensor>& bias) {
    torch::Tensor ax = at::mm(x, a.t());
    torch::Tensor out = bias && bias->defined() ? at::addmm(*bias, x, w.t()) : at::mm(x, w.t());
    out.addmm_(ax, b.t(), 1, scale);
    ctx->save_for_backward({x, w, a, b, ax});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &a = saved[2], &b = saved[3], &ax = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const torch::Tensor& g = grads[0];
    const bool need_x = ctx->needs_input_grad(0), need_a = ctx->needs_input_grad(2), need_b = ctx->needs_input_grad(3);
    torch::Tensor grad_x, grad_a, grad_b;
    if (need_b) grad_b = ScaledMm(g.t(), ax, scale);  // [out, rank]
    if (need_x || need_a) {
      const torch::Tensor g_ax = ScaledMm(g, b, scale);  // [tokens, rank]
      if (need_a) grad_a = at::mm(g_ax.t(), x);          // [rank, in]
      if (need_x) grad_x = at::mm(g, w).addmm_(g_ax, a);  // [tokens, in]: the base's and the adapter's, one result
    }
    return {grad_x, torch::Tensor(), grad_a, grad_b, torch::Tensor(), torch::Tensor()};
  }
};

std::string Number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Calls fn(name, module) for every module below `root` (not `root` itself), depth first in registration order.
template <typename Fn>
void ForEachSubmodule(const torch::nn::Module& root, Fn&& fn) {
  for (const auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    fn(item.key(), *item.value());
  }
}

// The adapter parameters of `m` (including `m` itself when it is an adapted LinearImpl), keyed by TensorImpl.
std::unordered_set<const c10::TensorImpl*> AdapterTensorImpls(const torch::nn::Module& m) {
  std::unordered_set<const c10::TensorImpl*> impls;
  auto collect = [&impls](const torch::nn::Module& module) {
    if (const auto* holder = dynamic_cast<const AdapterHolder*>(&module)) {
      for (const torch::Tensor& t : holder->AdapterTensors()) impls.insert(t.unsafeGetTensorImpl());
    }
    const auto* linear = dynamic_cast<const LinearImpl*>(&module);
    if (linear == nullptr || !linear->has_adapter()) return;
    impls.insert(linear->lora_a().unsafeGetTensorImpl());
    impls.insert(linear->lora_b().unsafeGetTensorImpl());
    if (linear->has_dora()) impls.insert(linear->magnitude().unsafeGetTensorImpl());
  };
  collect(m);
  ForEachSubmodule(m, [&collect](const std::string&, const torch::nn::Module& module) { collect(module); });
  return impls;
}

}  // namespace

const std::vector<std::string>& LoraAttnModuleNames() {
  static const std::vector<std::string> kNames = {"q_proj", "k_proj", "v_proj", "output_proj"};
  return kNames;
}

Status ValidateLoraArgs(const LoraArgs& lora) {
  const auto& allowed = LoraAttnModuleNames();
  std::unordered_set<std::string> seen;
  for (const std::string& name : lora.attn_modules) {
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      return Status::InvalidArgument("lora.attn_modules: unknown module '" + name + "'" + Suggestion(name) +
                                     "; allowed: " + JoinNames(allowed));
    }
    if (!seen.insert(name).second) {
      return Status::InvalidArgument("lora.attn_modules: '" + name + "' is listed twice; list each module once");
    }
  }
  if (lora.rank <= 0) {
    return Status::InvalidArgument("lora.rank: must be a positive integer, got " + std::to_string(lora.rank));
  }
  if (!(lora.alpha > 0) || !std::isfinite(lora.alpha)) {
    return Status::InvalidArgument("lora.alpha: must be a positive number, got " + Number(lora.alpha));
  }
  if (!(lora.dropout >= 0 && lora.dropout < 1)) {
    return Status::InvalidArgument("lora.dropout: must be in [0, 1), got " + Number(lora.dropout));
  }
  if (lora.attn_modules.empty() && !lora.apply_to_mlp && !lora.apply_to_output) {
    return Status::InvalidArgument("lora: no layer is adapted; set attn_modules (a subset of " + JoinNames(allowed) +
                                   "), apply_to_mlp or apply_to_output");
  }
  return Status::OK();
}

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, c10::TensorOptions options,
                       std::optional<LoraAdapterOptions> adapter, bool bias, bool quantize_base)
    : adapter_(adapter) {
  TORCH_CHECK(in_features > 0 && out_features > 0, "Linear: expected positive sizes, got in_features=", in_features,
              ", out_features=", out_features);
  options = options.requires_grad(false);
  torch::Tensor weight = torch::empty({out_features, in_features}, options);
  {
    torch::NoGradGuard no_grad;
    // torch::nn::Linear's default: kaiming_uniform(a=sqrt(5)), i.e. U(-1/sqrt(in), 1/sqrt(in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    UniformInit(weight, -bound, bound);
  }
  if (quantize_base) {
    // On the meta device (counting only) the NF4 tensors stay empty.
    if (!options.device().is_meta()) nf4_ = QuantizeNf4(weight, "weight");
    else nf4_ = Nf4Tensor{{out_features, in_features}, weight.scalar_type()};
    weight = torch::empty({out_features, in_features}, options.device(torch::kMeta));
  }
  weight_ = register_parameter("weight", weight, /*requires_grad=*/!quantize_base);
  if (bias) {
    bias_ = register_parameter("bias", torch::empty({out_features}, options));
    torch::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    UniformInit(bias_, -bound, bound);
  }
  if (adapter_) {
    TORCH_CHECK(adapter_->rank > 0, "Linear: expected a positive LoRA rank, got ", adapter_->rank);
    lora_a_ = register_module("lora_a", std::make_shared<LinearImpl>(in_features, adapter_->rank, options));
    lora_b_ = register_module("lora_b", std::make_shared<LinearImpl>(adapter_->rank, out_features, options));
    torch::NoGradGuard no_grad;
    lora_b_->weight_.zero_();
  }
  if (has_dora()) {
    magnitude_ = register_parameter("magnitude", torch::empty({out_features}, options));
    if (!options.device().is_meta()) InitializeDoraMagnitude();
  }
}

torch::Tensor LinearImpl::BaseForward(const torch::Tensor& x) const {
  if (nf4_) {
    torch::Tensor out = LinearNf4(x, *nf4_);
    return bias_.defined() ? out + bias_ : out;
  }
  if (int4()) {
    return at::linear(FakeQuantizeInt8PerToken(x), DequantizeInt4PerGroup(weight_, int4_scales_, x.scalar_type()), bias_);
  }
  if (fake_quant_enabled()) {
    return at::linear(FakeQuantizeInt8PerToken(x), FakeQuantizeInt4PerGroup(weight_, fake_quant_group_size_), bias_);
  }
  return at::linear(x, weight_, bias_);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  if (!adapter_ || !adapter_enabled_) return BaseForward(x);
  const LinearImpl& b = *lora_b_;
  const bool plain_b = !b.quantized() && !b.int4() && !b.fake_quant_enabled() && !b.bias_.defined() &&
                       b.weight_.scalar_type() == x.scalar_type();
  // A fake-quantised base (QAT) keeps torchtune's QATLoRALinear sum, which its fixture matches value for value.
  const bool fused = !adapter_->use_dora && plain_b && !fake_quant_enabled();
  // Fused: in 2-D, so that the in-place sum below is on the base's product itself, not on a view of it.
  const torch::Tensor input = fused ? x.reshape({-1, x.size(-1)}) : x;
  const bool dropped = adapter_->dropout > 0 && is_training();
  const torch::Tensor adapter_in = dropped ? torch::dropout(input, adapter_->dropout, true) : input;
  const LinearImpl& a = *lora_a_;
  const bool plain_a = !a.quantized() && !a.int4() && !a.fake_quant_enabled() && !a.bias_.defined() &&
                       a.weight_.scalar_type() == x.scalar_type();
  const bool frozen_dense_base = !quantized() && !int4() && weight_.scalar_type() == x.scalar_type() &&
                                 !weight_.requires_grad() && !(bias_.defined() && bias_.requires_grad());
  if (fused) {
    // The adapter's second product accumulated into the base's output in place: addmm_(A x, B^T, beta 1, alpha
    // scale) on the [tokens, out] product, which no backward needs (the base is frozen and only its input's
    // gradient is taken), so there is no [tokens, out] temporary, no copy of the base into a new result and no
    // separate scale and add passes (benchmarks/lora_linear_benchmark.cc). A dense frozen base without dropout
    // is one LoraProduct node, whose backward sums the input's two gradients in one product as well.
    torch::Tensor out;
    if (plain_a && frozen_dense_base && !dropped) {
      out = LoraProduct::apply(input, weight_, a.weight_, b.weight_, adapter_scaling(),
                               std::optional<torch::Tensor>(bias_));
    } else {
      out = BaseForward(input);
      out.addmm_(lora_a_->forward(adapter_in), b.weight_.t(), 1, adapter_scaling());
    }
    std::vector<int64_t> sizes = x.sizes().vec();
    sizes.back() = out.size(-1);
    return out.view(sizes);
  }
  torch::Tensor out = BaseForward(input);
  torch::Tensor lora_out = lora_b_->forward(lora_a_->forward(adapter_in));
  if (!adapter_->use_dora) return out + adapter_scaling() * lora_out;
  // torchtune's DoRALinear, term for term: (m/|W'| - 1) * base + m/|W'| * lora * scale, plus base.
  torch::Tensor scale = magnitude_ / WeightNorm(x.scalar_type());
  return (scale - 1) * out + scale * lora_out * adapter_scaling() + out;
}

torch::Tensor LinearImpl::WeightNorm(c10::ScalarType dtype) const {
  torch::NoGradGuard no_grad;
  torch::Tensor delta = torch::matmul(lora_b().to(dtype), lora_a().to(dtype));
  return at::linalg_vector_norm(BaseWeight().to(dtype) + adapter_scaling() * delta, 2, {1});
}

const torch::Tensor& LinearImpl::magnitude() const {
  TORCH_CHECK(has_dora(), "Linear::magnitude: this layer has no DoRA adapter");
  return magnitude_;
}

void LinearImpl::InitializeDoraMagnitude() {
  TORCH_CHECK(has_dora(), "Linear::InitializeDoraMagnitude: this layer has no DoRA adapter");
  const bool base_on_meta = nf4_ ? !nf4_->quantized_data.defined() : weight_.is_meta();
  TORCH_CHECK(!base_on_meta && !lora_a().is_meta() && !lora_b().is_meta(),
              "Linear::InitializeDoraMagnitude: the weights are still on the meta device; load them first");
  torch::NoGradGuard no_grad;
  magnitude_.copy_(WeightNorm(lora_a().scalar_type()));
}

void LinearImpl::SetFakeQuantization(int64_t group_size) {
  TORCH_CHECK(!quantized(), "Linear::SetFakeQuantization: an NF4 base cannot also be fake-quantised");
  TORCH_CHECK(!has_dora(), "Linear::SetFakeQuantization: DoRA layers are not fake-quantised");
  TORCH_CHECK(Int4GroupsFit(weight_.size(1), group_size), "Linear::SetFakeQuantization: in_features ",
              weight_.size(1), " is not a multiple of the group size ", group_size);
  fake_quant_group_size_ = group_size;
  fake_quant_enabled_ = true;
}

void LinearImpl::QuantizeInt4(int64_t group_size) {
  TORCH_CHECK(!quantized() && !has_adapter() && !int4(), "Linear::QuantizeInt4: only a plain linear is quantised");
  TORCH_CHECK(Int4GroupsFit(weight_.size(1), group_size), "Linear::QuantizeInt4: in_features ", weight_.size(1),
              " is not a multiple of the group size ", group_size);
  Int4Weight q = QuantizeInt4PerGroup(weight_, group_size);
  torch::NoGradGuard no_grad;
  weight_.requires_grad_(false);
  weight_.set_data(q.codes);
  int4_scales_ = register_buffer("scales", q.scales);
  fake_quant_group_size_ = 0;
}

double LinearImpl::adapter_scaling() const {
  return adapter_ ? adapter_->alpha / static_cast<double>(adapter_->rank) : 0.0;
}

const torch::Tensor& LinearImpl::lora_a() const {
  TORCH_CHECK(adapter_, "Linear::lora_a: this layer has no LoRA adapter");
  return lora_a_->weight();
}

const torch::Tensor& LinearImpl::lora_b() const {
  TORCH_CHECK(adapter_, "Linear::lora_b: this layer has no LoRA adapter");
  return lora_b_->weight();
}

const Nf4Tensor& LinearImpl::nf4() const {
  TORCH_CHECK(nf4_, "Linear::nf4: this layer's base is not quantised");
  return *nf4_;
}

torch::Tensor LinearImpl::BaseWeight() const { return nf4_ ? nf4_->Dequantize() : weight_.detach(); }

Status LinearImpl::SetBaseWeight(const torch::Tensor& w, const std::string& name) {
  if (!w.sizes().equals(weight_.sizes())) {
    return Status::InvalidArgument(name + ": shape " + c10::str(w.sizes()) + " given, " + c10::str(weight_.sizes()) +
                                   " in the model");
  }
  torch::NoGradGuard no_grad;
  if (!nf4_) {
    weight_.copy_(w);
    return Status::OK();
  }
  TM_RETURN_IF_ERROR(CheckNf4Shape(name, w.sizes()));
  // Quantised in the model's dtype on the layer's device, as torchtune's copy into an NF4Tensor in a model
  // built in that dtype.
  const c10::Device device = nf4_->quantized_data.defined() ? nf4_->quantized_data.device() : w.device();
  nf4_ = QuantizeNf4(w.to(device, weight_.scalar_type()), name);
  return Status::OK();
}

torch::Tensor LinearImpl::MergedWeight() const {
  torch::NoGradGuard no_grad;
  if (!adapter_) return BaseWeight();
  torch::Tensor base = BaseWeight();
  torch::Tensor delta = torch::matmul(lora_b().to(torch::kFloat), lora_a().to(torch::kFloat));
  torch::Tensor merged = base.to(torch::kFloat) + adapter_scaling() * delta;
  if (has_dora()) merged = merged * DoraRowScale().unsqueeze(1);
  return merged.to(base.scalar_type());
}

torch::Tensor LinearImpl::MergedBias() const {
  torch::NoGradGuard no_grad;
  if (!bias_.defined() || !has_dora()) return bias_.defined() ? bias_.detach() : bias_;
  return (bias_.to(torch::kFloat) * DoraRowScale()).to(bias_.scalar_type());
}

torch::Tensor LinearImpl::DoraRowScale() const { return magnitude_.to(torch::kFloat) / WeightNorm(torch::kFloat); }

void InitializeDoraMagnitudes(torch::nn::Module& m) {
  auto init = [](torch::nn::Module& module) {
    auto* linear = dynamic_cast<LinearImpl*>(&module);
    if (linear != nullptr && linear->has_dora()) linear->InitializeDoraMagnitude();
  };
  init(m);
  for (const auto& module : m.modules(/*include_self=*/false)) init(*module);
}

void FreezeBaseParameters(torch::nn::Module& m) {
  const auto adapter = AdapterTensorImpls(m);
  for (torch::Tensor& p : m.parameters()) {
    p.requires_grad_(adapter.count(p.unsafeGetTensorImpl()) > 0);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> AdapterParameters(const torch::nn::Module& m) {
  const auto adapter = AdapterTensorImpls(m);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters()) {
    if (adapter.count(item.value().unsafeGetTensorImpl()) > 0) out.emplace_back(item.key(), item.value());
  }
  return out;
}

std::unordered_map<const c10::TensorImpl*, LinearImpl*> QuantizedLinears(torch::nn::Module& m) {
  std::unordered_map<const c10::TensorImpl*, LinearImpl*> out;
  for (const auto& item : m.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    if (linear != nullptr && linear->quantized()) out[linear->weight().unsafeGetTensorImpl()] = linear;
  }
  return out;
}

int64_t CountQuantizedParameters(const torch::nn::Module& m) {
  int64_t total = 0;
  auto count = [&total](const torch::nn::Module& module) {
    const auto* linear = dynamic_cast<const LinearImpl*>(&module);
    if (linear != nullptr && linear->quantized()) total += linear->weight().numel();
  };
  count(m);
  ForEachSubmodule(m, [&count](const std::string&, const torch::nn::Module& module) { count(module); });
  return total;
}

bool Adapts(const LoraArgs& lora, const std::string& name) {
  if (name == "w1" || name == "w2" || name == "w3") return lora.apply_to_mlp;
  if (name == "output") return lora.apply_to_output;
  return std::find(lora.attn_modules.begin(), lora.attn_modules.end(), name) != lora.attn_modules.end();
}

bool FakeQuantizes(FakeQuantScope scope, bool adapted, int64_t in_features, int64_t group_size) {
  // torchao leaves a linear the group size does not fit plain; torchtune's QAT LoRA layers refuse it.
  return scope == FakeQuantScope::kAdaptedLinears ? adapted : Int4GroupsFit(in_features, group_size);
}

StatusOr<int64_t> AttachFakeQuantization(torch::nn::Module& m, int64_t group_size, FakeQuantScope scope) {
  if (group_size < 2) {
    return Status::InvalidArgument("quantizer.groupsize: " + std::to_string(group_size) +
                                   " is too small; int4 weight groups need at least 2 inputs (torchtune uses 256)");
  }
  std::vector<std::pair<std::string, LinearImpl*>> chosen;
  for (const auto& item : m.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    const std::string& name = item.key();
    if (linear == nullptr) continue;
    const auto ends_with = [&name](const char* tail) {
      const std::string t = tail;
      return name.size() >= t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
    };
    if (ends_with("lora_a") || ends_with("lora_b")) continue;  // an adapter's own factors train unquantised
    const int64_t in = linear->weight().size(1);
    if (!FakeQuantizes(scope, linear->has_adapter(), in, group_size)) continue;
    if (scope == FakeQuantScope::kAdaptedLinears) {
      if (!Int4GroupsFit(in, group_size)) {
        return Status::InvalidArgument("quantizer.groupsize: " + std::to_string(group_size) + " does not divide " +
                                       name + "'s " + std::to_string(in) +
                                       " inputs; choose a group size that divides every adapted layer's input "
                                       "width (the model's dim and hidden_dim)");
      }
    }
    if (linear->quantized() || linear->has_dora()) {
      return Status::InvalidArgument(name + ": quantisation-aware training fake-quantises plain or LoRA linears, not " +
                                     std::string(linear->quantized() ? "an NF4 base (QLoRA)" : "DoRA") +
                                     "; set model.quantize_base=False / use_dora=False");
    }
    chosen.emplace_back(name, linear);
  }
  for (auto& [name, linear] : chosen) linear->SetFakeQuantization(group_size);
  return static_cast<int64_t>(chosen.size());
}

StatusOr<int64_t> QuantizeInt4Linears(torch::nn::Module& m, int64_t group_size) {
  if (group_size < 2) {
    return Status::InvalidArgument("quantizer.groupsize: " + std::to_string(group_size) +
                                   " is too small; int4 weight groups need at least 2 inputs (torchtune uses 256)");
  }
  std::vector<LinearImpl*> chosen;
  for (const auto& item : m.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    auto* linear = dynamic_cast<LinearImpl*>(item.value().get());
    if (linear == nullptr) continue;
    if (linear->has_adapter() || linear->quantized()) {
      return Status::InvalidArgument(item.key() + ": int4 quantisation takes plain linears, not " +
                                     (linear->quantized() ? "an NF4 base" : "LoRA adapters") +
                                     "; quantise the merged model (the fine-tuning recipes save it merged)");
    }
    if (Int4GroupsFit(linear->weight().size(1), group_size)) chosen.push_back(linear);
  }
  for (LinearImpl* linear : chosen) linear->QuantizeInt4(group_size);
  return static_cast<int64_t>(chosen.size());
}

void EnableFakeQuantization(torch::nn::Module& m, bool enabled) {
  for (const auto& item : m.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    if (auto* linear = dynamic_cast<LinearImpl*>(item.value().get())) linear->EnableFakeQuantization(enabled);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> MergedStateDict(const torch::nn::Module& m) {
  // Base weights (and biases) of adapted or quantised linears, by TensorImpl, with what they merge (or
  // dequantise) into.
  std::unordered_map<const c10::TensorImpl*, std::function<torch::Tensor()>> adapted;
  auto collect = [&adapted](const torch::nn::Module& module) {
    if (const auto* holder = dynamic_cast<const AdapterHolder*>(&module)) {
      for (const auto& [base, merged] : holder->MergedBaseTensors()) {
        adapted[base.unsafeGetTensorImpl()] = [merged = merged] { return merged; };
      }
    }
    const auto* linear = dynamic_cast<const LinearImpl*>(&module);
    if (linear == nullptr || !(linear->has_adapter() || linear->quantized())) return;
    adapted[linear->weight().unsafeGetTensorImpl()] = [linear] { return linear->MergedWeight(); };
    if (linear->has_adapter() && linear->bias().defined()) {
      adapted[linear->bias().unsafeGetTensorImpl()] = [linear] { return linear->MergedBias(); };
    }
  };
  collect(m);
  ForEachSubmodule(m, [&collect](const std::string&, const torch::nn::Module& module) { collect(module); });
  const auto adapter = AdapterTensorImpls(m);

  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : m.named_parameters()) {
    const c10::TensorImpl* impl = item.value().unsafeGetTensorImpl();
    if (adapter.count(impl) > 0) continue;
    auto it = adapted.find(impl);
    out.emplace_back(item.key(), it != adapted.end() ? it->second() : item.value().detach());
  }
  for (const auto& item : m.named_buffers()) out.emplace_back(item.key(), item.value().detach());
  return out;
}

}  // namespace tmx::models
