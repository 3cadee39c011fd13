#include "recipes/distillation.h"

#include <algorithm>

#include <torch/torch.h>

#include "base/text.h"
#include "recipes/checkpointers.h"
#include "recipes/estimate.h"
#include "recipes/flops.h"
#include "recipes/loss.h"
#include "recipes/model_components.h"
#include "recipes/trainer.h"

namespace tmx::recipes {
namespace {

class Distillation : public Objective {
 public:
  Status Setup(const TrainingSetup& setup, RunSummary* summary) override;
  torch::Tensor Loss(const data::Batch& batch) override {
    const DeviceBatch b = OnDevice(batch, device_);
    const torch::Tensor logits = policy_->forward(b.tokens, b.input_pos, b.document_ids);
    torch::Tensor teacher_logits;
    {
      torch::NoGradGuard no_grad;
      teacher_logits = teacher_->forward(b.tokens, b.input_pos, b.document_ids);
    }
    return NextTokenDistillationLoss(logits, teacher_logits, b.labels, kd_ratio_);
  }
  double ExtraFlops(int64_t rows, int64_t length) const override {
    return ForwardFlops(*teacher_flops_, rows, length);
  }

 private:
  models::Decoder teacher_{nullptr};
  std::optional<FlopModel> teacher_flops_;  // the teacher's shape
  double kd_ratio_ = 0;
};

// The frozen teacher (teacher_model from teacher_checkpointer) on the trainer's device.
Status Distillation::Setup(const TrainingSetup& setup, RunSummary* summary) {
  TM_RETURN_IF_ERROR(Objective::Setup(setup, summary));
  const Config& config = setup.config;
  StatusOr<double> ratio = config.GetDouble("kd_ratio");
  TM_RETURN_IF_ERROR(ratio.status());
  kd_ratio_ = *ratio;
  StatusOr<ModelChoice> choice = ModelFromConfig(config, setup.registry, "teacher_model");
  TM_RETURN_IF_ERROR(choice.status());
  const ModelChoice& student = setup.model.choice;
  if (choice->args.vocab_size != student.args.vocab_size) {
    return Status::InvalidArgument(
        config.OriginOf("teacher_model._component_").ToString() + ": teacher_model: '" + choice->component +
        "' has a vocabulary of " + std::to_string(choice->args.vocab_size) + " ids and the student '" +
        student.component + "' one of " + std::to_string(student.args.vocab_size) +
        "; the forward KL compares their distributions id by id, so use a teacher of the student's family");
  }
  const int64_t total = CountModelParameters(*choice).total;
  setup.progress.Begin("Building teacher " + choice->component + " (" + FormatCount(total) + " parameters)");
  teacher_ = models::Decoder(choice->args, choice->lora,
                             c10::TensorOptions().dtype(setup.settings.dtype).device(setup.device));
  setup.progress.End("Built the teacher");
  TM_RETURN_IF_ERROR(LoadStartingWeights(config, setup.registry, *choice, *teacher_, setup.context.allow_stand_ins,
                                         &summary->stand_ins, {}, "teacher_checkpointer"));
  teacher_->eval();
  teacher_flops_ = FlopModel{choice->args, choice->lora};
  summary->total_parameters += total;
  return Status::OK();
}

std::vector<Problem> TeacherVocabularyCheck(const Config& config, const Registry& registry, const DeviceInfo*) {
  StatusOr<ModelChoice> student = ModelFromConfig(config, registry);
  StatusOr<ModelChoice> teacher = ModelFromConfig(config, registry, "teacher_model");
  if (!student.ok() || !teacher.ok() || student->args.vocab_size == teacher->args.vocab_size) return {};
  return {{config.OriginOf("teacher_model").ToString(), "teacher_model",
           "the teacher's vocabulary (" + std::to_string(teacher->args.vocab_size) + " ids) is not the student's (" +
               std::to_string(student->args.vocab_size) +
               "); the forward KL compares their distributions id by id, so use a teacher of the student's family"}};
}

}  // namespace

RecipeSpec KnowledgeDistillationRecipe(RecipeLaunch launch) {
  const bool distributed = launch == RecipeLaunch::kRanks;
  TrainingRecipe r;
  r.name = std::string("knowledge_distillation_") + (distributed ? "distributed" : "single_device");
  r.doc = std::string("knowledge distillation") + (distributed ? " across ranks" : " on one device") +
          ": LoRA adapters of a student trained on (1 - kd_ratio) x cross-entropy + kd_ratio x the forward KL to a "
          "frozen teacher's next-token distribution";
  r.kind = TrainKind::kLora;
  r.launch = launch;
  r.objective_name = "knowledge_distillation";
  r.fields.push_back(ComponentField("teacher_model", "model", "the frozen teacher; its vocabulary is the student's"));
  r.fields.push_back(
      ComponentField("teacher_checkpointer", "checkpointer", "where the teacher's weights are loaded from", false));
  r.fields.push_back(ComponentField("kd_loss", "kd_loss", "the distillation loss (torchtune's forward KL)"));
  r.fields.push_back(AtMost(AtLeast(Field("kd_ratio", FieldType::kFloat, "0.5",
                                          "weight of the distillation loss; the cross-entropy gets 1 - kd_ratio"),
                                    0),
                            1));
  r.checks.push_back(TeacherVocabularyCheck);
  r.extra_inputs = [](const Config& config, const Registry& registry) {
    return MissingCheckpointFiles(config, registry, "teacher_checkpointer", "teacher_model");
  };
  r.extra_estimate = [](const Config& config, const Registry& registry, const DeviceInfo& device, int ranks) {
    return EstimateTeacher(config, registry, device, ranks);
  };
  r.objective = [] { return std::make_unique<Distillation>(); };
  return TrainingRecipeSpec(std::move(r));
}

StatusOr<CellEstimate> EstimateTeacher(const Config& config, const Registry& registry, const DeviceInfo& device,
                                       int ranks) {
  StatusOr<ExtraModelInputs> teacher = ReadExtraModelInputs(config, registry, "teacher_model");
  TM_RETURN_IF_ERROR(teacher.status());
  CellEstimate e;
  e.parameters = CountModelParameters(teacher->model).total;
  const double bytes = teacher->bytes, tokens = teacher->tokens;
  const bool host_memory = device.traits().HostMemory();
  // The teacher's logits and their float32 softmax; the student's float32 logits, log-softmax, its product with
  // the teacher's and that product masked, and the log-softmax's gradient (the fused cross-entropy that
  // EstimateFinetune counted cannot serve distillation, which needs the student's whole distribution).
  const double per_rank = static_cast<double>(e.parameters) * bytes +
                          tokens * static_cast<double>(teacher->model.args.vocab_size) * (bytes + 4 + 5 * 4);
  const double peak = per_rank * (host_memory ? ranks : 1);
  e.peak_memory_bytes = peak < 0x1p62 ? static_cast<int64_t>(peak) : int64_t{1} << 62;
  e.work = static_cast<double>(e.parameters) * tokens * ranks;  // one forward pass
  return e;
}

}  // namespace tmx::recipes
