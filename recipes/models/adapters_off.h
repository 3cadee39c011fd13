// AdaptersOff: a scope in which a LoRA model runs as its base model (torchtune's rlhf disable_adapter context).
// The DPO recipes take their reference log-probabilities from the policy with its adapters off, so the
// reference costs no second copy of the weights.
#pragma once

#include <memory>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace tmx::models {

class LinearImpl;
class AdapterHolder;

// Turns off the adapter of every LoRA/DoRA Linear (and AdapterHolder, lora.h) in `module` (and its submodules) for the guard's lifetime;
// the destructor turns back on exactly those it turned off. A model without adapters is left as it is.
// Not copyable; not thread-safe with another forward of the same model.
class AdaptersOff {
 public:
  explicit AdaptersOff(torch::nn::Module& module);
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;

  // How many adapted layers the guard turned off.
  size_t count() const { return turned_off_.size() + holders_off_.size(); }

 private:
  std::vector<std::shared_ptr<LinearImpl>> turned_off_;
  std::vector<std::shared_ptr<AdapterHolder>> holders_off_;  // grouped experts (moe.h)
};

}  // namespace tmx::models
