// The fine-tuning recipes' cell estimate: how the configuration moves the prediction.
#include "recipes/estimate.h"

#include <gtest/gtest.h>

#include "harness/config_store.h"
#include "recipes/builtin.h"
#include "recipes/models/vision_model.h"

namespace tmx::recipes {
namespace {

DeviceInfo Cpu() {
  DeviceInfo d;
  d.id = d.type = "cpu";
  return d;
}

CellEstimate Estimate(const std::string& config, std::vector<std::string> overrides, const DeviceInfo& device = Cpu()) {
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig(config, registry);
  EXPECT_TRUE(located.ok());
  StatusOr<Config> c = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  StatusOr<CellEstimate> e = located->recipe->estimate(*c, registry, device);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : CellEstimate();
}

// torchtune's 1B full config steps a paged 8-bit AdamW inside backward (CUDA only): swapped for AdamW.
std::vector<std::string> Full(std::vector<std::string> more) {
  std::vector<std::string> o = {"optimizer=torch.optim.AdamW", "optimizer_in_bwd=False"};
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

TEST(EstimateTest, TheDistributedLayoutMovesThePrediction) {
  // cpu cells run 2 ranks sharing the host: replicated, they hold two whole models; sharding saves optimizer
  // state, full sharding also weights and gradients.
  const std::vector<std::string> fp32 = {"dtype=fp32", "batch_size=1", "enable_activation_checkpointing=True"};
  auto with = [&](const std::string& layout) {
    std::vector<std::string> o = fp32;
    o.push_back(layout);
    return Estimate("llama3_2/1B_full", o);
  };
  CellEstimate single = Estimate("llama3_2/1B_full_single_device",
                                 Full({"dtype=fp32", "batch_size=1", "enable_activation_checkpointing=True"}));
  CellEstimate replicated = with("data_parallel_shard_dim=1");
  CellEstimate grad_op = with("fsdp_reshard_after_forward=False");
  CellEstimate full_shard = with("fsdp_reshard_after_forward=True");
  // Replicated, each rank is the single device's run plus the gradients in flight into its gradient buffer:
  // the tied embedding's two (the output projection's and the sum with the lookup's), 128256 x 2048 each.
  EXPECT_EQ(replicated.peak_memory_bytes, 2 * single.peak_memory_bytes + 2 * 2 * int64_t{128256} * 2048 * 4);
  EXPECT_LT(grad_op.peak_memory_bytes, replicated.peak_memory_bytes);
  EXPECT_LT(full_shard.peak_memory_bytes, grad_op.peak_memory_bytes);
  // Full sharding splits the layers' weights and gradients, each rank keeping its half and one layer of 16
  // whole; the embedding (tied, 128256 x 2048) stays whole on both (recipes/distributed/sharded_layers.h).
  const double layer_parameters = 1235814400.0 - (128256.0 * 2048 + 2048);
  EXPECT_NEAR(static_cast<double>(grad_op.peak_memory_bytes - full_shard.peak_memory_bytes),
              2 /* ranks */ * 2 /* weights, gradients */ * layer_parameters * 4 * (1 - 1.0 / 2 - 1.0 / 16), 16);
  EXPECT_DOUBLE_EQ(replicated.work, 2 * single.work);  // both ranks' tokens
}

// ac_mode=full keeps what enable_activation_checkpointing=True keeps; selective every 2nd layer keeps the inputs of
// 8 of 16 layers and the whole activations of the rest, between the two; under full sharding every layer is
// recomputed by its gathering already, so ac_mode moves nothing there.
TEST(EstimateTest, SelectiveCheckpointingKeepsTheActivationsOfTheLayersItDoesNotRecompute) {
  auto with = [](std::vector<std::string> more) {
    std::vector<std::string> o = {"dtype=fp32", "batch_size=1", "data_parallel_shard_dim=1"};
    o.insert(o.end(), more.begin(), more.end());
    return Estimate("llama3_2/1B_full", o).peak_memory_bytes;
  };
  const int64_t none = with({"enable_activation_checkpointing=False"});
  const int64_t checkpointed = with({"enable_activation_checkpointing=True"});
  const int64_t full = with({"enable_activation_checkpointing=False", "ac_mode=full"});
  const int64_t selective = with({"enable_activation_checkpointing=False", "ac_mode=selective", "ac_option=2"});
  EXPECT_EQ(full, checkpointed);
  EXPECT_LT(full, selective);
  EXPECT_LT(selective, none);
  EXPECT_EQ(with({"enable_activation_checkpointing=False", "ac_mode=selective", "ac_option=0"}), full);
  auto sharded = [](std::vector<std::string> more) {
    std::vector<std::string> o = {"dtype=fp32", "batch_size=1", "enable_activation_checkpointing=False"};
    o.insert(o.end(), more.begin(), more.end());
    return Estimate("llama3_2/1B_full", o).peak_memory_bytes;
  };
  EXPECT_EQ(sharded({"ac_mode=selective", "ac_option=2"}), sharded({}));
}

TEST(EstimateTest, AHostileBatchGivesAnEnormousPredictionNotAnOverflow) {
  // batch x sequence x vocabulary x bytes overflowed int64 and the prediction came out negative or small.
  CellEstimate huge = Estimate("tiny/lora_single_device", {"batch_size=1000000000000"});
  EXPECT_GT(huge.peak_memory_bytes, int64_t{1} << 50);
  CellEstimate beyond = Estimate("llama3_2/1B_lora_single_device", {"batch_size=1000000000000000000"});
  EXPECT_EQ(beyond.peak_memory_bytes, int64_t{1} << 62);
  EXPECT_GT(beyond.work, 0);
}

TEST(EstimateTest, TheConfigMovesThePrediction) {
  CellEstimate lora = Estimate("llama3_2/1B_lora_single_device", {});
  CellEstimate full = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False"}));
  EXPECT_EQ(full.parameters, 1235814400);
  EXPECT_GT(lora.parameters, full.parameters);  // the adapters
  EXPECT_LT(lora.trainable_parameters, full.parameters / 20);
  EXPECT_LT(lora.peak_memory_bytes, full.peak_memory_bytes);
  EXPECT_LT(lora.work, full.work);  // no weight gradients for the frozen base

  CellEstimate checkpointed = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=True"}));
  EXPECT_LT(checkpointed.peak_memory_bytes, full.peak_memory_bytes);
  CellEstimate sgd = Estimate("llama3_2/1B_full_single_device",
                              {"enable_activation_checkpointing=False", "optimizer=torch.optim.SGD", "optimizer_in_bwd=False"});
  // AdamW keeps two bf16 states per trained parameter, plain SGD none.
  EXPECT_EQ(full.peak_memory_bytes - sgd.peak_memory_bytes, 2 * 2 * full.parameters);
  CellEstimate fp32 = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False", "dtype=fp32"}));
  EXPECT_GT(fp32.peak_memory_bytes, full.peak_memory_bytes);
  CellEstimate batch8 = Estimate("llama3_2/1B_full_single_device", Full({"enable_activation_checkpointing=False", "batch_size=8"}));
  EXPECT_GT(batch8.peak_memory_bytes, full.peak_memory_bytes);
  EXPECT_DOUBLE_EQ(batch8.work, 2 * full.work);  // batch 4 in the config
}

TEST(EstimateTest, OptimizerInBackwardHoldsOnlyTheLargestGradient) {
  CellEstimate plain = Estimate("llama3_2/1B_full_single_device", Full({}));
  CellEstimate in_bwd = Estimate("llama3_2/1B_full_single_device", {"optimizer=torch.optim.AdamW"});
  // 1B: 1,235,814,400 bf16 gradients less the embedding's (128256 x 2048), which is held while it is applied.
  EXPECT_EQ(plain.peak_memory_bytes - in_bwd.peak_memory_bytes, 2 * (1235814400 - int64_t{128256} * 2048));
  EXPECT_LT(Estimate("llama3_2/1B_lora_single_device", {"optimizer_in_bwd=True"}).peak_memory_bytes,
            Estimate("llama3_2/1B_lora_single_device", {}).peak_memory_bytes);
}

// DoRA adds a trained magnitude per output row of every adapted layer (weights, gradients and AdamW's two
// states), and the transient W + scale * B A of the largest adapted weight (an MLP projection here), twice.
TEST(EstimateTest, DoraCountsItsMagnitudesAndItsWeightNorms) {
  CellEstimate lora = Estimate("llama3_2/1B_lora_single_device", {});
  CellEstimate dora = Estimate("llama3_2/1B_lora_single_device", {"model.use_dora=True"});
  // 16 layers of q_proj (2048 rows), v_proj (512), output_proj (2048), w1 and w3 (8192), w2 (2048).
  const int64_t magnitudes = 16 * (2048 + 512 + 2048 + 8192 + 8192 + 2048);
  EXPECT_EQ(dora.parameters - lora.parameters, magnitudes);
  EXPECT_EQ(dora.trainable_parameters - lora.trainable_parameters, magnitudes);
  const int64_t bf16 = 2;
  EXPECT_EQ(dora.peak_memory_bytes - lora.peak_memory_bytes,
            magnitudes * bf16 * (1 + 1 + 2) + 2 * int64_t{2048} * 8192 * bf16);
}

TEST(EstimateTest, QloraHoldsItsProjectionsInAboutHalfAByteEach) {
  CellEstimate lora = Estimate("llama3_1/8B_lora_single_device", {});
  CellEstimate qlora = Estimate("llama3_1/8B_lora_single_device",
                                {"model._component_=torchtune.models.llama3_1.qlora_llama3_1_8b"});
  EXPECT_EQ(qlora.parameters, lora.parameters);
  // 6,979,321,856 bf16 projection weights (7 in each of 32 layers) at 0.5 + 1/64 + 2/16384 bytes instead of 2,
  // plus w1 (14336 x 4096) dequantised whole while it is used: its codes as indices and two halves.
  const double quantized = 6979321856.0, largest = 14336.0 * 4096;
  const double saved = quantized * (2 - (0.5 + 1.0 / 64 + 2.0 / 16384)) - largest * (8 + 2 * 2);
  EXPECT_NEAR(static_cast<double>(lora.peak_memory_bytes - qlora.peak_memory_bytes), saved, 2);
  // Llama 3.1 8B's QLoRA weights: about 5 GiB (embedding and output stay bf16).
  EXPECT_LT(qlora.peak_memory_bytes, lora.peak_memory_bytes / 2);
}

TEST(EstimateTest, AcceleratorsDoNotCountTheHostRuntime) {
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = "cuda";
  cuda.index = 0;
  EXPECT_EQ(Estimate("tiny/lora_single_device", {}).peak_memory_bytes -
                Estimate("tiny/lora_single_device", {}, cuda).peak_memory_bytes,
            int64_t{1} << 29);
  // A device type may say what its runtime holds (a simulated device whose allocator counts tensors only: 0).
  DeviceTypeTraits bare;
  bare.name = "bareaccel";
  bare.takes_index = true;
  bare.peak_memory = DeviceTypeTraits::PeakMemory::kAllocator;
  bare.runtime_bytes = 0;
  ASSERT_TRUE(RegisterDeviceType(bare).ok());
  DeviceInfo accel = cuda;
  accel.id = "bareaccel:0";
  accel.type = "bareaccel";
  EXPECT_EQ(Estimate("tiny/lora_single_device", {}, cuda).peak_memory_bytes -
                Estimate("tiny/lora_single_device", {}, accel).peak_memory_bytes,
            int64_t{1} << 29);
  UnregisterDeviceType("bareaccel");
}

// Offloading keeps about two layer inputs on the device instead of one per layer (torchtune's 7B full low-memory
// config: 32 layers of [1, kTypicalSeqLen tokens] x 4096 in bf16, so 30 of those inputs leave the device).
TEST(EstimateTest, OffloadingTakesTheKeptLayerInputsOffTheDevice) {
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = "cuda";
  cuda.index = 0;
  const std::vector<std::string> kept = {"enable_activation_offloading=False", "batch_size=1"};
  const std::vector<std::string> offloaded = {"enable_activation_offloading=True", "batch_size=1"};
  EXPECT_EQ(Estimate("llama2/7B_full_low_memory", kept, cuda).peak_memory_bytes -
                Estimate("llama2/7B_full_low_memory", offloaded, cuda).peak_memory_bytes,
            int64_t{30} * kTypicalSeqLen * 4096 * 2);
}

// Fully sharded ranks divide a LoRA base among them, but each holds the whole NF4 base of QLoRA
// (distributed/sharded_layers.h): from 1 to 8 ranks, QLoRA saves less than LoRA by exactly 7/8 of its quantised
// projections in bf16 (llama3_1 8B: 32 layers of q and o 4096x4096, k and v 4096x1024, MLP 3 x 4096x14336).
TEST(EstimateTest, EveryRankHoldsTheWholeNf4Base) {
  const Registry& registry = BuiltinRegistry();
  DeviceInfo cuda;
  cuda.id = "cuda:0";
  cuda.type = "cuda";
  cuda.index = 0;
  auto peak = [&](const std::string& component, int ranks) {
    StatusOr<LocatedConfig> located = LocateConfig("llama3_1/8B_lora", registry);
    EXPECT_TRUE(located.ok());
    StatusOr<Config> c = LoadResolvedConfig(*located, {"model._component_=" + component}, located->recipe, &registry);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    StatusOr<CellEstimate> e = EstimateFinetune(*c, registry, cuda, TrainKind::kLora, ranks, Sharding::kFull);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? static_cast<double>(e->peak_memory_bytes) : 0.0;
  };
  const double lora_saves = peak("torchtune.models.llama3_1.lora_llama3_1_8b", 1) -
                            peak("torchtune.models.llama3_1.lora_llama3_1_8b", 8);
  const double qlora_saves = peak("torchtune.models.llama3_1.qlora_llama3_1_8b", 1) -
                             peak("torchtune.models.llama3_1.qlora_llama3_1_8b", 8);
  const double quantized = 32.0 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336);
  EXPECT_NEAR(lora_saves - qlora_saves, quantized * 2 * 7 / 8, 16);
}

TEST(EstimateTest, ADistillationTeacherAddsItsWeightsLogitsAndForwardPass) {
  // Llama 3.1 8B teaching a LoRA Llama 3.2 1B in bf16: 16 GB of teacher weights beside the student.
  const CellEstimate kd = Estimate("llama3_2/8B_to_1B_KD_lora_single_device", {});
  const CellEstimate student = Estimate("llama3_2/8B_to_1B_KD_lora_single_device", {"kd_ratio=0"});
  EXPECT_EQ(kd.peak_memory_bytes, student.peak_memory_bytes) << "the teacher is loaded whatever kd_ratio says";
  const CellEstimate lora = Estimate("llama3_2/1B_lora_single_device", {"batch_size=4"});
  EXPECT_GT(kd.peak_memory_bytes, lora.peak_memory_bytes + int64_t{16} * 1000 * 1000 * 1000);
  EXPECT_NEAR(static_cast<double>(kd.parameters - lora.parameters), 8.03e9, 0.01e9);
  EXPECT_GT(kd.work, lora.work * 2);  // a forward over 8B parameters outweighs the 1B student's step
}

}  // namespace
}  // namespace tmx::recipes

namespace tmx::recipes {
namespace {

// Llama 4 Scout's LoRA config: the estimate holds every expert's weights (the text model's 107.8B parameters in
// bf16), not only the 17B a token passes through.
TEST(EstimateTest, AMixtureOfExpertsCountsEveryExpert) {
  const CellEstimate e = Estimate("llama4/scout_17B_16E_lora", {"device=cpu"});
  EXPECT_GT(e.parameters, int64_t{107'769'861'120});
  EXPECT_LT(e.trainable_parameters, e.parameters / 100);
  EXPECT_GT(static_cast<double>(e.peak_memory_bytes), 107'769'861'120 * 2.0);
}

TEST(EstimateTest, AVisionModelCountsItsEncoderFusionLayersAndImages) {
  // The parameters are the vision model's (the count VisionModelTest checks against transformers'), not a text
  // decoder's: encoder, projection and fusion layers included.
  const models::VisionPreset& p = *models::FindVisionPreset("llama3_2_vision_11b");
  const int64_t model = p.published_params - models::RedundantTileParameters(p.args.encoder);
  CellEstimate full = Estimate("llama3_2_vision/11B_full_single_device", {"batch_size=1"});
  EXPECT_EQ(full.parameters, model);
  // decoder_trainable False: the text decoder, Llama 3.1 8B's 8,030,261,248 weights, is frozen.
  EXPECT_EQ(full.trainable_parameters, model - 8030261248);
  CellEstimate lora = Estimate("llama3_2_vision/11B_lora_single_device", {"batch_size=1"});
  EXPECT_GT(lora.parameters, model);  // the adapters
  EXPECT_LT(lora.trainable_parameters, model / 100);
  // Weights alone are 2 bytes each; an image's tiles add activations that text tokens alone do not: a second
  // sample adds at least its encoder layers' inputs (40 layers x 4 tiles x 1608 tokens x 1280 wide, bf16) and its
  // padding mask (6432 x 6432, bool and bf16).
  EXPECT_GT(lora.peak_memory_bytes, 2 * model);
  CellEstimate two = Estimate("llama3_2_vision/11B_lora_single_device", {"batch_size=2"});
  const double image_tokens = 4 * 1608;
  EXPECT_GT(static_cast<double>(two.peak_memory_bytes - lora.peak_memory_bytes),
            40 * image_tokens * 1280 * 2 + image_tokens * image_tokens * 3);
  // Work: each part over its own tokens, so the image tokens make a step's work more than the text's alone.
  EXPECT_GT(lora.work, 2.0 * static_cast<double>(model) * 320);
  // The tiny preset's config predicts what a tiny run needs, well under a GiB beside the runtime.
  CellEstimate tiny = Estimate("tiny/llama3_2_vision_lora_single_device", {"device=cpu"});
  EXPECT_GT(tiny.parameters, 120000);
  EXPECT_LT(tiny.parameters, 200000);
}

}  // namespace
}  // namespace tmx::recipes
