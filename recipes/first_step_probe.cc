#include "recipes/first_step_probe.h"

#include <cstring>

namespace tmx::recipes {

std::vector<float> FirstStepProbe::Sample(const torch::Tensor& t) {
  torch::NoGradGuard no_grad;
  const torch::Tensor flat = t.detach().reshape({-1});
  const std::vector<int64_t> indices = ProbeSampleIndices(flat.numel());
  const torch::Tensor at = torch::tensor(indices, torch::kLong).to(flat.device());
  const torch::Tensor values = flat.index_select(0, at).to(torch::kCPU, torch::kFloat).contiguous();
  std::vector<float> out(static_cast<size_t>(values.numel()));
  if (!out.empty()) std::memcpy(out.data(), values.data_ptr<float>(), out.size() * sizeof(float));
  return out;
}

void FirstStepProbe::AddBatch(const torch::Tensor& tokens, const torch::Tensor& logits) {
  probe_.tensors.push_back({"batch", "batch", Sample(tokens)});
  probe_.tensors.push_back({"logits", "logits", Sample(logits)});
}

void FirstStepProbe::AddParameters(const NamedParameters& trained, const std::string& kind) {
  for (const auto& [name, p] : trained) {
    const torch::Tensor t = kind == "gradient" ? p.grad() : p;
    if (!t.defined()) continue;
    probe_.tensors.push_back({name, kind, Sample(t)});
  }
}

Status FirstStepProbe::Write(const std::string& output_dir) const {
  return WriteNumericProbe(output_dir + "/" + kNumericProbeFile, probe_);
}

}  // namespace tmx::recipes
