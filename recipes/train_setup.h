// The training setup in steps a recipe composes: the settings it reads, the model (built, loaded, frozen for
// LoRA), the data, the optimizer, and resuming. Each step reads the config after ApplySchemaDefaults, so
// the defaults are the schema's (train_schema.cc, components.cc), never repeated here. The single-device
// recipes use all of them; new recipes (preference, distillation, distributed) reuse them and replace what
// differs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/matmul_peak.h"  // ChooseThreads, which every recipe calls first
#include "harness/registry.h"
#include "recipes/data/chat_format.h"
#include "recipes/data/loader.h"
#include "recipes/estimate.h"
#include "recipes/model_components.h"
#include "recipes/models/decoder.h"
#include "recipes/optimizers.h"
#include "recipes/run_progress.h"
#include "recipes/train_schema.h"
#include "recipes/train_state.h"

namespace tmx::recipes {

// The recipe keys the training loop reads.
struct TrainingSettings {
  std::string output_dir;
  std::string checkpoint_dir;  // checkpointer.output_dir: where epoch checkpoints go (output_dir without one)
  std::string metrics_path;    // <metric_logger.log_dir>/<filename> (<output_dir>/logs/metrics.jsonl without one)
  c10::ScalarType dtype = c10::kFloat;
  int64_t batch_size = 0, epochs = 0, gradient_accumulation_steps = 0, log_every_n_steps = 0;
  std::optional<int64_t> max_steps_per_epoch;
  std::optional<double> clip_grad_norm;
  bool has_schedule = false;   // an lr_scheduler is configured; without one the learning rate is constant
  int64_t warmup_steps = 0;    // lr_scheduler.num_warmup_steps
  double num_cycles = 0.5;     // lr_scheduler.num_cycles
  bool shuffle = true, save_checkpoints = true, save_adapter_weights_only = false, log_peak_memory = true;
  bool activation_checkpointing = false, resume = false;
  // With activation checkpointing, every this many layers is recomputed (Decoder::set_activation_checkpointing_every):
  // 1 for enable_activation_checkpointing and ac_mode=full, ac_option for ac_mode=selective.
  int64_t activation_checkpointing_every = 1;
  bool activation_offloading = false;  // checkpointed layer inputs wait in host memory (Decoder)
  bool optimizer_in_bwd = false;  // step each trained tensor inside backward (recipes/optimizer_in_backward.h)
  // Quantisation-aware training (the qat_* recipes' quantizer): int4 weight groups of this size, int8 activations
  // (models/fake_quant.h); 0 without a quantizer.
  int64_t fake_quant_group_size = 0;
  // fake_quant_after_n_steps: fake quantisation starts once this many optimizer steps are done; none: from the
  // first step.
  std::optional<int64_t> fake_quant_after_n_steps;
  // Post-training int4 weights (generation with an Int8DynActInt4WeightQuantizer): the linears are quantised in
  // groups of this size before the checkpoint, which the quantize recipe wrote, loads; 0: plain weights.
  int64_t int4_group_size = 0;
  uint64_t seed = 0;           // the config's seed, or a random one when it is null
  // Data-parallel ranks (set by the distributed recipes, not read from the config): each reads shard `rank` of
  // `world_size` of the data, batch_size samples per micro-batch (so the global batch is batch_size x world_size).
  int64_t world_size = 1, rank = 0;
};

// The config's seed, or a random one when it is null.
StatusOr<uint64_t> ReadSeed(const Config& config);

StatusOr<TrainingSettings> ReadTrainingSettings(const Config& config, TrainKind kind);


// The model a recipe trains, on its device, with the parameters that train.
struct TrainableModel {
  ModelChoice choice;
  models::Decoder model{nullptr};
  NamedParameters trained;                 // what the optimizer updates, by state-dict name
  std::vector<at::Tensor> trained_tensors; // the same tensors, as the optimizer and clipping take them
  int64_t total_parameters = 0;
  int64_t trainable_parameters = 0;
  int64_t fake_quantized_linears = 0;  // with a QAT quantizer (settings.fake_quant_group_size)
};

// Builds the config's model (seeded from the current torch RNG) with `dtype` on `device`, loads its starting
// weights (LoadStartingWeights: checkpointer.checkpoint_dir, or the seed's; `allow_stand_ins` and `stand_ins`
// as there), sets DoRA's magnitudes from the loaded base, and for LoRA freezes the base. With a QAT quantizer
// (settings.fake_quant_group_size) it attaches fake quantisation as torchtune's QAT recipes do: every linear the
// group size fits for full training, the adapted linears for LoRA (models::AttachFakeQuantization). With
// settings.int4_group_size the linears are quantised (models::QuantizeInt4Linears) before the weights load. A model whose kind does
// not match the recipe's (a lora_ model for full fine-tuning, or the reverse) is InvalidArgument naming the fix.
// `progress` (when set) is told each phase: building (with the parameter count and dtype), then loading the
// weights (bytes of the total).
StatusOr<TrainableModel> SetupModel(const Config& config, const Registry& registry, TrainKind kind,
                                    const TrainingSettings& settings, const c10::Device& device, bool allow_stand_ins,
                                    std::vector<std::string>* stand_ins, RunProgress* progress = nullptr);

// The config's tokenizer component, for a model of `model`'s vocabulary: its max_seq_len, or the model's (at most
// 2048) when it sets none. A missing tokenizer file is NotFound naming it, unless `allow_stand_ins`: then the
// shipped sample of the same kind is used and a line saying so is added to `stand_ins`.
StatusOr<std::unique_ptr<data::ModelTokenizer>> SetupTokenizer(const Config& config, const models::DecoderArgs& model,
                                                                bool allow_stand_ins,
                                                                std::vector<std::string>* stand_ins);

// Why the model cannot be fed `id`, which `tokenizer` gives for `where` ("its padding", "the prompt"): outside
// its vocabulary of `vocab_size` ids; InvalidArgument at the config's tokenizer, naming the id's piece and the fix.
Status IdOutsideVocabulary(const Config& config, const data::ModelTokenizer& tokenizer, int64_t id,
                           const std::string& where, int64_t vocab_size);

// The id the model is fed for the tokenizer's `id`: itself, or for a proxy whose vocabulary was cut
// (DecoderArgs::vocab_cut_from) the id folded into it (id mod vocab_size), so every id of the real data indexes
// the cut embedding. Negative ids (kIgnoreIndex labels) stay as they are.
int64_t FoldIntoVocabulary(int64_t id, const models::DecoderArgs& model);

// The config's tokenizer and dataset components, tokenized and batched (seeded by settings.seed). Samples are
// cut at the tokenizer's max_seq_len, or at the model's (at most 2048) when it sets none. A tokenizer whose
// ids do not fit the model's vocabulary is InvalidArgument. A missing tokenizer file or dataset is NotFound
// naming what and where, unless `allow_stand_ins`: then the shipped sample of the same kind is used and a
// line saying so is added to `stand_ins`.
// `dataset_key`: the dataset component to read ("dataset", or "dataset_val" for validation data).
StatusOr<data::DataLoader> SetupData(const Config& config, const TrainingSettings& settings,
                                     const models::DecoderArgs& model, bool allow_stand_ins,
                                     std::vector<std::string>* stand_ins, const std::string& dataset_key = "dataset");

// SetupData for the preference recipes (DPO): the config's preference dataset (`dataset`, e.g.
// hh_rlhf_helpful_dataset) as chosen/rejected pairs, in a DataLoader::CreatePreference loader. The same
// tokenizer, vocabulary checks and stand-ins as SetupData.
StatusOr<data::DataLoader> SetupPreferenceData(const Config& config, const TrainingSettings& settings,
                                               const models::DecoderArgs& model, bool allow_stand_ins,
                                               std::vector<std::string>* stand_ins);

// The model's input files this machine lacks, found without building or reading anything: the starting
// weights (MissingCheckpointFiles) and the tokenizer's files, each problem naming the key and the fix.
std::vector<Problem> MissingModelInputs(const Config& config, const Registry& registry);

// Every input file a fine-tuning run of `config` reads that this machine lacks, found without building or
// reading anything (RecipeSpec::missing_inputs): the starting weights (MissingCheckpointFiles), the tokenizer's
// files, and the dataset's (and dataset_val's, when validation runs). Each problem names the key and the fix.
std::vector<Problem> MissingInputs(const Config& config, const Registry& registry);

// What stops a run that writes only into output_dir (generation's summary, quantize's checkpoint) from writing
// there, found without creating anything: output_dir named with the cause and the fix.
std::vector<Problem> OutputDirProblems(const Config& config);

// What stops a fine-tuning run of `config` from writing its outputs, found without creating anything: an
// output folder (output_dir, checkpointer.output_dir, metric_logger.log_dir) this process cannot create or
// write (FolderWriteProblem), and checkpoints (EstimateCheckpointBytes) larger than the free space where they
// go (DiskSpaceProblem). Each names the folder and the fix; the recipes add them to missing_inputs.
std::vector<Problem> OutputProblems(const Config& config, const Registry& registry, TrainKind kind);

// The problem of writing checkpoints of `need` bytes into `folder` (the config's `key`) on a filesystem with
// `free_bytes` free, naming both numbers and the fix; none when they fit.
std::optional<Problem> DiskSpaceProblem(const Config& config, const std::string& key, const std::string& folder,
                                        const CheckpointBytes& need, int64_t free_bytes);

// The configured optimizer over `tensors` (the model's trained parameters, or a rank's shards of them).
StatusOr<OptimizerPtr> SetupOptimizer(const Config& config, const Registry& registry,
                                      const std::vector<at::Tensor>& tensors);

}  // namespace tmx::recipes
