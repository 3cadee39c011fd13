#include "recipes/optimizers.h"

#include <ATen/ops/_fused_adamw.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

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

StatusOr<OptimizerPtr> BuildAdamW(const Config& config, const std::vector<at::Tensor>& params) {
  StatusOr<double> lr = config.GetDouble("optimizer.lr");
  StatusOr<double> wd = config.GetDouble("optimizer.weight_decay");
  StatusOr<double> eps = config.GetDouble("optimizer.eps");
  StatusOr<bool> amsgrad = config.GetBool("optimizer.amsgrad");
  StatusOr<bool> fused = config.GetBool("optimizer.fused");
  for (const Status& s : {lr.status(), wd.status(), eps.status(), amsgrad.status(), fused.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  torch::optim::AdamWOptions o(*lr);
  o.weight_decay(*wd).eps(*eps).amsgrad(*amsgrad);
  YAML::Node betas = config.Find("optimizer.betas");
  bool two_numbers = betas.IsSequence() && betas.size() == 2;
  try {
    if (two_numbers) o.betas({betas[0].as<double>(), betas[1].as<double>()});
  } catch (const YAML::Exception&) {
    two_numbers = false;
  }
  if (!two_numbers) {
    return Status::InvalidArgument(config.OriginOf("optimizer.betas").ToString() +
                                   ": key 'optimizer.betas': expected two numbers, e.g. [0.9, 0.999]");
  }
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
      Field("betas", FieldType::kAny, "[0.9, 0.999]", "moment decay rates"),
      Field("amsgrad", FieldType::kBool, "False", "AMSGrad variant"),
      Field("fused", FieldType::kBool, "False",
            "one fused kernel per step (float32 arithmetic for bf16 weights); False: LibTorch's AdamW"),
      Nullable(Field("foreach", FieldType::kAny, "null", "accepted for torchtune compatibility")),
  };
  adamw.impl = std::make_shared<OptimizerComponent>(BuildAdamW, [](const Config& c) {
    StatusOr<bool> amsgrad = c.GetBool("optimizer.amsgrad", false);
    return amsgrad.ok() && *amsgrad ? 3 : 2;  // exp_avg, exp_avg_sq (and max_exp_avg_sq)
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
  sgd.impl = std::make_shared<OptimizerComponent>(BuildSgd, [](const Config& c) {
    StatusOr<double> momentum = c.GetDouble("optimizer.momentum", 0);
    return momentum.ok() && *momentum != 0 ? 1 : 0;  // the momentum buffer
  });
  out->push_back(sgd);

  for (const char* name : {"bitsandbytes.optim.PagedAdamW8bit", "bitsandbytes.optim.PagedAdamW",
                           "bitsandbytes.optim.AdamW8bit"}) {
    ComponentSpec c;
    c.name = name;
    c.kind = "optimizer";
    c.unsupported_reason = "bitsandbytes is a Python CUDA extension with no LibTorch C++ API; use torch.optim.AdamW";
    if (std::string(name).find("Paged") != std::string::npos) {
      // bitsandbytes pages optimizer state through CUDA unified memory: a property of that library, not of a
      // device type's traits.
      c.device_check = [](const YAML::Node&, const Config&, const DeviceInfo& d) -> std::string {
        if (d.type == "cuda") return "";
        return "a paged optimizer needs a cuda device (it is built on CUDA unified memory), not " + d.id;
      };
    }
    c.params = {Field("lr", FieldType::kFloat, "1e-3", "learning rate")};
    out->push_back(c);
  }
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
