#include "recipes/train_state.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cmath>
#include <set>

#include <torch/torch.h>

#include "base/file_util.h"
#include "recipes/adamw8bit.h"
#include "recipes/data/sample.h"
#include "recipes/models/lora.h"
#include "recipes/state_values.h"

namespace tmx::recipes {
namespace {

const char* kStateFile = "recipe_state.safetensors";
const std::string kAdapterPrefix = "adapter:";

std::map<void*, std::string> NamesByImpl(const NamedParameters& trained) {
  std::map<void*, std::string> names;
  for (const auto& [name, t] : trained) names[t.unsafeGetTensorImpl()] = name;
  return names;
}

StatusOr<int64_t> MetaInt(const std::map<std::string, std::string>& meta, const std::string& key,
                          const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) return Status::InvalidArgument(path + ": metadata has no '" + key + "'; not a recipe state");
  try {
    return static_cast<int64_t>(std::stoll(it->second));
  } catch (const std::exception&) {
    return Status::InvalidArgument(path + ": metadata '" + key + "' is not a number");
  }
}

// A bitsandbytes AdamW state's tensors by checkpoint suffix (absmax undefined for float32 moments).
std::vector<std::pair<std::string, torch::Tensor>> BnbStateTensors(const BnbAdamWParamState& s) {
  return {{".state1", s.state1()}, {".state2", s.state2()}, {".absmax1", s.absmax1()}, {".absmax2", s.absmax2()}};
}

}  // namespace

double LrScheduleFactor(int64_t step, int64_t total, int64_t warmup, double num_cycles) {
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(std::max<int64_t>(1, warmup));
  double progress = static_cast<double>(step - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * progress)));
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

Status LoadBaseWeights(torch::nn::Module& model, const checkpoint::NamedTensors& tensors, bool lora) {
  if (!lora) return checkpoint::LoadIntoModule(model, tensors, /*strict=*/true);
  std::set<std::string> given;
  for (const auto& t : tensors) given.insert(t.first);
  // A base checkpoint holds no adapters: LoRA's parameters start from their own initialisation.
  std::set<std::string> adapters;
  for (const auto& [name, param] : models::AdapterParameters(model)) adapters.insert(name);
  for (const auto& p : model.named_parameters()) {
    if (!adapters.count(p.key()) && !given.count(p.key())) {
      return Status::InvalidArgument(p.key() + ": missing from the checkpoint");
    }
  }
  return checkpoint::LoadIntoModule(model, tensors, /*strict=*/false);
}

Status SaveTrainState(const std::string& dir, const NamedParameters& trained, const torch::optim::Optimizer& optimizer,
                      bool lora, const Progress& progress) {
  checkpoint::NamedTensors state;
  std::map<std::string, std::string> meta = {{"next_epoch", std::to_string(progress.next_epoch)},
                                             {"global_step", std::to_string(progress.global_step)},
                                             {"seed", std::to_string(progress.seed)},
                                             {"format", "tune-matrix recipe state v1"}};
  // LoRA's trained tensors are small: they travel with the state, so resuming needs no weight file whatever the
  // checkpointer's format.
  if (lora) {
    for (const auto& [name, param] : trained) state.emplace_back(kAdapterPrefix + name, param.detach());
  }
  std::map<void*, std::string> names = NamesByImpl(trained);
  for (const auto& [key, param_state] : optimizer.state()) {
    auto it = names.find(key);
    if (it == names.end()) continue;
    const std::string& name = it->second;
    if (auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(param_state.get())) {
      state.emplace_back(name + ".exp_avg", adamw->exp_avg());
      state.emplace_back(name + ".exp_avg_sq", adamw->exp_avg_sq());
      if (adamw->max_exp_avg_sq().defined()) state.emplace_back(name + ".max_exp_avg_sq", adamw->max_exp_avg_sq());
      meta[name + ".step"] = std::to_string(adamw->step());
    } else if (auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(param_state.get())) {
      if (sgd->momentum_buffer().defined()) state.emplace_back(name + ".momentum_buffer", sgd->momentum_buffer());
    } else if (auto* bnb = dynamic_cast<const BnbAdamWParamState*>(param_state.get())) {
      // bitsandbytes' state_dict names: the moments as stored (uint8 codes or float32) and each block's absmax.
      for (const auto& [suffix, t] : BnbStateTensors(*bnb)) {
        if (t.defined()) state.emplace_back(name + suffix, t);
      }
      meta[name + ".step"] = std::to_string(bnb->step());
    }
  }
  return checkpoint::SaveSafetensors(dir + "/" + kStateFile, state, meta);
}

namespace {

using StateTensors = std::map<std::string, torch::Tensor>;

// The recipe state to resume from: checkpointer.recipe_checkpoint where given, else the newest
// <checkpoint_dir>/epoch_<N>/recipe_state.safetensors; `*directory` is the folder it is in.
StatusOr<std::string> FindStatePath(const std::string& checkpoint_dir, const Config& config, std::string* directory) {
  if (!config.IsNull("checkpointer.recipe_checkpoint")) {
    StatusOr<std::string> given = config.GetString("checkpointer.recipe_checkpoint", "");
    TM_RETURN_IF_ERROR(given.status());
    *directory = given->substr(0, given->rfind('/'));
    return *given;
  }
  int64_t newest = -1;
  if (DIR* d = ::opendir(checkpoint_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n.rfind("epoch_", 0) == 0 && PathExists(checkpoint_dir + "/" + n + "/" + kStateFile)) {
        try {
          newest = std::max<int64_t>(newest, std::stoll(n.substr(6)));
        } catch (const std::exception&) {
        }
      }
    }
    ::closedir(d);
  }
  if (newest < 0) {
    return Status::NotFound("resume_from_checkpoint=True but " + checkpoint_dir +
                            " holds no epoch_<N>/recipe_state.safetensors; run without resuming first");
  }
  *directory = checkpoint_dir + "/epoch_" + std::to_string(newest);
  return *directory + "/" + kStateFile;
}

// The epoch and step to go on from, checked where they enter: a negative epoch would train with a negative
// schedule and read batches before the first (a damaged or hand-edited state).
Status ReadResumePoint(const checkpoint::LoadedSafetensors& state, const std::string& state_path, ResumePoint* point) {
  StatusOr<int64_t> next_epoch = MetaInt(state.metadata, "next_epoch", state_path);
  StatusOr<int64_t> global_step = MetaInt(state.metadata, "global_step", state_path);
  TM_RETURN_IF_ERROR(next_epoch.status());
  TM_RETURN_IF_ERROR(global_step.status());
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"next_epoch", *next_epoch},
                                   std::pair<const char*, int64_t>{"global_step", *global_step}}) {
    if (value < 0) {
      return Status::InvalidArgument(state_path + ": metadata '" + key + "' is " + std::to_string(value) +
                                     ", below 0; the recipe state is damaged: resume from another epoch's "
                                     "checkpoint (checkpointer.recipe_checkpoint) or train without resuming");
    }
  }
  point->next_epoch = *next_epoch;
  point->global_step = *global_step;
  return Status::OK();
}

// A LoRA run's trained parameters (its adapters) from the state, by name and shape.
Status LoadAdapters(const NamedParameters& trained, const StateTensors& by_name, const std::string& state_path) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : trained) {
    auto it = by_name.find(kAdapterPrefix + name);
    if (it == by_name.end()) return Status::InvalidArgument(state_path + ": " + name + ": missing");
    if (!it->second.sizes().equals(param.sizes())) {
      return Status::InvalidArgument(state_path + ": " + name + ": shape does not match the model's");
    }
    param.copy_(it->second);
  }
  return Status::OK();
}

// An 8-bit AdamW parameter's state into the optimizer's own buffers (unified memory when paged), as saved: the
// codes are not converted. Nothing where the parameter had not been stepped yet.
Status RestoreBnbState(BnbAdamW& bnb, const std::string& name, const torch::Tensor& param, const StateTensors& by_name,
                       const checkpoint::LoadedSafetensors& state, const std::string& state_path) {
  if (by_name.find(name + ".state1") == by_name.end()) return Status::OK();
  std::unique_ptr<BnbAdamWParamState> s = bnb.NewState(param);
  StatusOr<int64_t> step = MetaInt(state.metadata, name + ".step", state_path);
  TM_RETURN_IF_ERROR(step.status());
  s->step(*step);
  for (const auto& [suffix, into] : BnbStateTensors(*s)) {
    auto it = by_name.find(name + suffix);
    if (!into.defined() && it == by_name.end()) continue;
    if (!into.defined() || it == by_name.end() || it->second.scalar_type() != into.scalar_type() ||
        !it->second.sizes().equals(into.sizes())) {
      return Status::InvalidArgument(
          state_path + ": " + name + suffix + ": " +
          (it == by_name.end() ? std::string("missing") : "not the state this optimizer keeps for " + name) +
          " (saved with another optim_bits or min_8bit_size?); resume with the optimizer settings it was saved "
          "with, or train without resuming");
    }
    into.copy_(it->second);
  }
  bnb.state()[param.unsafeGetTensorImpl()] = std::move(s);
  return Status::OK();
}

// Each trained parameter's optimizer state (AdamW's moments and step, 8-bit AdamW's, SGD's momentum) from the
// state; a parameter without one had not been stepped yet.
Status RestoreOptimizerState(torch::optim::Optimizer& optimizer, const NamedParameters& trained,
                             const StateTensors& by_name, const checkpoint::LoadedSafetensors& state,
                             const std::string& state_path) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : trained) {
    void* key = param.unsafeGetTensorImpl();
    auto to_param = [&](const std::string& suffix) -> torch::Tensor {
      auto it = by_name.find(name + suffix);
      return it == by_name.end() ? torch::Tensor() : it->second.to(param.device(), param.scalar_type());
    };
    if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
      torch::Tensor exp_avg = to_param(".exp_avg");
      if (!exp_avg.defined()) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      StatusOr<int64_t> step = MetaInt(state.metadata, name + ".step", state_path);
      TM_RETURN_IF_ERROR(step.status());
      s->step(*step);
      s->exp_avg(exp_avg);
      s->exp_avg_sq(to_param(".exp_avg_sq"));
      torch::Tensor max_sq = to_param(".max_exp_avg_sq");
      if (max_sq.defined()) s->max_exp_avg_sq(max_sq);
      optimizer.state()[key] = std::move(s);
    } else if (auto* bnb = dynamic_cast<BnbAdamW*>(&optimizer)) {
      TM_RETURN_IF_ERROR(RestoreBnbState(*bnb, name, param, by_name, state, state_path));
    } else if (dynamic_cast<torch::optim::SGD*>(&optimizer) != nullptr) {
      torch::Tensor buf = to_param(".momentum_buffer");
      if (!buf.defined()) continue;
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(buf);
      optimizer.state()[key] = std::move(s);
    }
  }
  return Status::OK();
}

}  // namespace

StatusOr<ResumePoint> LoadTrainState(const std::string& checkpoint_dir, const Config& config,
                                     const NamedParameters& trained, torch::optim::Optimizer& optimizer, bool lora,
                                     const std::function<Status(const std::string& dir)>& load_weights) {
  ResumePoint point;
  StatusOr<std::string> state_path = FindStatePath(checkpoint_dir, config, &point.directory);
  TM_RETURN_IF_ERROR(state_path.status());
  StatusOr<checkpoint::LoadedSafetensors> state = checkpoint::LoadSafetensors(*state_path);
  TM_RETURN_IF_ERROR(state.status());
  TM_RETURN_IF_ERROR(CheckRecipeStateValues(*state_path, *state));
  TM_RETURN_IF_ERROR(ReadResumePoint(*state, *state_path, &point));
  const StateTensors by_name(state->tensors.begin(), state->tensors.end());
  if (lora) {
    TM_RETURN_IF_ERROR(LoadAdapters(trained, by_name, *state_path));
  } else {
    TM_RETURN_IF_ERROR(load_weights(point.directory));
  }
  TM_RETURN_IF_ERROR(RestoreOptimizerState(optimizer, trained, by_name, *state, *state_path));
  return point;
}

}  // namespace tmx::recipes
