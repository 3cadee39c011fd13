#include "recipes/models/adapters_off.h"

#include <torch/torch.h>

#include "recipes/models/lora.h"

namespace tmx::models {

AdaptersOff::AdaptersOff(torch::nn::Module& module) {
  for (const std::shared_ptr<torch::nn::Module>& m : module.modules(/*include_self=*/true)) {
    std::shared_ptr<AdapterHolder> holder = std::dynamic_pointer_cast<AdapterHolder>(m);
    if (holder != nullptr && !holder->AdapterTensors().empty() && holder->adapter_enabled()) {
      holder->set_adapter_enabled(false);
      holders_off_.push_back(std::move(holder));
    }
    std::shared_ptr<LinearImpl> linear = std::dynamic_pointer_cast<LinearImpl>(m);
    if (linear == nullptr || !linear->has_adapter() || !linear->adapter_enabled()) continue;
    linear->set_adapter_enabled(false);
    turned_off_.push_back(std::move(linear));
  }
}

AdaptersOff::~AdaptersOff() {
  for (const std::shared_ptr<LinearImpl>& linear : turned_off_) linear->set_adapter_enabled(true);
  for (const std::shared_ptr<AdapterHolder>& holder : holders_off_) holder->set_adapter_enabled(true);
}

}  // namespace tmx::models
