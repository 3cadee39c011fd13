// The registry: every recipe and every config component the project knows, with a schema for each field.
//
// Components named in a config (`_component_: torch.optim.AdamW`) resolve only through this registry: a
// config never loads code. Each field declares what its values require of a device, so `tune validate`
// can tell, per config and per device, whether a run can work before starting it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "harness/config.h"
#include "harness/device.h"

namespace tmx {

enum class FieldType { kBool, kInt, kFloat, kString, kStringList, kComponent, kAny };
const char* FieldTypeName(FieldType t);  // "bool", "int", ...

// What a value cannot do on a device. Empty `reason`: it works there. Otherwise one sentence saying why not,
// and `repair`: the overrides ("key=value", "~key" to remove one) that make the config work there with the
// same model, data and schedule (validation appends "; use <repair>" to the reason). No repair: the reason
// itself says what to do (another device, a rebuild), and the config has no verified repair on that device.
struct DeviceRefusal {
  std::string reason;
  std::vector<std::string> repair;
};
using DeviceCheck =
    std::function<DeviceRefusal(const YAML::Node& value, const Config& config, const DeviceInfo& device)>;

// Returns "" when a (well-typed) value is acceptable, otherwise what is wrong with it and the fix; for
// constraints the declarative ones below cannot say (a prompt template's name, a mapping's shape).
using ValueCheck = std::function<std::string(const YAML::Node& value)>;

// One key of a recipe or a component. The schema is the single source of a key's default and constraints:
// ApplySchemaDefaults writes the defaults into a config before a recipe reads it, so the default documented
// here is the one used, and ValidateConfig reports every constraint like any other problem.
struct FieldSpec {
  std::string name;
  FieldType type = FieldType::kAny;
  // The default as YAML text ("2", "null", "${output_dir}/logs"); "" when the key has none (required keys,
  // components, and keys whose absence means something to the recipe).
  std::string default_yaml;
  std::string doc;                      // one line
  bool nullable = false;                // null/None accepted
  bool required = false;
  std::vector<std::string> choices;     // for strings: the accepted values
  std::string component_kind;           // for kComponent: "model", "optimizer", ...
  DeviceCheck device_check;             // what a value requires of the device (may be empty)
  // Constraints, checked by ValidateConfig when the value has the right type.
  std::optional<double> min;            // numbers: the smallest accepted value ...
  bool min_exclusive = false;           // ... or, when set, the bound every value must exceed
  std::optional<double> max;            // numbers: the largest accepted value ...
  bool max_exclusive = false;           // ... or, when set, the bound every value must stay under
  bool non_empty = false;               // strings: "" is refused
  std::vector<std::string> element_choices;  // lists of strings: the accepted elements (each at most once)
  ValueCheck value_check;               // any further check of the value (may be empty)
};

// Chainable constraint setters, so a schema reads as one expression per key:
//   AtLeast(Field("batch_size", FieldType::kInt, "2", "samples per micro-batch"), 1)
FieldSpec Nullable(FieldSpec f);
FieldSpec Required(FieldSpec f);
FieldSpec Choices(FieldSpec f, std::vector<std::string> choices);
FieldSpec AtLeast(FieldSpec f, double min);
FieldSpec Above(FieldSpec f, double min);  // exclusive
FieldSpec AtMost(FieldSpec f, double max);
FieldSpec Below(FieldSpec f, double max);  // exclusive
FieldSpec NonEmpty(FieldSpec f);
FieldSpec ElementsFrom(FieldSpec f, std::vector<std::string> choices);
FieldSpec WithCheck(FieldSpec f, DeviceCheck check);
FieldSpec WithValueCheck(FieldSpec f, ValueCheck check);
FieldSpec Field(std::string name, FieldType type, std::string default_yaml, std::string doc);
FieldSpec ComponentField(std::string name, std::string kind, std::string doc, bool required = true);

// What a recipe needs to build a component (a model's architecture, an optimizer's state count...). The
// harness never looks inside; the recipes library registers its own subclasses and downcasts to them.
class ComponentImpl {
 public:
  virtual ~ComponentImpl() = default;
};

// A component a config can name. Components that are recognised (for example torchtune's tiktoken
// tokenizer) but not implemented here carry `unsupported_reason`, so validation names them clearly.
struct ComponentSpec {
  std::string name;                   // canonical: "tune_matrix.models.llama3_2.lora_llama3_2_1b"
  std::vector<std::string> aliases;   // torchtune's paths: "torchtune.models.llama3_2.lora_llama3_2_1b"
  std::string kind;                   // "model", "tokenizer", "dataset", "optimizer", ...
  std::string doc;
  std::vector<FieldSpec> params;
  std::string unsupported_reason;     // non-empty: recognised, cannot be built here, and why
  DeviceCheck device_check;           // requirement of the component as a whole
  std::shared_ptr<const ComponentImpl> impl;  // what building it takes; null for unsupported components
  int64_t parameter_count = 0;        // models: parameters of the built model (0 for other kinds)
  // Models: transformer layers of the built model (harness/proxy.h cuts them); 0 for other kinds and for a
  // model sized by the config (its `num_layers` says).
  int64_t layers = 0;
  // Models: ids of the built model's embedding (a proxy may cut them too); 0 for other kinds and for a model
  // sized by the config.
  int64_t vocab_size = 0;
};

// One validation finding, printed as "<where>: <key>: <message>".
struct Problem {
  std::string where;    // "configs/a.yaml:12:3" or "override 'lr=x'"
  std::string key;      // dotted key path
  std::string message;  // what is wrong and how to fix it
  bool device_related = false;  // the config is fine in itself but cannot run on the chosen device
  // A device problem's overrides that remove it on that device (DeviceRefusal::repair); empty: none known.
  std::vector<std::string> repair;
  std::string ToString() const;
};

// The overrides that remove every problem of `problems` (each problem's repair, in order, each override
// once), or nothing when a problem has no repair: a config is repaired whole or not at all.
std::vector<std::string> RepairOf(const std::vector<Problem>& problems);

class Registry;
struct RunContext {
  // The registry the config resolved through, whose components the recipe builds (tune passes its own; a
  // recipe never reaches for a global one).
  const Registry* registry = nullptr;
  DeviceInfo device;                 // the resolved device to run on
  std::string config_name;           // as given on the command line
  std::ostream* out = nullptr;       // progress and metrics lines
  // A tokenizer file, dataset or checkpoint the config names but this machine lacks is replaced by the
  // shipped sample of the same kind (or weights from the seed), and the run summary says so. Off: the run
  // stops before training, naming what is missing and where to put it. Matrix cells turn it on.
  bool allow_stand_ins = false;
};
using RecipeMain = std::function<Status(const Config& config, const RunContext& context)>;

class Registry;
// Checks spanning several fields (e.g. activation offloading needs activation checkpointing), or fields and
// the components they name (a LoRA rank against the model's widths).
using CrossCheck =
    std::function<std::vector<Problem>(const Config& config, const Registry& registry, const DeviceInfo* device)>;

// What a recipe predicts for running a config on a device, before anything runs: the matrix plans with it
// (cells predicted not to fit are not started; work orders and balances the cells) without knowing models.
struct CellEstimate {
  int64_t peak_memory_bytes = 0;  // predicted peak memory on the device (conservative)
  double work = 0;                // training work per step: parameter-passes x tokens (one unit for all recipes)
  int64_t parameters = 0;         // parameters of the model
  int64_t trainable_parameters = 0;
};
class Registry;
// `config` has its schema defaults applied and the cell's overrides (device, step budget) set.
using CellEstimator =
    std::function<StatusOr<CellEstimate>(const Config& config, const Registry& registry, const DeviceInfo& device)>;

// How a run of a recipe is started: in the `tune` process itself, or as ranks (processes) that
// `tune run --nproc_per_node N` or torchrun launches.
enum class RecipeLaunch { kOneProcess, kRanks };

// What a recipe does. `tune ls --json` exports it with the training recipes' traits (RecipeSpec), so scripts
// (scripts/make_builtin_configs.py, which writes each config's heading and a tiny config's keys) read what a
// recipe is instead of guessing it from its name.
enum class RecipeTask { kTrain, kGenerate, kQuantize, kEvaluate };
// "train", "generate", "quantize", "evaluate".
const char* RecipeTaskName(RecipeTask task);

struct RecipeSpec {
  std::string name;                  // "lora_finetune_single_device"
  std::string doc;
  RecipeLaunch launch = RecipeLaunch::kOneProcess;
  std::vector<std::string> configs;  // built-in config names, "llama3_2/1B_lora_single_device"
  std::vector<FieldSpec> fields;
  std::vector<CrossCheck> checks;
  RecipeMain run;
  CellEstimator estimate;            // may be empty: the matrix then predicts nothing for its cells
  // The input files a run of the config would read (checkpoint, tokenizer, data) that this machine lacks,
  // each a problem naming the key, the file and the fix. `tune run` stops on them before building anything
  // (unless stand-ins are allowed) and `tune validate` lists them as warnings. May be empty.
  std::function<std::vector<Problem>(const Config& config, const Registry& registry)> missing_inputs;
  // The overrides that make a run of this recipe a short matrix cell of `steps` optimizer steps, besides
  // device= and output_dir= (which every recipe takes). Empty: cells run the config as written.
  std::function<std::vector<std::string>(int steps)> cell_overrides;
  // What it does, as `tune ls --json` exports it (RecipeTask above).
  RecipeTask task = RecipeTask::kTrain;
  // A training recipe's traits (empty for the rest): what it trains ("full": every weight; "lora": adapters), on
  // what ("samples"; "preference_pairs": chosen and rejected answers; "prompts": questions it answers itself), and
  // its objective, which says what its configs hold beside the model, data and optimizer ("fine-tuning": nothing;
  // "knowledge_distillation": a teacher; "dpo": a reference; "qat": a fake quantizer; "ppo": reward and value
  // models and a reference policy).
  std::string trains, data, objective;

  // `estimate` of the config on `device`, made safe to call: a recipe without one predicts nothing (an empty
  // CellEstimate), and an exception escaping it (a bug of the estimate, never a verdict on the config) becomes
  // Internal naming the recipe and the error, so a plan treats the cell as unpredicted and runs it.
  StatusOr<CellEstimate> Estimate(const Config& config, const Registry& registry, const DeviceInfo& device) const;
  // Whether `tune run` starts ranks of it (--nproc_per_node).
  bool launches_ranks() const { return launch == RecipeLaunch::kRanks; }
  // The processes a matrix cell of this recipe trains with on one device of type `traits`: 1, or the type's
  // matrix_ranks for launched ranks.
  int CellRanks(const DeviceTypeTraits& traits) const;
  // What `tune run` takes before the recipe's name to start such a cell: {"--nproc_per_node", "N"} or nothing.
  std::vector<std::string> CellLaunchArgs(const DeviceTypeTraits& traits) const;
};

class Registry {
 public:
  // Fails (InvalidArgument) on a duplicate name or alias.
  Status AddRecipe(RecipeSpec recipe);
  Status AddComponent(ComponentSpec component);

  const RecipeSpec* FindRecipe(const std::string& name) const;
  // By canonical name or alias.
  const ComponentSpec* FindComponent(const std::string& name) const;
  const std::vector<RecipeSpec>& recipes() const { return recipes_; }
  const std::vector<ComponentSpec>& components() const { return components_; }
  std::vector<std::string> RecipeNames() const;
  // Canonical names and aliases; with supported_only, only of components that can be built here.
  std::vector<std::string> ComponentNames(bool supported_only = false) const;
  // The recipe whose built-in configs include `config_name`, or nullptr.
  const RecipeSpec* RecipeForConfig(const std::string& config_name) const;

 private:
  std::vector<RecipeSpec> recipes_;
  std::vector<ComponentSpec> components_;
  std::map<std::string, size_t> component_index_;
};

// Validates `config` against `recipe`'s schema and, when `device` is given, against what the device can
// do. Lists every problem found, not just the first; an empty result means the config is valid there.
// Top-level keys starting with '_' and the generated `metadata` key are not recipe fields.
std::vector<Problem> ValidateConfig(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                                    const DeviceInfo* device);

// Writes the schema default of every key the config leaves out: the recipe's keys, and the parameters of
// each component node that names a known component. Keys present (null included) are kept; values that
// are not mappings where a component is expected are left for ValidateConfig to report. Run it before
// ResolveInterpolations, so defaults such as "${output_dir}/logs" resolve like written values.
Status ApplySchemaDefaults(Config* config, const RecipeSpec& recipe, const Registry& registry);

}  // namespace tmx

namespace tmx {

// Validation of a config for the device it names (its `device` key, default "cuda" as in torchtune).
struct DeviceCheckResult {
  std::vector<Problem> problems;
  // The device the config would run on; nominal (probed=false) when it is not present on this machine.
  DeviceInfo device;
  bool device_available = false;
  // Why the device is not on this machine, when it is a device type of the table that lookup did not find:
  // the fields were then checked against the type's static traits (NominalDeviceInfo). Kept apart from
  // `problems`: `tune run` cannot go on, `tune validate` still judges the config for that type.
  std::optional<Problem> absent;
};

// Parses the config's device (its `device` key, whose default comes from the recipe's schema) and finds it
// with `lookup`, then validates the config for it: an unknown device and every field the device cannot serve
// are listed in `problems`; an absent device of a known type in `absent`, the fields checked against the
// type's traits.
DeviceCheckResult ValidateForDevice(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                                    const DeviceLookup& lookup);

}  // namespace tmx
