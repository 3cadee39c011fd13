#include "recipes/distributed/optimizer_state.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

namespace tmx::recipes {
namespace {

// The state tensors an optimizer keeps per parameter, by name, and the AdamW step.
struct StateTensors {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  int64_t step = 0;
};

StateTensors Read(const torch::optim::OptimizerParamState& s) {
  StateTensors out;
  if (auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(&s)) {
    out.tensors = {{"exp_avg", a->exp_avg()}, {"exp_avg_sq", a->exp_avg_sq()}};
    if (a->max_exp_avg_sq().defined()) out.tensors.emplace_back("max_exp_avg_sq", a->max_exp_avg_sq());
    out.step = a->step();
  } else if (auto* g = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    if (g->momentum_buffer().defined()) out.tensors = {{"momentum_buffer", g->momentum_buffer()}};
  }
  return out;
}

std::unique_ptr<torch::optim::OptimizerParamState> Make(const torch::optim::Optimizer& like, const StateTensors& st) {
  auto get = [&](const std::string& name) {
    for (const auto& [n, t] : st.tensors) {
      if (n == name) return t;
    }
    return at::Tensor();
  };
  if (dynamic_cast<const torch::optim::AdamW*>(&like) != nullptr) {
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(st.step);
    s->exp_avg(get("exp_avg"));
    s->exp_avg_sq(get("exp_avg_sq"));
    if (get("max_exp_avg_sq").defined()) s->max_exp_avg_sq(get("max_exp_avg_sq"));
    return s;
  }
  auto s = std::make_unique<torch::optim::SGDParamState>();
  s->momentum_buffer(get("momentum_buffer"));
  return s;
}

}  // namespace

void GatherOptimizerState(ProcessGroup& group, const ShardedFlat& flat, const torch::optim::Optimizer& sharded,
                          torch::optim::Optimizer* per_param) {
  torch::NoGradGuard no_grad;
  auto it = sharded.state().find(flat.shard.unsafeGetTensorImpl());
  if (it == sharded.state().end()) return;  // not stepped yet (on every rank alike)
  StateTensors mine = Read(*it->second);
  std::vector<at::Tensor> full;
  for (const auto& [name, t] : mine.tensors) {
    at::Tensor whole = torch::empty({flat.layout.padded()}, t.options());
    at::Tensor part = t.contiguous();
    group.AllGather(whole, part);
    full.push_back(whole);
  }
  for (size_t i = 0; i < flat.layout.size(); ++i) {
    StateTensors st;
    st.step = mine.step;
    for (size_t k = 0; k < full.size(); ++k) st.tensors.emplace_back(mine.tensors[k].first, flat.layout.View(full[k], i));
    per_param->state()[flat.layout.params()[i].unsafeGetTensorImpl()] = Make(*per_param, st);
  }
}

void ScatterOptimizerState(int rank, const ShardedFlat& flat, const torch::optim::Optimizer& per_param,
                           torch::optim::Optimizer* sharded) {
  torch::NoGradGuard no_grad;
  std::vector<StateTensors> states;
  for (const at::Tensor& p : flat.layout.params()) {
    auto it = per_param.state().find(p.unsafeGetTensorImpl());
    if (it == per_param.state().end()) return;  // not stepped when saved
    states.push_back(Read(*it->second));
  }
  if (states.empty()) return;
  StateTensors shard;
  shard.step = states.front().step;
  for (size_t k = 0; k < states.front().tensors.size(); ++k) {
    std::vector<at::Tensor> parts;
    for (const StateTensors& s : states) parts.push_back(s.tensors[k].second);
    const at::Tensor whole =
        flat.layout.Pack(parts, states.front().tensors[k].second.options().device(flat.shard.device()));
    shard.tensors.emplace_back(states.front().tensors[k].first, flat.layout.Shard(whole, rank).clone());
  }
  sharded->state()[flat.shard.unsafeGetTensorImpl()] = Make(*sharded, shard);
}

}  // namespace tmx::recipes
