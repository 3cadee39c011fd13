#include "recipes/estimate.h"

#include <algorithm>

#include "recipes/model_components.h"
#include "recipes/optimizers.h"

namespace tmx::recipes {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

}  // namespace

StatusOr<CellEstimate> EstimateFinetune(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        TrainKind kind, int ranks, Sharding sharding) {
  StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
  if (!choice.ok()) return choice.status();
  StatusOr<const OptimizerComponent*> optimizer = OptimizerOf(config, registry);
  if (!optimizer.ok()) return optimizer.status();
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> batch = config.GetInt("batch_size");
  StatusOr<bool> checkpointing = config.GetBool("enable_activation_checkpointing");
  StatusOr<int64_t> max_seq_len = config.GetInt("tokenizer.max_seq_len", kTypicalSeqLen);
  for (const Status& s : {dtype.status(), batch.status(), checkpointing.status(), max_seq_len.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  CellEstimate e;
  CountModelParameters(*choice, &e.parameters, &e.trainable_parameters);
  const models::DecoderArgs& args = choice->args;
  int64_t bytes = *dtype == "fp32" ? 4 : 2;
  int64_t b = *batch;
  int64_t t = std::min(*max_seq_len, kTypicalSeqLen);
  int64_t weights = e.parameters * bytes;  // adapters included
  int64_t grads = e.trainable_parameters * bytes;
  int64_t states = e.trainable_parameters * bytes * (*optimizer)->StateTensorsPerParameter(config);
  if (sharding != Sharding::kNone) states = (states + ranks - 1) / ranks;
  if (sharding == Sharding::kFull) {
    // A shard of everything, and one layer's weights and gradients whole at a time.
    const int64_t layers = std::max<int64_t>(1, choice->args.num_layers);
    weights = weights / ranks + weights / layers;
    grads = grads / ranks + grads / layers;
  }
  // Activations kept for backward per layer: inputs of norms and projections at the model width, queries,
  // keys, values and attention output at the attention width (heads x head_dim, wider than the model in
  // Gemma 7B and Qwen3), and the MLP's.
  int64_t attention_width = args.num_heads * args.resolved_head_dim();
  int64_t per_layer = b * t * (6 * args.embed_dim + 4 * attention_width + 4 * args.intermediate_dim) * bytes;
  const bool recompute = *checkpointing || sharding == Sharding::kFull;  // fully sharded layers recompute
  int64_t activations = recompute ? args.num_layers * b * t * args.embed_dim * bytes + per_layer
                                       : args.num_layers * per_layer;
  int64_t logits = b * t * args.vocab_size * (bytes + 4 + 4);
  bool host_memory = device.traits().peak_memory == DeviceTypeTraits::PeakMemory::kProcessRss;
  int64_t runtime = host_memory ? kGiB : kGiB / 2;
  e.peak_memory_bytes = (weights + grads + states + activations + logits + runtime) * (host_memory ? ranks : 1);
  double passes = kind == TrainKind::kLora ? 2.0 : 3.0;
  e.work = passes * static_cast<double>(e.parameters) * static_cast<double>(b * t) * ranks;
  return e;
}

}  // namespace tmx::recipes
