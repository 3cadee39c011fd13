#include "recipes/optimizers.h"

#include <tuple>

#include <ATen/ops/_fused_adamw.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "recipes/adamw8bit.h"

namespace tmx::recipes {
namespace {

// torch.optim.AdamW(fused=True): LibTorch's AdamW (its options, per-parameter state and checkpoint format) with
// the step done by ATen's fused kernel, one pass over each parameter computing in float32 (for bf16 weights
// too), instead of LibTorch's dozen tensor operations per parameter, each allocating and reading the whole
// tensor again. The fused kernel exists for cpu, cuda, mps and xpu. Sparse gradients are refused, as by
// torch.optim.
class FusedAdamW final : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;

  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    torch::Tensor loss;
    if (closure != nullptr) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    for (torch::optim::OptimizerParamGroup& group : param_groups()) {
      const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
      std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
      for (const at::Tensor& p : group.params()) {
        if (!p.grad().defined()) continue;
        TORCH_CHECK(!p.grad().is_sparse(), "AdamW does not support sparse gradients");
        std::unique_ptr<torch::optim::OptimizerParamState>& slot = state()[p.unsafeGetTensorImpl()];
        if (slot == nullptr) {
          auto fresh = std::make_unique<torch::optim::AdamWParamState>();
          fresh->step(0);
          fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
          fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
          if (o.amsgrad()) fresh->max_exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
          slot = std::move(fresh);
        }
        auto& st = static_cast<torch::optim::AdamWParamState&>(*slot);
        st.step(st.step() + 1);
        params.push_back(p);
        grads.push_back(p.grad());
        exp_avgs.push_back(st.exp_avg());
        exp_avg_sqs.push_back(st.exp_avg_sq());
        if (o.amsgrad()) max_exp_avg_sqs.push_back(st.max_exp_avg_sq());
        // The kernel reads each parameter's step count (after this step) from a float32 scalar tensor.
        steps.push_back(torch::full({}, static_cast<double>(st.step()), p.options().dtype(torch::kFloat)));
      }
      if (params.empty()) continue;
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o.lr(), std::get<0>(o.betas()),
                        std::get<1>(o.betas()), o.weight_decay(), o.eps(), o.amsgrad(), /*maximize=*/false);
    }
    return loss;
  }
};

// optimizer.betas: two decay rates in [0, 1) (torch.optim's AdamW refuses others; .nan passed every check here and
// made the first step's moments NaN).
std::string BetasCheck(const YAML::Node& value) {
  bool ok = value.IsSequence() && value.size() == 2;
  try {
    for (size_t i = 0; ok && i < 2; ++i) ok = value[i].as<double>() >= 0 && value[i].as<double>() < 1;  // NaN: false
  } catch (const YAML::Exception&) {
    ok = false;
  }
  return ok ? "" : "expected two numbers in [0, 1), e.g. [0.9, 0.999]";
}

// optimizer.betas: two numbers.
StatusOr<std::tuple<double, double>> Betas(const Config& config) {
  YAML::Node betas = config.Find("optimizer.betas");
  try {
    if (betas.IsSequence() && betas.size() == 2) return std::make_tuple(betas[0].as<double>(), betas[1].as<double>());
  } catch (const YAML::Exception&) {
  }
  return Status::InvalidArgument(config.OriginOf("optimizer.betas").ToString() +
                                 ": key 'optimizer.betas': expected two numbers, e.g. [0.9, 0.999]");
}

StatusOr<OptimizerPtr> BuildAdamW(const Config& config, const std::vector<at::Tensor>& params) {
  StatusOr<double> lr = config.GetDouble("optimizer.lr");
  StatusOr<double> wd = config.GetDouble("optimizer.weight_decay");
  StatusOr<double> eps = config.GetDouble("optimizer.eps");
  StatusOr<bool> amsgrad = config.GetBool("optimizer.amsgrad");
  StatusOr<bool> fused = config.GetBool("optimizer.fused");
  for (const Status& s : {lr.status(), wd.status(), eps.status(), amsgrad.status(), fused.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  StatusOr<std::tuple<double, double>> betas = Betas(config);
  TM_RETURN_IF_ERROR(betas.status());
  torch::optim::AdamWOptions o(*lr);
  o.weight_decay(*wd).eps(*eps).amsgrad(*amsgrad).betas(*betas);
  if (*fused) return OptimizerPtr(new FusedAdamW(params, o));
  return OptimizerPtr(new torch::optim::AdamW(params, o));
}

StatusOr<OptimizerPtr> BuildSgd(const Config& config, const std::vector<at::Tensor>& params) {
  StatusOr<double> lr = config.GetDouble("optimizer.lr");
  StatusOr<double> momentum = config.GetDouble("optimizer.momentum");
  StatusOr<double> wd = config.GetDouble("optimizer.weight_decay");
  StatusOr<double> damp = config.GetDouble("optimizer.dampening");
  StatusOr<bool> nesterov = config.GetBool("optimizer.nesterov");
  for (const Status& s : {lr.status(), momentum.status(), wd.status(), damp.status(), nesterov.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  torch::optim::SGDOptions o(*lr);
  o.momentum(*momentum).weight_decay(*wd).dampening(*damp).nesterov(*nesterov);
  return OptimizerPtr(new torch::optim::SGD(params, o));
}

// bitsandbytes' AdamW family (recipes/adamw8bit.h). Each takes bitsandbytes' own arguments; what it refuses (or
// silently ignores) is refused here with the fix.
struct BnbVariant {
  const char* name;
  const char* doc;
  bool always_8bit;     // AdamW8bit, PagedAdamW8bit: 8-bit state whatever optim_bits says (which must stay 32)
  bool always_paged;    // the Paged* classes; AdamW8bit pages with is_paged: True
};

const std::vector<BnbVariant>& BnbVariants() {
  static const std::vector<BnbVariant> kVariants = {
      {"bitsandbytes.optim.AdamW8bit", "AdamW with both moments in 8 bits (blockwise dynamic quantisation)", true,
       false},
      {"bitsandbytes.optim.PagedAdamW8bit", "AdamW8bit with its state in CUDA unified memory", true, true},
      {"bitsandbytes.optim.PagedAdamW", "AdamW (32-bit state, or 8-bit with optim_bits: 8) in CUDA unified memory",
       false, true},
  };
  return kVariants;
}

bool PagedIn(const BnbVariant& v, const YAML::Node& optimizer) {
  if (v.always_paged) return true;
  try {
    return optimizer["is_paged"].IsScalar() && optimizer["is_paged"].as<bool>();
  } catch (const YAML::Exception&) {
    return false;
  }
}

// The overrides that run a config of a paged variant where paging cannot: the same state without paging.
// AdamW8bit keeps 8-bit state (is_paged off, or the unpaged class); PagedAdamW's 32-bit state is AdamW's (fused
// where the device has the kernel: bitsandbytes' arithmetic is float32 too), its 8-bit state (optim_bits: 8)
// AdamW8bit's. Keys the new optimizer does not take are removed.
std::vector<std::string> UnpagedRepair(const BnbVariant& v, const YAML::Node& optimizer, const Config& config,
                                       const DeviceInfo& d) {
  // Written in the config (or an override), not a schema default: only those can be removed.
  auto has = [&](const char* key) {
    return optimizer.IsMap() && optimizer[key].IsDefined() &&
           config.OriginOf(std::string("optimizer.") + key).default_of.empty();
  };
  if (!v.always_paged) return {"optimizer.is_paged=False"};
  int64_t bits = 32;
  try {
    if (has("optim_bits")) bits = optimizer["optim_bits"].as<int64_t>();
  } catch (const YAML::Exception&) {
  }
  if (v.always_8bit || bits == 8) {
    std::vector<std::string> repair = {"optimizer._component_=bitsandbytes.optim.AdamW8bit"};
    if (has("optim_bits")) repair.push_back("~optimizer.optim_bits");
    return repair;
  }
  std::vector<std::string> repair = {"optimizer._component_=torch.optim.AdamW"};
  if (d.traits().fused_adamw) repair.push_back("optimizer.fused=True");
  for (const char* key : {"optim_bits", "min_8bit_size"}) {
    if (has(key)) repair.push_back(std::string("~optimizer.") + key);
  }
  return repair;
}

StatusOr<OptimizerPtr> BuildBnb(const BnbVariant& v, const Config& config, const std::vector<at::Tensor>& params) {
  StatusOr<double> lr = config.GetDouble("optimizer.lr");
  StatusOr<double> wd = config.GetDouble("optimizer.weight_decay");
  StatusOr<double> eps = config.GetDouble("optimizer.eps");
  StatusOr<int64_t> bits = config.GetInt("optimizer.optim_bits");
  StatusOr<int64_t> min_8bit = config.GetInt("optimizer.min_8bit_size");
  StatusOr<std::tuple<double, double>> betas = Betas(config);
  for (const Status& s : {lr.status(), wd.status(), eps.status(), bits.status(), min_8bit.status(), betas.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  const bool paged = PagedIn(v, config.Find("optimizer"));
#ifndef TUNE_MATRIX_HAS_CUDA
  for (const at::Tensor& p : params) {
    if (paged && p.is_cuda()) {
      return Status::InvalidArgument(config.OriginOf("optimizer._component_").ToString() + ": " + v.name +
                                     ": this tune-matrix was built without the CUDA toolkit, so it cannot allocate "
                                     "unified memory; rebuild it with the toolkit, or run it unpaged (`tune validate` names the "
                                     "overrides)");
    }
  }
#endif
  BnbAdamWOptions o(*lr);
  o.betas(*betas).eps(*eps).weight_decay(*wd).min_8bit_size(*min_8bit).paged(paged);
  o.state_bits(v.always_8bit ? 8 : *bits);
  return OptimizerPtr(new BnbAdamW(params, o));
}

ComponentSpec BnbComponent(const BnbVariant& v) {
  ComponentSpec c;
  c.name = v.name;
  c.kind = "optimizer";
  c.doc = v.doc;
  const std::string short_name = std::string(v.name).substr(std::string("bitsandbytes.optim.").size());
  auto amsgrad_check = [short_name](const YAML::Node& value) -> std::string {
    if (!value.as<bool>()) return "";
    return "bitsandbytes' " + short_name + " has no AMSGrad variant; set optimizer.amsgrad=False";
  };
  auto bits_check = [v, short_name](const YAML::Node& value) -> std::string {
    const int64_t bits = value.as<int64_t>();
    if (v.always_8bit && bits != 32) {
      return "'" + value.Scalar() + "' is refused: " + short_name +
             " keeps 8-bit state whatever optim_bits says, and bitsandbytes accepts only the default 32 here; "
             "remove optimizer.optim_bits";
    }
    if (bits != 8 && bits != 32) return "'" + value.Scalar() + "' is not 8 or 32 (bits of optimizer state)";
    return "";
  };
  c.params = {
      AtLeast(Field("lr", FieldType::kFloat, "1e-3", "learning rate"), 0),
      AtLeast(Field("weight_decay", FieldType::kFloat, "1e-2", "decoupled weight decay"), 0),
      AtLeast(Field("eps", FieldType::kFloat, "1e-8", "denominator epsilon"), 0),
      WithValueCheck(Field("betas", FieldType::kAny, "[0.9, 0.999]", "moment decay rates"), BetasCheck),
      WithValueCheck(Field("amsgrad", FieldType::kBool, "False", "accepted as False only (bitsandbytes has none)"),
                     amsgrad_check),
      WithValueCheck(Field("optim_bits", FieldType::kInt, "32",
                           v.always_8bit ? "32 only (the state is 8-bit regardless)" : "bits of state: 32 or 8"),
                     bits_check),
      AtLeast(Field("min_8bit_size", FieldType::kInt, "4096", "tensors with fewer elements keep float32 state"), 0),
  };
  if (!v.always_paged) {
    c.params.push_back(Field("is_paged", FieldType::kBool, "False", "state in CUDA unified memory (cuda only)"));
  }
  // Paging is CUDA unified memory: a property of this optimizer, not of a device type's traits.
  c.device_check = [v](const YAML::Node& node, const Config& config, const DeviceInfo& d) -> DeviceRefusal {
    if (!PagedIn(v, node)) return {};
    if (d.type != "cuda") {
      return {"a paged optimizer needs a cuda device (its state lives in CUDA unified memory), not " + d.id,
              UnpagedRepair(v, node, config, d)};
    }
#ifndef TUNE_MATRIX_HAS_CUDA
    return {"a paged optimizer's state lives in CUDA unified memory, and this tune-matrix was built without the "
            "CUDA toolkit (rebuilt with it, the config runs as written)",
            UnpagedRepair(v, node, config, d)};
#endif
    return {};
  };
  c.impl = std::make_shared<OptimizerComponent>(
      [v](const Config& config, const std::vector<at::Tensor>& params) { return BuildBnb(v, config, params); },
      [v](const Config& config, int64_t) {
        StatusOr<int64_t> bits = config.GetInt("optimizer.optim_bits", 32);
        // Two uint8 codes and two float32 absmax per block of 256, or two float32 moments (whatever the weights'
        // dtype). Tensors under min_8bit_size keep float32 state; a model's are few and small.
        const bool eight_bit = v.always_8bit || (bits.ok() && *bits == 8);
        return eight_bit ? 2.0 + 2.0 * 4.0 / static_cast<double>(kQuantBlockSize) : 8.0;
      },
      /*shardable=*/false);
  return c;
}

}  // namespace

void AddOptimizerComponents(std::vector<ComponentSpec>* out) {
  ComponentSpec adamw;
  adamw.name = "tune_matrix.optim.AdamW";
  adamw.aliases = {"torch.optim.AdamW"};
  adamw.kind = "optimizer";
  adamw.doc = "AdamW with decoupled weight decay";
  adamw.params = {
      AtLeast(Field("lr", FieldType::kFloat, "1e-3", "learning rate"), 0),
      AtLeast(Field("weight_decay", FieldType::kFloat, "0.01", "decoupled weight decay"), 0),
      Above(Field("eps", FieldType::kFloat, "1e-8", "denominator epsilon"), 0),
      WithValueCheck(Field("betas", FieldType::kAny, "[0.9, 0.999]", "moment decay rates"), BetasCheck),
      Field("amsgrad", FieldType::kBool, "False", "AMSGrad variant"),
      Field("fused", FieldType::kBool, "False",
            "one fused kernel per step (float32 arithmetic for bf16 weights); False: LibTorch's AdamW"),
      Nullable(Field("foreach", FieldType::kAny, "null", "accepted for torchtune compatibility")),
  };
  adamw.impl = std::make_shared<OptimizerComponent>(BuildAdamW, [](const Config& c, int64_t weight_bytes) {
    StatusOr<bool> amsgrad = c.GetBool("optimizer.amsgrad", false);
    // exp_avg, exp_avg_sq (and max_exp_avg_sq) in the weights' dtype
    return static_cast<double>(weight_bytes) * (amsgrad.ok() && *amsgrad ? 3 : 2);
  });
  out->push_back(adamw);

  ComponentSpec sgd;
  sgd.name = "tune_matrix.optim.SGD";
  sgd.aliases = {"torch.optim.SGD"};
  sgd.kind = "optimizer";
  sgd.doc = "stochastic gradient descent with optional momentum";
  sgd.params = {
      AtLeast(Field("lr", FieldType::kFloat, "1e-2", "learning rate"), 0),
      AtLeast(Field("momentum", FieldType::kFloat, "0", "momentum factor"), 0),
      AtLeast(Field("weight_decay", FieldType::kFloat, "0", "L2 penalty"), 0),
      Field("dampening", FieldType::kFloat, "0", "dampening for momentum"),
      Field("nesterov", FieldType::kBool, "False", "Nesterov momentum"),
  };
  sgd.impl = std::make_shared<OptimizerComponent>(BuildSgd, [](const Config& c, int64_t weight_bytes) {
    StatusOr<double> momentum = c.GetDouble("optimizer.momentum", 0);
    return momentum.ok() && *momentum != 0 ? static_cast<double>(weight_bytes) : 0.0;  // the momentum buffer
  });
  out->push_back(sgd);

  for (const BnbVariant& v : BnbVariants()) out->push_back(BnbComponent(v));
}

StatusOr<const OptimizerComponent*> OptimizerOf(const Config& config, const Registry& registry) {
  YAML::Node node = config.Find("optimizer._component_");
  const ComponentSpec* spec = registry.FindComponent(node.IsScalar() ? node.Scalar() : "");
  const auto* impl = spec == nullptr ? nullptr : dynamic_cast<const OptimizerComponent*>(spec->impl.get());
  if (impl == nullptr) {
    return Status::InvalidArgument(config.OriginOf("optimizer._component_").ToString() + ": optimizer '" +
                                   (node.IsScalar() ? node.Scalar() : std::string("?")) +
                                   "' cannot be built here; use torch.optim.AdamW or torch.optim.SGD");
  }
  return impl;
}

}  // namespace tmx::recipes
