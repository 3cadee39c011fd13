// LoRA (low-rank adaptation, Hu et al. 2021) and DoRA (weight-decomposed LoRA, Liu et al. 2024) for the linear
// layers of the decoder (decoder.h), and the helpers a fine-tuning recipe needs around them: freezing the base
// model, listing the adapter parameters and folding the adapters back into plain weights for export.
//
// Parameter names follow torchtune's LoRALinear and DoRALinear so checkpoints interoperate:
//   <linear>.weight          [out, in]   the base weight
//   <linear>.bias            [out]       only on layers built with a bias (Qwen2's q/k/v projections)
//   <linear>.lora_a.weight   [rank, in]  kaiming-uniform initialised
//   <linear>.lora_b.weight   [out, rank] zero initialised, so an adapted model starts equal to its base
//   <linear>.magnitude       [out]       DoRA only: the row norms of W + (alpha/rank) B A, set from the base
//                                        weight by InitializeDoraMagnitude (after the base weights are loaded)
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "recipes/models/nf4.h"

namespace tmx::models {

// Which layers of a decoder get an adapter, and the adapter's shape. Mirrors torchtune's
// lora_attn_modules / apply_lora_to_mlp / apply_lora_to_output / lora_rank / lora_alpha / lora_dropout.
struct LoraArgs {
  // Attention projections to adapt: any subset of "q_proj", "k_proj", "v_proj", "output_proj", no repeats.
  std::vector<std::string> attn_modules;
  // Adapt the three MLP projections (w1, w2, w3) of every layer.
  bool apply_to_mlp = false;
  // Adapt the final output projection. Not allowed with tied embeddings (there is no separate output weight).
  bool apply_to_output = false;
  // Inner dimension r of the adapter. Must be > 0.
  int64_t rank = 8;
  // The adapter's output is scaled by alpha / rank. Must be > 0.
  double alpha = 16;
  // Dropout probability applied to the adapter's input in training mode. In [0, 1).
  double dropout = 0.0;
  // DoRA instead of LoRA: every adapted linear also learns a magnitude per output row (torchtune's use_dora).
  bool use_dora = false;
  // QLoRA: hold the base weights of every attention and MLP projection (adapted or not) as NF4, as torchtune's
  // quantize_base; embeddings, norms and the output projection stay in the model's dtype.
  bool quantize_base = false;
};

// The attention module names LoraArgs::attn_modules accepts, in canonical order.
const std::vector<std::string>& LoraAttnModuleNames();

// Checks `lora` on its own: known, distinct attn module names, rank > 0, alpha > 0, dropout in [0, 1), and at
// least one layer adapted. Returns InvalidArgument naming the bad field and value, and the allowed values.
Status ValidateLoraArgs(const LoraArgs& lora);

// Shape of the adapter on one linear layer.
struct LoraAdapterOptions {
  int64_t rank = 8;      // inner dimension r; > 0
  double alpha = 16;     // output scaled by alpha / rank
  double dropout = 0.0;  // dropout on the adapter input, training mode only
  bool use_dora = false;  // DoRA: also a trained magnitude per output row
};

// y = x W^T (+ b when built with a bias), plus (alpha/rank) * B(A(dropout(x))) when an adapter is attached.
// With DoRA (torchtune's DoRALinear) the sum is scaled per output row by magnitude / ||W + (alpha/rank) B A||
// (the row norm computed without gradient, as torchtune detaches it); like torchtune, the bias is scaled with
// the base output. Parameters are created directly with `options`, so a layer built on torch::kMeta allocates
// no memory. Weight and bias are initialised like torch::nn::Linear (uniform in +-1/sqrt(in)), drawing from the
// current torch RNG, and a DoRA magnitude from them. The adapter never trains the bias, which stays a plain
// (frozen under LoRA) parameter.
//
// With `quantize_base` (QLoRA, torchtune's LoRALinear(quantize_base=True) and FrozenNF4Linear), the base weight
// is held only as NF4 (nf4.h), quantised from its initialisation and from every SetBaseWeight, and dequantised
// on the fly in forward (LinearNf4: the input's gradient flows, the weight gets none). The parameter "weight"
// stays registered with its name, shape and dtype but lives on the meta device (no memory), so parameter
// names and counts are those of the unquantised model; read the values through BaseWeight() and write them
// through SetBaseWeight() (the checkpoint loader does). The bias stays in the model's dtype. DoRA over an NF4
// base (QDoRA) takes its row norms, and initial magnitude, from the dequantised base, as torchtune's DoRALinear
// does with quantize_base.
class LinearImpl : public torch::nn::Module {
 public:
  // REQUIRES: in_features > 0, out_features > 0, adapter->rank > 0 (checked; throws c10::Error).
  LinearImpl(int64_t in_features, int64_t out_features, c10::TensorOptions options = {},
             std::optional<LoraAdapterOptions> adapter = std::nullopt, bool bias = false,
             bool quantize_base = false);

  // x [..., in_features] -> [..., out_features].
  torch::Tensor forward(const torch::Tensor& x);

  // The registered parameter: a meta placeholder when quantized().
  const torch::Tensor& weight() const { return weight_; }
  bool quantized() const { return nf4_.has_value(); }
  // REQUIRES: quantized().
  const Nf4Tensor& nf4() const;
  // The base weight's values, detached: dequantised NF4 in the model's dtype, or the parameter itself.
  torch::Tensor BaseWeight() const;
  // Copies `w` (same shape; any dtype and device) into the base weight, quantising it when quantized(). Returns
  // InvalidArgument naming `name` for a shape that differs or that NF4 cannot hold.
  Status SetBaseWeight(const torch::Tensor& w, const std::string& name);
  // Undefined when the layer has no bias.
  const torch::Tensor& bias() const { return bias_; }
  bool has_adapter() const { return adapter_.has_value(); }
  // While off, forward is the base layer alone: the adapter (and DoRA's magnitude) is kept but not applied, as
  // torchtune's disable_adapter. On by default; see adapters_off.h for a scoped switch over a whole model.
  void set_adapter_enabled(bool on) { adapter_enabled_ = on; }
  bool adapter_enabled() const { return adapter_enabled_; }
  bool has_dora() const { return adapter_.has_value() && adapter_->use_dora; }
  // alpha / rank; 0 when there is no adapter.
  double adapter_scaling() const;
  // REQUIRES: has_adapter().
  const torch::Tensor& lora_a() const;
  const torch::Tensor& lora_b() const;
  // REQUIRES: has_dora().
  const torch::Tensor& magnitude() const;
  // Sets the magnitude to the row norms of W + (alpha/rank) B A (W dequantised when quantized()), so the layer's
  // output equals LoRA's (torchtune's initialize_dora_magnitude). Call after the base weights are loaded.
  // REQUIRES: has_dora(), not on meta.
  void InitializeDoraMagnitude();
  // LoRA: W + (alpha/rank) B A. DoRA: that times magnitude / its row norm. Detached, in the weight's dtype (formed
  // in float32). W itself when there is no adapter (detached, sharing its storage).
  torch::Tensor MergedWeight() const;
  // The bias the merged layer needs: DoRA scales it by magnitude / row norm as its forward does; otherwise the
  // bias itself (detached). Undefined when the layer has no bias.
  torch::Tensor MergedBias() const;

  // Quantisation-aware training (fake_quant.h): the base path computes with FakeQuantizeInt8PerToken(x) and
  // FakeQuantizeInt4PerGroup(W, group_size), as torchao's Int8DynActInt4WeightQATLinear; with a LoRA adapter as
  // torchtune's QATLoRALinear, whose adapter still reads x itself. Unlike QATLoRALinear (torchtune 0.6.1), a bias
  // is kept. REQUIRES: not quantized(), no DoRA, Int4GroupsFit(in_features, group_size) (checked; throws).
  void SetFakeQuantization(int64_t group_size);
  // The group size attached by SetFakeQuantization; 0 when none.
  int64_t fake_quant_group_size() const { return fake_quant_group_size_; }
  // Whether forward fake-quantises now: attached and not switched off (torchtune's fake_quant_after_n_steps
  // switches it off for the first steps).
  bool fake_quant_enabled() const { return fake_quant_group_size_ > 0 && fake_quant_enabled_; }
  // x W^T (+ bias) through the weight's form: NF4, int4, fake-quantised or plain; no adapter.
  torch::Tensor BaseForward(const torch::Tensor& x) const;
  void EnableFakeQuantization(bool enabled) { fake_quant_enabled_ = enabled; }

  // Post-training 8da4w quantisation (the quantize recipe, and generation from its checkpoint): the parameter
  // "weight" becomes the int8-held int4 codes of the current weight (not trained) and a buffer "scales" [out,
  // in / group_size] is added, as torchao's Int8DynActInt4WeightLinear holds them (fake_quant.h). Forward computes
  // FakeQuantizeInt8PerToken(x) times the weight dequantised in x's dtype: the QAT forward of the same weight,
  // value for value. REQUIRES: no adapter, not NF4, Int4GroupsFit(in_features, group_size) (checked; throws).
  void QuantizeInt4(int64_t group_size);
  bool int4() const { return int4_scales_.defined(); }

 private:
  torch::Tensor weight_;
  torch::Tensor bias_;
  std::optional<Nf4Tensor> nf4_;
  std::optional<LoraAdapterOptions> adapter_;
  bool adapter_enabled_ = true;
  // Plain (adapter-less) linears holding lora_a.weight and lora_b.weight; null without an adapter.
  std::shared_ptr<LinearImpl> lora_a_;
  std::shared_ptr<LinearImpl> lora_b_;
  torch::Tensor magnitude_;  // DoRA only
  int64_t fake_quant_group_size_ = 0;  // QAT: 0 = none
  torch::Tensor int4_scales_;          // QuantizeInt4: weight_ holds the codes
  bool fake_quant_enabled_ = true;

  // ||W + (alpha/rank) B A|| per output row, without gradient, in `dtype`.
  torch::Tensor WeightNorm(c10::ScalarType dtype) const;
  // DoRA's magnitude / WeightNorm in float32, what merging scales each output row by.
  torch::Tensor DoraRowScale() const;
};
TORCH_MODULE(Linear);

// A module that holds LoRA adapters in tensors of its own instead of LinearImpls (moe.h's grouped experts).
// FreezeBaseParameters, AdapterParameters, MergedStateDict and AdaptersOff ask it through this interface.
class AdapterHolder {
 public:
  virtual ~AdapterHolder() = default;
  // The adapter parameters (empty without adapters).
  virtual std::vector<torch::Tensor> AdapterTensors() const = 0;
  // Each adapted base parameter with the value it merges into (base + update), detached.
  virtual std::vector<std::pair<torch::Tensor, torch::Tensor>> MergedBaseTensors() const = 0;
  virtual void set_adapter_enabled(bool on) = 0;
  virtual bool adapter_enabled() const = 0;
};

// Calls InitializeDoraMagnitude on every DoRA linear of `m` (recursively); nothing for LoRA. A recipe calls it
// once the base weights are loaded, as torchtune does.
void InitializeDoraMagnitudes(torch::nn::Module& m);

// Sets requires_grad=false on every parameter of `m` (recursively) that is not a LoRA adapter parameter (A, B and
// DoRA's magnitude), and requires_grad=true on every adapter parameter.
void FreezeBaseParameters(torch::nn::Module& m);

// The LoRA adapter parameters of `m` with their state-dict names, in registration order. The tensors are the
// parameters themselves (not copies), so they can be handed to an optimizer.
std::vector<std::pair<std::string, torch::Tensor>> AdapterParameters(const torch::nn::Module& m);

// The linears of `m` whose base is NF4, keyed by the TensorImpl of their placeholder "weight" parameter.
std::unordered_map<const c10::TensorImpl*, LinearImpl*> QuantizedLinears(torch::nn::Module& m);

// Parameters of `m` held as NF4 (counted once each).
int64_t CountQuantizedParameters(const torch::nn::Module& m);

// Which linears quantisation-aware training fake-quantises (LinearImpl::SetFakeQuantization).
enum class FakeQuantScope {
  // torchao's Int8DynActInt4WeightQATQuantizer.prepare (torchtune's full QAT recipes): every linear whose
  // in_features the group size divides, the output projection included; the others stay plain, as torchao skips
  // them.
  kEveryLinear,
  // torchtune's swap_lora_linear_with_qat (qat_lora_finetune_distributed): the LoRA-adapted linears only; one the
  // group size does not divide is an error, as torchtune raises.
  kAdaptedLinears,
};

// Whether a linear named `name` (a layer's "q_proj" ... "w3", or "output") gets an adapter under `lora`.
bool Adapts(const LoraArgs& lora, const std::string& name);

// Whether fake quantisation in `scope` takes a linear of `in_features` inputs that is (or is not) `adapted`, with
// groups of `group_size`. kAdaptedLinears takes every adapted one (a group size that does not fit it is an error
// there); kEveryLinear those the group size fits.
bool FakeQuantizes(FakeQuantScope scope, bool adapted, int64_t in_features, int64_t group_size);

// Attaches fake quantisation in groups of `group_size` to the linears of `m` in `scope`. Returns how many linears
// got it, or InvalidArgument naming the first adapted linear (kAdaptedLinears) whose in_features `group_size` does
// not divide, or a linear that cannot take it (NF4 base, DoRA), with the fix.
StatusOr<int64_t> AttachFakeQuantization(torch::nn::Module& m, int64_t group_size, FakeQuantScope scope);

// LinearImpl::QuantizeInt4 on every linear of `m` whose in_features `group_size` divides (torchao's quantize_
// with int8_dynamic_activation_int4_weight skips the others), the output projection included. Returns how many,
// or InvalidArgument for a group size below 2 or a model with adapters or an NF4 base (merge it first).
StatusOr<int64_t> QuantizeInt4Linears(torch::nn::Module& m, int64_t group_size);

// Switches every attached fake quantisation of `m` on or off.
void EnableFakeQuantization(torch::nn::Module& m, bool enabled);

// The state dict of `m` with every adapter folded into its base weight and bias (see LinearImpl::MergedWeight,
// MergedBias) and the adapter entries dropped, so the names are those of the same model built without LoRA; NF4
// bases are saved dequantised in the model's dtype (torchtune's QLoRA checkpoints hold the same). Tensors are
// detached; unmerged entries share storage with the parameters, merged ones are new tensors.
std::vector<std::pair<std::string, torch::Tensor>> MergedStateDict(const torch::nn::Module& m);

}  // namespace tmx::models
