#include "recipes/models/checkpointing.h"

#include <torch/torch.h>

#include <mutex>
#include <optional>
#include <utility>

#include "harness/device_hooks.h"

namespace tmx::models {
namespace {

at::Tensor GeneratorState(const at::Device& device) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetGeneratorState(const at::Device& device, const at::Tensor& state) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace

RngStates RngStates::Capture(const at::Device& device) {
  RngStates states;
  states.cpu = GeneratorState(at::Device(at::kCPU));
  const DeviceTypeTraits* type = DeviceTypeOf(device.type());
  if (type != nullptr && type->own_generator) {
    states.device = device;
    states.device_state = GeneratorState(device);
  }
  return states;
}

void RngStates::Restore() const {
  SetGeneratorState(at::Device(at::kCPU), cpu);
  if (device) SetGeneratorState(*device, device_state);
}

ScopedRngReplay::ScopedRngReplay(const RngStates& replay, const at::Device& device)
    : previous_(RngStates::Capture(device)) {
  replay.Restore();
}

ScopedRngReplay::~ScopedRngReplay() { previous_.Restore(); }

namespace {

// What backward needs besides the saved tensors; carried in the autograd context as a capsule.
struct CheckpointState : torch::CustomClassHolder {
  CheckpointFunction fn;
  RngStates rng;
  bool offload = false;
  // With offload: the input's host copy, its device and whether it required grad.
  at::Tensor offloaded;
  at::Device input_device = at::kCPU;
  bool input_requires_grad = false;
};

// A host copy of `t`: page-locked and copied without waiting when `t` is on an accelerator.
at::Tensor ToHost(const at::Tensor& t) {
  if (t.device().is_cpu()) return t.detach().clone();
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true).requires_grad(false));
  host.copy_(t.detach(), /*non_blocking=*/true);
  return host;
}

class CheckpointNode : public torch::autograd::Function<CheckpointNode> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<CheckpointState> state,
                            const at::Tensor& input, at::TensorList params) {
    state->rng = RngStates::Capture(input.device());
    at::Tensor output;
    {
      // Function::apply already turns grad off here; the guard makes the contract local: fn records no graph,
      // so its activations are freed as soon as it returns.
      torch::NoGradGuard no_grad;
      output = state->fn(input);
    }
    // Slot 0 is the input; offloaded, it stays empty here and lives in the state's host copy.
    std::vector<at::Tensor> saved{state->offload ? at::Tensor() : input};
    if (state->offload) {
      state->offloaded = ToHost(input);
      state->input_device = input.device();
      state->input_requires_grad = input.requires_grad();
    }
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(std::move(saved));
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return output;
  }

  // Gradients, in forward's argument order: none for the state, then input, then each of params.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();

    at::Tensor input =
        state->offload
            ? state->offloaded.to(state->input_device, /*non_blocking=*/true).requires_grad_(state->input_requires_grad)
            : saved[0].detach().requires_grad_(saved[0].requires_grad());
    state->offloaded = at::Tensor();  // the host copy is not needed again (the copy back is ordered before reuse)
    at::Tensor output;
    {
      ScopedRngReplay replay(state->rng, input.device());
      torch::AutoGradMode enable_grad(true);
      output = state->fn(input);
    }

    // Differentiate only with respect to what requires grad; the rest get undefined gradients.
    torch::autograd::variable_list wrt;
    std::vector<size_t> wrt_index;  // position in `saved` of each entry of `wrt`
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i == 0 ? input : saved[i];
      if (t.requires_grad()) {
        wrt.push_back(t);
        wrt_index.push_back(i);
      }
    }
    const torch::autograd::variable_list grads = torch::autograd::grad(
        {output}, wrt, {grad_outputs[0]}, /*retain_graph=*/false, /*create_graph=*/false, /*allow_unused=*/true);

    torch::autograd::variable_list result(1 + saved.size());  // [state, input, params...]
    for (size_t k = 0; k < wrt.size(); ++k) result[1 + wrt_index[k]] = grads[k];
    return result;
  }
};

}  // namespace

at::Tensor Checkpoint(CheckpointFunction fn, const at::Tensor& input, const std::vector<at::Tensor>& params,
                      bool offload_input) {
  std::vector<at::Tensor> trainable;
  for (const at::Tensor& p : params) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  if (!torch::GradMode::is_enabled() || (!input.requires_grad() && trainable.empty())) return fn(input);
  auto state = c10::make_intrusive<CheckpointState>();
  state->fn = std::move(fn);
  state->offload = offload_input;
  return CheckpointNode::apply(std::move(state), input, at::TensorList(trainable));
}

}  // namespace tmx::models
