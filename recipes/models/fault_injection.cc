#include "recipes/models/fault_injection.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

namespace tmx::models {
namespace {

const char* KernelName(FaultKernel kernel) {
  switch (kernel) {
    case FaultKernel::kAttention: return "attention";
    case FaultKernel::kNorm: return "norm";
    case FaultKernel::kMlp: return "mlp";
    case FaultKernel::kLoss: return "loss";
    case FaultKernel::kOptimizer: return "optimizer";
  }
  return "";
}

struct Fault {
  std::string kernel;
  double scale = 1;
};

Fault ReadFault() {
  const char* v = std::getenv(kFaultEnv);
  if (v == nullptr) return {};
  const std::string text = v;
  const size_t eq = text.find('=');
  if (eq == std::string::npos) return {};
  const std::string number = text.substr(eq + 1);
  char* end = nullptr;
  const double d = std::strtod(number.c_str(), &end);
  if (end == number.c_str() || *end != '\0' || !(d > 0)) return {};
  return {text.substr(0, eq), d};
}

}  // namespace

double FaultScale(FaultKernel kernel) {
  static const Fault fault = ReadFault();
  if (fault.scale == 1 || fault.kernel != KernelName(kernel)) return 1;
  return fault.scale;
}

bool OnReferencePath(const at::Tensor& x) { return x.is_cpu() && x.scalar_type() == at::kFloat; }

at::Tensor InjectFault(FaultKernel kernel, const at::Tensor& x) {
  const double scale = FaultScale(kernel);
  if (scale == 1 || OnReferencePath(x)) return x;
  return x * scale;
}

std::vector<at::Tensor> OptimizerFaultBefore(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> before;
  if (FaultScale(FaultKernel::kOptimizer) == 1) return before;
  at::NoGradGuard no_grad;
  for (const at::Tensor& p : params) before.push_back(OnReferencePath(p) ? at::Tensor() : p.detach().clone());
  return before;
}

void OptimizerFaultAfter(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& before) {
  if (before.size() != params.size()) return;
  at::NoGradGuard no_grad;
  const double scale = FaultScale(FaultKernel::kOptimizer);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!before[i].defined()) continue;
    at::Tensor p = params[i].detach();
    p.copy_(before[i] + (p - before[i]) * scale);
  }
}

}  // namespace tmx::models
