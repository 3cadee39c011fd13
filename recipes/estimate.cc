#include "recipes/estimate.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "recipes/model_components.h"
#include "recipes/models/nf4.h"
#include "recipes/optimizers.h"
#include "recipes/vision_components.h"

namespace tmx::recipes {
namespace {

// What both predictions start from: the config's model, its optimizer and its weights' dtype.
struct Trained {
  ModelChoice choice;  // a text model's (unset for a vision model)
  const OptimizerComponent* optimizer = nullptr;
  std::string dtype;      // "bf16", "fp32"
  int64_t bytes = 0;      // per weight in that dtype
  ParameterCounts counts;
  bool lora = false;
};

// A text model's counts (CountModelParameters), or a vision model's (CountVisionParameters) when `vision`.
StatusOr<Trained> TrainedOf(const Config& config, const Registry& registry, bool vision = false) {
  Trained t;
  if (vision) {
    StatusOr<VisionModelChoice> choice = VisionModelFromConfig(config, registry);
    if (!choice.ok()) return choice.status();
    t.counts = CountVisionParameters(*choice);
    t.lora = choice->lora.has_value();
  } else {
    StatusOr<ModelChoice> choice = ModelFromConfig(config, registry);
    if (!choice.ok()) return choice.status();
    t.choice = *choice;
    t.counts = CountModelParameters(t.choice);
    t.lora = t.choice.lora.has_value();
  }
  StatusOr<const OptimizerComponent*> optimizer = OptimizerOf(config, registry);
  if (!optimizer.ok()) return optimizer.status();
  StatusOr<std::string> dtype = config.GetString("dtype");
  if (!dtype.ok()) return dtype.status();
  t.optimizer = *optimizer;
  t.dtype = *dtype;
  t.bytes = static_cast<int64_t>(c10::elementSize(DtypeNamed(*dtype)));
  return t;
}

// Elements of the largest weight `lora` adapts.
int64_t LargestAdaptedWeight(const models::DecoderArgs& args, const models::LoraArgs& lora) {
  int64_t largest = 0;
  for (const models::LinearShape& l : models::LinearShapes(args)) {
    if (models::Adapts(lora, l.name)) largest = std::max(largest, l.in_features * l.out_features);
  }
  return largest;
}

// The MLP width whose activations a token keeps in the widest layer: a mixture of experts keeps those of the
// token's experts and the shared one.
double ActiveMlpWidth(const models::DecoderArgs& args) {
  double width = 0;
  for (int64_t i = 0; i < args.num_layers; ++i) {
    const int64_t mlps = args.moe_in_layer(i) ? args.experts_per_token + (args.shared_expert ? 1 : 0) : 1;
    width = std::max(width, static_cast<double>(mlps * args.mlp_dim_of_layer(i)));
  }
  return width;
}

// A vision model's parts as a step holds them, per sample: the decoder's text tokens and the encoder's image tokens
// (one image a sample, cut into every tile it may have: the Cauldron's and LLaVA's records hold one).
struct VisionShape {
  double text_tokens = 0;    // per sample
  double image_tokens = 0;   // per sample: max_num_tiles x tokens a tile padded to a multiple of 8
  double encoder_layers = 0; // CLIP and projection layers
};

VisionShape VisionShapeOf(const models::VisionModelArgs& a, double text_tokens) {
  const int64_t tile_tokens = (a.encoder.tokens_per_tile() + 7) / 8 * 8;
  return {text_tokens, static_cast<double>(a.encoder.max_num_tiles * tile_tokens),
          static_cast<double>(a.encoder.num_layers + a.encoder.num_layers_projection)};
}

// The activations a vision step keeps for backward (bytes; b samples), as the text estimate counts a layer's:
// the decoder's self-attention layers over the text, each fusion layer's text side and its keys and values over
// the image tokens, the encoder's layers over the image tokens (CLIP width, 4x MLP), the kept hidden states and
// the projection's output; recomputing layers keep their inputs and one layer's whole. Attention runs in
// SDPA's fused kernels (flash on the CPU, memory-efficient on CUDA), which keep no scores, but the encoder's
// padding mask (an image's tokens squared, boolean) is turned into one of the weights' dtype for them: both count.
double VisionActivations(const models::VisionModelArgs& a, const VisionShape& s, double b, double bytes,
                         bool recompute) {
  const models::DecoderArgs& d = a.decoder;
  const double dim = static_cast<double>(d.embed_dim), e = static_cast<double>(a.encoder.embed_dim);
  const double attention = static_cast<double>(d.num_heads * d.resolved_head_dim());
  const double kv = static_cast<double>(d.num_kv_heads * d.resolved_head_dim());
  const double fusion_layers = static_cast<double>(a.fusion_layers().size());
  const double text = b * s.text_tokens, image = b * s.image_tokens;
  const double self_layer = text * (6 * dim + 4 * attention + 4 * static_cast<double>(d.intermediate_dim)) * bytes;
  const double fusion_layer = self_layer + 2 * image * kv * bytes;
  const double encoder_layer = image * (6 * e + 4 * e + 4 * 4 * e) * bytes;
  const double layers = static_cast<double>(d.num_layers) + fusion_layers;
  double kept = recompute ? layers * text * dim * bytes + s.encoder_layers * image * e * bytes +
                                std::max({self_layer, fusion_layer, encoder_layer})
                          : static_cast<double>(d.num_layers) * self_layer + fusion_layers * fusion_layer +
                                s.encoder_layers * encoder_layer;
  // The hidden states the projection concatenates, the concatenation and the projection's output.
  const double hidden = static_cast<double>(a.encoder.hidden_states.size());
  kept += image * ((2 * hidden + 1) * e + dim) * bytes;
  return kept + b * s.image_tokens * s.image_tokens * (1 + bytes);
}

// The fine-tuning estimate of a vision model (EstimateFinetune's terms; see the header). One process: the vision
// loop runs no ranks (vision_training.h).
StatusOr<CellEstimate> EstimateVisionFinetune(const Config& config, const Registry& registry,
                                              const DeviceInfo& device, TrainKind kind) {
  StatusOr<VisionModelChoice> choice = VisionModelFromConfig(config, registry);
  StatusOr<const OptimizerComponent*> optimizer = OptimizerOf(config, registry);
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> batch = config.GetInt("batch_size");
  StatusOr<bool> checkpointing = config.GetBool("enable_activation_checkpointing");
  StatusOr<int64_t> max_seq_len = config.GetInt("tokenizer.max_seq_len", kTypicalSeqLen);
  for (const Status& s : {choice.status(), optimizer.status(), dtype.status(), batch.status(), checkpointing.status(),
                          max_seq_len.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  const models::VisionModelArgs& a = choice->args;
  const int64_t dtype_bytes = static_cast<int64_t>(c10::elementSize(DtypeNamed(*dtype)));
  const VisionParameterCounts counts = CountVisionParameters(*choice);
  CellEstimate e;
  e.parameters = counts.total;
  e.trainable_parameters = counts.trainable;
  const double bytes = static_cast<double>(dtype_bytes), b = static_cast<double>(*batch);
  const VisionShape shape = VisionShapeOf(a, static_cast<double>(std::min(*max_seq_len, kTypicalSeqLen)));
  const double largest_quantized =
      counts.quantized > 0 ? static_cast<double>(std::max(a.decoder.intermediate_dim, a.decoder.embed_dim) *
                                                 a.decoder.embed_dim)
                           : 0;
  const double weights = static_cast<double>(counts.total - counts.quantized) * bytes +
                         static_cast<double>(counts.quantized) * models::Nf4BytesPerWeight(dtype_bytes) +
                         largest_quantized * (8 + 2 * bytes);
  const double grads = static_cast<double>(counts.trainable) * bytes;
  const double states =
      static_cast<double>(counts.trainable) * (*optimizer)->StateBytesPerParameter(config, dtype_bytes);
  const double activations = VisionActivations(a, shape, b, bytes, *checkpointing);
  const double logits = b * shape.text_tokens * static_cast<double>(a.decoder.vocab_size) * (bytes + 4 + 4);
  const double images = b * static_cast<double>(a.encoder.max_num_tiles * a.encoder.in_channels *
                                                a.encoder.tile_size * a.encoder.tile_size) * 4;
  const double peak = weights + grads + states + activations + logits + images +
                      static_cast<double>(device.traits().RuntimeBytes());
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  // Each part's parameters over its own tokens: the encoder's over the image tokens, the rest over the text.
  const double passes = kind == TrainKind::kLora ? 2.0 : 3.0;
  e.work = passes * b * (static_cast<double>(counts.encoder) * shape.image_tokens +
                         static_cast<double>(counts.total - counts.encoder) * shape.text_tokens);
  return e;
}

// The trained parameters' gradients. With optimizer_in_bwd each is applied and freed inside backward: at most
// the largest trained tensor's is held (the embedding in full fine-tuning; LoRA's are far smaller than a layer's
// share).
double GradientBytes(const Config& config, const ModelChoice& choice, int64_t trainable, double bytes) {
  const models::DecoderArgs& args = choice.args;
  double grads = static_cast<double>(trainable) * bytes;
  StatusOr<bool> in_backward = config.GetBool("optimizer_in_bwd", false);
  if (in_backward.ok() && *in_backward) {
    const double largest = choice.lora ? grads / static_cast<double>(std::max<int64_t>(1, args.num_layers))
                                       : static_cast<double>(args.vocab_size * args.embed_dim) * bytes;
    grads = std::min(grads, largest);
  }
  return grads;
}

// Fully sharded over `n` ranks: the layers' weights and gradients as shards, with one layer's whole at a time;
// what lies outside the layers (embeddings, final norm, output) whole on every rank
// (recipes/distributed/sharded_layers.h). A layer's backward holds its gradients whole twice more (packed flat,
// and the reduce-scatter's copy): `*layer_in_flight`.
void ShardLayers(const ParameterCounts& counts, const models::DecoderArgs& args, double bytes, double n,
                 double* weights, double* grads, double* layer_in_flight) {
  const double layers = static_cast<double>(std::max<int64_t>(1, args.num_layers));
  const double outside = static_cast<double>(counts.outside_layers) * bytes;
  const double trained_outside = static_cast<double>(counts.trainable_outside_layers) * bytes;
  const double layer_weights = std::max(0.0, *weights - outside), layer_grads = std::max(0.0, *grads - trained_outside);
  *weights = outside + std::floor(layer_weights / n) + std::floor(layer_weights / layers);
  *grads = trained_outside + std::floor(layer_grads / n) + std::floor(layer_grads / layers);
  *layer_in_flight = 2 * std::floor(layer_grads / layers);
}

// How often ac_mode recomputes a layer (train_setup.h's activation_checkpointing_every): 1 for full, ac_option
// (at least 1) for selective; 0 without ac_mode (a recipe without the key, or null).
int64_t SelectiveCheckpointEvery(const Config& config) {
  if (!config.Find("ac_mode").IsScalar() || config.IsNull("ac_mode")) return 0;
  if (config.Find("ac_mode").Scalar() != "selective") return 1;
  StatusOr<int64_t> every = config.GetInt("ac_option", 1);
  return every.ok() ? std::max<int64_t>(*every, 1) : 1;
}

// Activations kept for backward for a batch of `b` x `t` tokens. Per layer: inputs of norms and projections at the
// model width, queries, keys, values and attention output at the attention width (heads x head_dim, wider than
// the model in Gemma 7B and Qwen3), and the MLP's. Recomputing layers (activation checkpointing, or fully
// sharded) keep only their inputs; offloaded (single device, with checkpointing) those wait in host memory, and
// the device holds about two at a time: the one going out and the one coming back.
double ActivationBytes(const Config& config, const models::DecoderArgs& args, const DeviceInfo& device, double b,
                       double t, double bytes, bool checkpointing, Sharding sharding) {
  const double attention_width = static_cast<double>(args.num_heads * args.resolved_head_dim());
  const double per_layer = b * t *
                           (6 * static_cast<double>(args.embed_dim) + 4 * attention_width + 4 * ActiveMlpWidth(args)) *
                           bytes;
  const double layers = static_cast<double>(args.num_layers);
  const bool recompute = checkpointing || sharding == Sharding::kFull;
  StatusOr<bool> offloading = config.GetBool("enable_activation_offloading", false);
  const bool offloaded = checkpointing && sharding == Sharding::kNone && offloading.ok() && *offloading &&
                         device.traits().activation_offloading;
  const double layer_input = b * t * static_cast<double>(args.embed_dim) * bytes;
  const double every = static_cast<double>(SelectiveCheckpointEvery(config));
  if (every > 0 && sharding != Sharding::kFull) {  // ac_mode: every `every`-th layer keeps only its input
    const double recomputed = std::floor(layers / every);
    return recomputed * layer_input + (layers - recomputed + (recomputed > 0 ? 1 : 0)) * per_layer;
  }
  return recompute ? (offloaded ? std::min(2.0, layers) : layers) * layer_input + per_layer : layers * per_layer;
}

}  // namespace

StatusOr<CellEstimate> EstimateFinetune(const Config& config, const Registry& registry, const DeviceInfo& device,
                                        TrainKind kind, int ranks, Sharding sharding) {
  if (VisionComponentOf(config, registry) != nullptr) return EstimateVisionFinetune(config, registry, device, kind);
  StatusOr<Trained> trained = TrainedOf(config, registry);
  if (!trained.ok()) return trained.status();
  StatusOr<int64_t> batch = config.GetInt("batch_size");
  StatusOr<bool> checkpointing = config.GetBool("enable_activation_checkpointing");
  StatusOr<int64_t> max_seq_len = config.GetInt("tokenizer.max_seq_len", kTypicalSeqLen);
  for (const Status& s : {batch.status(), checkpointing.status(), max_seq_len.status()}) TM_RETURN_IF_ERROR(s);
  const ModelChoice& choice = trained->choice;
  CellEstimate e;
  const ParameterCounts& counts = trained->counts;
  e.parameters = counts.total;
  e.trainable_parameters = counts.trainable;
  const int64_t quantized = counts.quantized;
  const models::DecoderArgs& args = choice.args;
  // In double: a hostile batch size or sequence length must give an enormous prediction (which the plan
  // and `tune validate` then report), not an overflowed, negative one.
  const double bytes = static_cast<double>(trained->bytes);
  const double b = static_cast<double>(*batch);
  const double t = static_cast<double>(std::min(*max_seq_len, kTypicalSeqLen));
  const double n = ranks;
  // Adapters included. QLoRA's NF4 bases take about half a byte each (models/nf4.h), and one projection at a
  // time is dequantised whole: its codes as indices (8 bytes a weight), the two halves and the weight.
  const double largest_quantized =
      quantized > 0 ? static_cast<double>(std::max(args.intermediate_dim, args.num_heads * args.resolved_head_dim()) *
                                          args.embed_dim)
                    : 0;
  double weights = static_cast<double>(e.parameters - quantized) * bytes;
  // Every rank holds the whole NF4 base (recipes/distributed/sharded_layers.h): never divided by the ranks.
  const double nf4_weights =
      static_cast<double>(quantized) * models::Nf4BytesPerWeight(trained->bytes) + largest_quantized * (8 + 2 * bytes);
  double grads = GradientBytes(config, choice, e.trainable_parameters, bytes);
  // Where each rank's gradients live in a buffer between steps (the distributed recipes' DataParallel), a
  // gradient autograd computes exists beside the buffer until added to it, and the reduction copies the buffer:
  // two gradients the size of the output projection at the end of backward (tied: the projection's and its sum
  // with the lookup's; untied: the embedding's and the output's). Measured on 2 cpu ranks: Gemma 2 9B's 1-layer
  // proxy, 11.4 bytes an id per rank and embedding width, where weights, gradients, optimizer state and logits
  // count 6.9; Llama 3 8B's at 64128 ids, 14.54 GiB against 14.09 predicted with two, 13.11 with one.
  const bool buffered = ranks > 1 || sharding != Sharding::kNone;
  const double in_flight =
      buffered && !choice.lora ? 2.0 * static_cast<double>(args.vocab_size * args.embed_dim) * bytes : 0;
  double states = static_cast<double>(e.trainable_parameters) *
                  trained->optimizer->StateBytesPerParameter(config, trained->bytes);
  if (sharding != Sharding::kNone) states = std::ceil(states / n);
  // Fully sharded, a layer's backward holds its gradients whole twice more than counted below: packed flat,
  // and the reduce-scatter's copy of that (Gemma 2 27B's 1-layer proxy on 2 cpu ranks: 15.82 GiB measured,
  // 15.34 predicted with them). It happens in another phase than the gradients in flight above, so the larger of
  // the two counts.
  double layer_in_flight = 0;
  if (sharding == Sharding::kFull) ShardLayers(counts, args, bytes, n, &weights, &grads, &layer_in_flight);
  const double activations = ActivationBytes(config, args, device, b, t, bytes, *checkpointing, sharding);
  const double logits = b * t * static_cast<double>(args.vocab_size) * (bytes + 4 + 4);
  // DoRA forms each adapted layer's W + (alpha/rank) B A for its row norms, one layer at a time and without
  // gradient: the update and the sum of the largest adapted weight live at once.
  const double dora = choice.lora && choice.lora->use_dora
                          ? 2 * static_cast<double>(LargestAdaptedWeight(args, *choice.lora)) * bytes
                          : 0;
  const bool host_memory = device.traits().HostMemory();
  const double runtime = static_cast<double>(device.traits().RuntimeBytes());
  const double peak =
      (weights + nf4_weights + grads + std::max(in_flight, layer_in_flight) + states + activations + logits + dora +
       runtime) *
      (host_memory ? n : 1);
  // 2^62 bytes (4 EiB) stands for "more than any machine has"; it keeps sums of predictions in range.
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  const double passes = kind == TrainKind::kLora ? 2.0 : 3.0;
  e.work = passes * static_cast<double>(e.parameters) * b * t * n;
  return e;
}

StatusOr<ExtraModelInputs> ReadExtraModelInputs(const Config& config, const Registry& registry,
                                                const std::string& model_key) {
  StatusOr<ModelChoice> model = ModelFromConfig(config, registry, model_key);
  StatusOr<std::string> dtype = config.GetString("dtype");
  StatusOr<int64_t> batch = config.GetInt("batch_size");
  StatusOr<int64_t> max_seq_len = config.GetInt("tokenizer.max_seq_len", kTypicalSeqLen);
  for (const Status& s : {model.status(), dtype.status(), batch.status(), max_seq_len.status()}) {
    TM_RETURN_IF_ERROR(s);
  }
  return ExtraModelInputs{*model, *dtype, static_cast<double>(c10::elementSize(DtypeNamed(*dtype))),
                          static_cast<double>(*batch) * static_cast<double>(std::min(*max_seq_len, kTypicalSeqLen))};
}

StatusOr<CheckpointBytes> EstimateCheckpointBytes(const Config& config, const Registry& registry) {
  StatusOr<Trained> trained = TrainedOf(config, registry, VisionComponentOf(config, registry) != nullptr);
  if (!trained.ok()) return trained.status();
  StatusOr<int64_t> epochs = config.GetInt("epochs");
  StatusOr<bool> save = config.GetBool("save_checkpoints");
  StatusOr<bool> adapter_only = config.GetBool("save_adapter_weights_only", false);
  for (const Status& s : {epochs.status(), save.status(), adapter_only.status()}) TM_RETURN_IF_ERROR(s);
  constexpr int64_t kHeader = int64_t{1} << 20;  // a file's header and padding, generously
  CheckpointBytes c;
  const ParameterCounts& counts = trained->counts;
  c.parameters = counts.total;
  const int64_t trainable = counts.trainable;
  c.dtype = trained->dtype;
  const int64_t bytes = trained->bytes;
  const double state_bytes = trained->optimizer->StateBytesPerParameter(config, bytes);
  const bool lora = trained->lora;
  if (!lora || !*adapter_only) c.weights = c.parameters * bytes + kHeader;
  if (lora) c.adapters = trainable * bytes + kHeader;
  c.train_state = static_cast<int64_t>(std::ceil(static_cast<double>(trainable) * state_bytes)) +
                  trainable * (lora ? bytes : 0) + kHeader;
  c.epochs = *save ? std::max<int64_t>(0, *epochs) : 0;
  return c;
}

std::string CheckpointBytes::Describe() const {
  std::string parts;
  if (weights > 0) parts += "weights " + FormatBytes(weights) + ", ";
  if (adapters > 0) parts += "adapters " + FormatBytes(adapters) + ", ";
  parts += "optimizer state " + FormatBytes(train_state);
  return std::to_string(epochs) + " epoch" + (epochs == 1 ? "" : "s") + " x " + FormatBytes(per_epoch()) + " (" +
         parts + ")";
}

}  // namespace tmx::recipes
