#include "recipes/distributed/sharded_layers.h"

#include <algorithm>

#include <torch/torch.h>

#include "recipes/distributed/data_parallel.h"
#include "recipes/models/checkpointing.h"

namespace tmx::recipes {

// The weights of one transformer layer, as two flat groups (trained, frozen), each sharded over the ranks.
struct ShardedLayers::Unit {
  struct Flat {
    FlatLayout layout;  // the layer's parameters of this group (their data empty between uses)
    at::Tensor shard;   // [shard_size] this rank's part of the flat weights
  };
  ProcessGroup* group = nullptr;
  std::shared_ptr<models::TransformerLayerImpl> layer;
  Flat trained, frozen;
  bool gathered = false;
  // The layer's other inputs for the next ShardedLayerFunction::apply (no gradient; the document ids may be
  // undefined, which the tensor arguments of a custom function may not be).
  at::Tensor cos, sin, docs;

  void Build(Flat& f, const std::vector<at::Tensor>& params, bool requires_grad) {
    torch::NoGradGuard no_grad;
    f.layout = FlatLayout(params, group->size());
    if (params.empty()) return;
    at::Tensor flat = f.layout.Pack(params, params.front().options());
    f.shard = f.layout.Shard(flat, group->rank()).clone().set_requires_grad(requires_grad);
  }

  // Gathers the flat weights of `f` and points each parameter at its part of them.
  void GatherFlat(Flat& f) {
    if (f.layout.empty()) return;
    torch::NoGradGuard no_grad;
    at::Tensor full = torch::empty({f.layout.padded()}, f.shard.options().requires_grad(false));
    at::Tensor mine = f.shard.detach();
    group->AllGather(full, mine);
    for (size_t i = 0; i < f.layout.size(); ++i) f.layout.params()[i].set_data(f.layout.View(full, i));
  }
  void ReleaseFlat(Flat& f) {
    for (const at::Tensor& p : f.layout.params()) {
      p.set_data(torch::empty({0}, p.options().requires_grad(false)));
      p.mutable_grad() = at::Tensor();
    }
  }
  void Gather() {
    if (gathered) return;
    GatherFlat(trained);
    GatherFlat(frozen);
    gathered = true;
  }
  void Release() {
    if (!gathered) return;
    ReleaseFlat(trained);
    ReleaseFlat(frozen);
    gathered = false;
  }
};

namespace {

using Unit = ShardedLayers::Unit;

// The generator states at the forward, replayed in the recompute so dropout masks repeat.
struct SavedRng : torch::CustomClassHolder {
  models::RngStates states;
};

// y = layer(x) with the layer's weights gathered only while it runs; the backward gathers them again,
// recomputes, and returns the reduce-scattered weight gradient as the gradient of the trained shard.
struct ShardedLayerFunction : public torch::autograd::Function<ShardedLayerFunction> {
  // `shard`: the trained shard (an input so that autograd routes the weights' gradient to it), or an empty
  // tensor for a layer without trained weights. The layer's other inputs are the unit's cos, sin and docs.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& shard,
                            int64_t unit_address) {
    (void)shard;
    Unit* unit = reinterpret_cast<Unit*>(unit_address);
    const at::Tensor cos = unit->cos, sin = unit->sin, docs = unit->docs;
    ctx->saved_data["unit"] = unit_address;
    auto rng = c10::make_intrusive<SavedRng>();
    rng->states = models::RngStates::Capture(x.device());
    ctx->saved_data["rng"] = c10::IValue::make_capsule(std::move(rng));
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    ctx->saved_data["has_docs"] = docs.defined();
    if (docs.defined()) ctx->saved_data["docs"] = docs;
    ctx->save_for_backward({x});
    unit->Gather();
    at::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = unit->layer->forward(x, cos, sin, docs);
    }
    unit->Release();
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    Unit* unit = reinterpret_cast<Unit*>(ctx->saved_data["unit"].toInt());
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    at::Tensor x = saved[0].detach().requires_grad_(saved[0].requires_grad());
    unit->Gather();
    at::Tensor y;
    {
      models::ScopedRngReplay replay(
          static_cast<const SavedRng&>(*ctx->saved_data["rng"].toCapsule()).states, x.device());
      torch::AutoGradMode enable(true);
      at::Tensor docs = ctx->saved_data["has_docs"].toBool() ? ctx->saved_data["docs"].toTensor() : at::Tensor();
      y = unit->layer->forward(x, ctx->saved_data["cos"].toTensor(), ctx->saved_data["sin"].toTensor(), docs);
    }
    std::vector<at::Tensor> inputs;
    if (x.requires_grad()) inputs.push_back(x);
    for (const at::Tensor& p : unit->trained.layout.params()) inputs.push_back(p);
    std::vector<at::Tensor> grads;
    if (!inputs.empty() && y.requires_grad()) {
      grads = torch::autograd::grad({y}, inputs, {grad_outputs[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                    /*allow_unused=*/true);
    }
    at::Tensor grad_x = x.requires_grad() && !grads.empty() ? grads[0] : at::Tensor();
    at::Tensor grad_shard;
    if (!unit->trained.layout.empty() && unit->trained.shard.defined()) {
      torch::NoGradGuard no_grad;
      const Unit::Flat& f = unit->trained;
      const size_t first = x.requires_grad() ? 1 : 0;
      std::vector<at::Tensor> weight_grads;
      for (size_t i = 0; i < f.layout.size(); ++i) {
        weight_grads.push_back(grads.size() > first + i ? grads[first + i] : at::Tensor());
      }
      at::Tensor flat = f.layout.Pack(weight_grads, f.shard.options());
      // The packed copy is all the reduce-scatter reads: autograd's own gradients go before it allocates.
      weight_grads.clear();
      grads.clear();
      grad_shard = torch::empty({f.layout.shard_size()}, flat.options());
      unit->group->ReduceScatter(grad_shard, flat);
    }
    unit->Release();
    return {grad_x, grad_shard, at::Tensor()};
  }
};

}  // namespace

ShardedLayers::ShardedLayers(ProcessGroup* group, models::Decoder model) : group_(group), model_(model) {
  for (const models::TransformerLayer& layer : model_->layers()) {
    auto unit = std::make_unique<Unit>();
    unit->group = group_;
    unit->layer = layer.ptr();
    std::vector<at::Tensor> trained, frozen;
    for (const at::Tensor& p : layer->parameters()) {
      // An NF4 base's placeholder (models::LinearImpl with quantize_base): its codes live in the layer, whole
      // on every rank, and are never gathered.
      if (p.is_meta()) continue;
      (p.requires_grad() ? trained : frozen).push_back(p);
      owned_.push_back(p.unsafeGetTensorImpl());
    }
    unit->Build(unit->trained, trained, /*requires_grad=*/true);
    unit->Build(unit->frozen, frozen, /*requires_grad=*/false);
    unit->gathered = true;  // the weights are whole now: release them
    unit->Release();
    if (unit->trained.shard.defined()) trained_shards_.push_back(unit->trained.shard);
    units_.push_back(std::move(unit));
  }
  model_->set_layer_runner([this](size_t index, const torch::Tensor& x, const torch::Tensor& cos,
                                  const torch::Tensor& sin, const torch::Tensor& docs) {
    Unit* unit = units_[index].get();
    const bool weights_train = unit->trained.shard.defined();
    if (!torch::GradMode::is_enabled() || (!weights_train && !x.requires_grad())) {
      // No gradient to route: gather, run, release.
      unit->Gather();
      at::Tensor y = unit->layer->forward(x, cos, sin, docs);
      unit->Release();
      return y;
    }
    // A layer with only frozen weights still passes the gradient to its input (LoRA adapters elsewhere).
    unit->cos = cos;
    unit->sin = sin;
    unit->docs = docs;
    at::Tensor y = ShardedLayerFunction::apply(x, weights_train ? unit->trained.shard : torch::empty({0}),
                                               reinterpret_cast<int64_t>(unit));
    unit->cos = unit->sin = unit->docs = at::Tensor();
    return y;
  });
}

ShardedLayers::~ShardedLayers() {
  if (model_) model_->set_layer_runner(nullptr);
}

bool ShardedLayers::Owns(const at::Tensor& param) const {
  return std::find(owned_.begin(), owned_.end(), param.unsafeGetTensorImpl()) != owned_.end();
}

void ShardedLayers::ZeroGrad() {
  for (at::Tensor& s : trained_shards_) s.mutable_grad() = at::Tensor();
}

double ShardedLayers::GradSquaredSum() const { return recipes::GradSquaredSum(trained_shards_); }

void ShardedLayers::ScaleGrads(double factor) { recipes::ScaleGrads(trained_shards_, factor); }

void ShardedLayers::GatherAll() {
  for (auto& u : units_) u->Gather();
}

void ShardedLayers::ReleaseAll() {
  for (auto& u : units_) u->Release();
}

std::vector<ShardedFlat> ShardedLayers::flats() const {
  std::vector<ShardedFlat> out;
  for (const auto& u : units_) {
    if (!u->trained.shard.defined()) continue;
    out.push_back({u->trained.layout, u->trained.shard});
  }
  return out;
}

int64_t ShardedLayers::trained_elements() const {
  int64_t n = 0;
  for (const at::Tensor& s : trained_shards_) n += s.numel();
  return n;
}

}  // namespace tmx::recipes
