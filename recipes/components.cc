#include "recipes/components.h"

#include "recipes/data/config_options.h"

namespace tmx::recipes {

void AddDataComponents(std::vector<ComponentSpec>* out) {
  for (const data::TokenizerComponent& t : data::TokenizerComponents()) {
    ComponentSpec c;
    c.name = t.dotpath;
    c.kind = "tokenizer";
    c.doc = t.name + " (tokenizer)";
    c.params = data::TokenizerParams(t);
    out->push_back(c);
  }
  for (const data::DatasetComponent& d : data::DatasetComponents()) {
    ComponentSpec c;
    c.name = "tune_matrix.datasets." + d.name;
    if (d.dotpath != c.name) c.aliases = {d.dotpath};
    c.kind = d.kind == data::DatasetKind::kPreference ? "preference_dataset" : "dataset";
    c.doc = d.name + (d.default_source.empty() ? "" : " (default source " + d.default_source + ")");
    c.params = data::DatasetParams(d);
    out->push_back(c);
  }
}

namespace {

// torchtune's rlhf.loss.PPOLoss (recipes/ppo.h's PpoLoss).
ComponentSpec PpoLossComponent() {
  ComponentSpec ppo;
  ppo.name = "tune_matrix.rlhf.loss.PPOLoss";
  ppo.aliases = {"torchtune.rlhf.loss.PPOLoss", "torchtune.modules.rlhf.loss.PPOLoss"};
  ppo.kind = "ppo_loss";
  ppo.doc = "proximal policy optimization: the clipped policy loss plus value_coeff x the clipped value loss, over "
            "the response tokens (torchtune's PPOLoss; recipes/ppo.h)";
  ppo.params = {AtLeast(Field("epsilon", FieldType::kFloat, "0.1",
                              "the policy's probability ratio to its generating self is clipped to 1 +- epsilon"),
                        0),
                AtLeast(Field("value_clip_range", FieldType::kFloat, "0.2",
                              "new values are clipped to the generating step's +- this"),
                        0),
                AtLeast(Field("value_coeff", FieldType::kFloat, "0.1", "weight of the value loss"), 0)};
  return ppo;
}

}  // namespace

namespace {

// The learning-rate schedule and the training loss.
void AddScheduleAndLoss(std::vector<ComponentSpec>* out) {
  ComponentSpec cosine;
  cosine.name = "tune_matrix.training.lr_schedulers.get_cosine_schedule_with_warmup";
  cosine.aliases = {"torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                    "torchtune.modules.get_cosine_schedule_with_warmup"};
  cosine.kind = "lr_scheduler";
  cosine.doc = "linear warm-up, then cosine decay to zero over the run's optimizer steps";
  cosine.params = {
      AtLeast(Field("num_warmup_steps", FieldType::kInt, "0", "optimizer steps of linear warm-up"), 0),
      AtLeast(Field("num_cycles", FieldType::kFloat, "0.5", "cosine cycles over the run (0.5 = decay to zero)"), 0)};
  out->push_back(cosine);

  ComponentSpec ce;
  ce.name = "tune_matrix.modules.loss.CrossEntropyLoss";
  ce.aliases = {"torchtune.modules.loss.CEWithChunkedOutputLoss", "torchtune.modules.loss.LinearCrossEntropyLoss",
                "torch.nn.CrossEntropyLoss"};
  ce.kind = "loss";
  ce.doc = "token-level cross entropy over the logits, ignoring masked (-100) labels";
  ce.params = {AtLeast(Field("num_output_chunks", FieldType::kInt, "8", "accepted for torchtune compatibility"), 1),
               Field("ignore_index", FieldType::kInt, "-100", "label value excluded from the loss")};
  out->push_back(ce);
}

// Knowledge distillation's loss.
void AddDistillationLoss(std::vector<ComponentSpec>* out) {
  ComponentSpec kd;
  kd.name = "tune_matrix.modules.loss.ForwardKLLoss";
  kd.aliases = {"torchtune.modules.loss.ForwardKLWithChunkedOutputLoss", "torchtune.modules.loss.ForwardKLLoss"};
  kd.kind = "kd_loss";
  kd.doc = "forward KL from the teacher's next-token distribution to the student's, averaged over the trained "
           "tokens (torchtune's; chunking changes its memory, not its value)";
  kd.params = {AtLeast(Field("num_output_chunks", FieldType::kInt, "8", "accepted for torchtune compatibility"), 1),
               Field("ignore_index", FieldType::kInt, "-100", "label value excluded from the loss")};
  out->push_back(kd);
}

// QAT's fake quantizer and post-training quantisation's.
void AddQuantizers(std::vector<ComponentSpec>* out) {
  ComponentSpec qat;
  qat.name = "tune_matrix.training.quantization.Int8DynActInt4WeightQATQuantizer";
  qat.aliases = {"torchtune.training.quantization.Int8DynActInt4WeightQATQuantizer",
                 "torchtune.training.quantization.Int8DynActInt4WeightQATQuantizerModuleSwap",
                 "torchao.quantization.qat.Int8DynActInt4WeightQATQuantizer"};
  qat.kind = "qat_quantizer";
  qat.doc = "fake quantisation for QAT: int8 dynamic per-token activations, int4 per-group symmetric weights "
            "(torchao's 8da4w numerics, models/fake_quant.h)";
  qat.params = {AtLeast(Field("groupsize", FieldType::kInt, "256", "weights per int4 scale, along each row"), 2)};
  out->push_back(qat);

  ComponentSpec ptq;
  ptq.name = "tune_matrix.training.quantization.Int8DynActInt4WeightQuantizer";
  ptq.aliases = {"torchtune.training.quantization.Int8DynActInt4WeightQuantizer"};
  ptq.kind = "quantizer";
  ptq.doc = "post-training 8da4w: int4 weights per group (int8 codes, float32 scales), int8 dynamic per-token "
            "activations (the quantize recipe writes it; generation loads it)";
  ptq.params = qat.params;
  out->push_back(ptq);
}

// DPO's and PPO's losses.
void AddPreferenceLosses(std::vector<ComponentSpec>* out) {
  ComponentSpec dpo;
  dpo.name = "tune_matrix.rlhf.loss.DPOLoss";
  // torchtune 0.6's place, and its older torchtune.modules.rlhf.loss.
  dpo.aliases = {"torchtune.rlhf.loss.DPOLoss", "torchtune.modules.rlhf.loss.DPOLoss"};
  dpo.kind = "preference_loss";
  dpo.doc = "direct preference optimization: -log sigmoid(beta x ((policy - reference) log-ratio of chosen over "
            "rejected)), averaged over the pairs (torchtune's DPOLoss)";
  dpo.params = {AtLeast(Field("beta", FieldType::kFloat, "0.1",
                              "temperature of the implicit reward; higher trusts the preferences more against "
                              "staying near the reference"),
                        0),
                AtMost(AtLeast(Field("label_smoothing", FieldType::kFloat, "0.0",
                                     "assumed probability that a pair's preference is flipped (conservative DPO)"),
                               0),
                       1)};
  out->push_back(dpo);

  out->push_back(PpoLossComponent());
}

// The tensor-parallel plan and the metric logger.
void AddParallelismAndLogging(std::vector<ComponentSpec>* out) {
  ComponentSpec tp;
  tp.name = "tune_matrix.models.tensor_parallel_plan";
  // Llama 4's decoder_only_tp_plan names the same split of the decoder; a mixture of experts is refused when a run
  // splits it (TensorParallelArgs), as this plan has no share of the experts.
  tp.aliases = {"torchtune.models.llama3.base_llama_tp_plan", "torchtune.models.llama4.decoder_only_tp_plan"};
  tp.kind = "tensor_parallel_plan";
  tp.doc = "each layer's attention heads and MLP width split over the ranks (q/k/v, w1, w3 by rows; output_proj, "
           "w2 by columns, their outputs summed); embeddings, norms and the output projection whole on every rank";
  out->push_back(tp);

  ComponentSpec disk;
  disk.name = "tune_matrix.training.metric_logging.DiskLogger";
  disk.aliases = {"torchtune.training.metric_logging.DiskLogger", "torchtune.training.metric_logging.StdoutLogger"};
  disk.kind = "metric_logger";
  disk.doc = "metrics as JSON lines in <log_dir>/metrics.jsonl, and one line per logged step on stdout";
  disk.params = {NonEmpty(Field("log_dir", FieldType::kString, "${output_dir}/logs", "folder of metrics.jsonl")),
                 NonEmpty(Field("filename", FieldType::kString, "metrics.jsonl", "file name in log_dir"))};
  out->push_back(disk);
}

// torchtune's profiler section, timed by ATen operation here.
void AddProfiler(std::vector<ComponentSpec>* out) {
  ComponentSpec profiler;
  profiler.name = "tune_matrix.training.setup_torch_profiler";
  profiler.aliases = {"torchtune.training.setup_torch_profiler"};
  profiler.kind = "profiler";
  profiler.doc = "with enabled=True, times the scheduled steps by ATen operation (self time, calls, input shapes; "
                 "matmul, attention and other) into <output_dir>/op_profile.txt and .json (recipes/op_profile.h)";
  for (const char* b : {"cpu", "cuda", "xpu"}) {
    profiler.params.push_back(Field(b, FieldType::kBool, "True", "torch.profiler activity; every ATen operation is "
                                                                "timed on the host either way"));
  }
  for (const char* b : {"profile_memory", "with_stack", "with_flops"}) {
    profiler.params.push_back(Field(b, FieldType::kBool, "False", "torch.profiler option; must be False when enabled"));
  }
  profiler.params.push_back(Field("record_shapes", FieldType::kBool, "True", "one row per operation and input shapes"));
  const std::pair<const char*, const char*> schedule[] = {
      {"wait_steps", "5"}, {"warmup_steps", "5"}, {"active_steps", "2"}, {"num_cycles", "1"}};
  for (const auto& [name, value] : schedule) {
    profiler.params.push_back(AtLeast(Field(name, FieldType::kInt, value,
                                            "schedule: wait, then warm up, then record; cycles (0: repeat)"),
                                      0));
  }
  profiler.params.push_back(Field("enabled", FieldType::kBool, "False", "time the scheduled steps by operation"));
  profiler.params.push_back(Field("output_dir", FieldType::kString, "", "folder of op_profile.txt and .json "
                                                                        "(default <output_dir>/profiler_output)"));
  out->push_back(profiler);
}

}  // namespace

void AddTrainingComponents(std::vector<ComponentSpec>* out) {
  for (auto add : {AddScheduleAndLoss, AddDistillationLoss, AddQuantizers, AddPreferenceLosses,
                   AddParallelismAndLogging, AddProfiler}) {
    add(out);
  }
}

}  // namespace tmx::recipes
