// The registry: every recipe and every config component the project knows, with a schema for each field.
//
// Components named in a config (`_component_: torch.optim.AdamW`) resolve only through this registry: a
// config never loads code. Each field declares what its values require of a device, so `tune validate`
// can tell, per config and per device, whether a run can work before starting it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "harness/config.h"
#include "harness/device.h"
#include "harness/status.h"

namespace tmx {

enum class FieldType { kBool, kInt, kFloat, kString, kStringList, kComponent, kAny };
const char* FieldTypeName(FieldType t);  // "bool", "int", ...

// Returns "" when `value` works on `device`, otherwise the reason it does not (one sentence, with the fix).
using DeviceCheck =
    std::function<std::string(const YAML::Node& value, const Config& config, const DeviceInfo& device)>;

struct FieldSpec {
  std::string name;
  FieldType type = FieldType::kAny;
  std::string default_yaml;             // the default as YAML text; "" when the field is required
  std::string doc;                      // one line
  bool nullable = false;                // null/None accepted
  bool required = false;
  std::vector<std::string> choices;     // for strings: the accepted values
  std::string component_kind;           // for kComponent: "model", "optimizer", ...
  DeviceCheck device_check;             // what a value requires of the device (may be empty)
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
};

// One validation finding, printed as "<where>: <key>: <message>".
struct Problem {
  std::string where;    // "configs/a.yaml:12:3" or "override 'lr=x'"
  std::string key;      // dotted key path
  std::string message;  // what is wrong and how to fix it
  bool device_related = false;  // the config is fine in itself but cannot run on the chosen device
  std::string ToString() const;
};

struct RunContext {
  DeviceInfo device;                 // the resolved device to run on
  std::string config_name;           // as given on the command line
  std::ostream* out = nullptr;       // progress and metrics lines
};
using RecipeMain = std::function<Status(const Config& config, const RunContext& context)>;

// Checks spanning several fields (e.g. activation offloading needs activation checkpointing).
using CrossCheck = std::function<std::vector<Problem>(const Config& config, const DeviceInfo* device)>;

struct RecipeSpec {
  std::string name;                  // "lora_finetune_single_device"
  std::string doc;
  bool distributed = false;
  std::vector<std::string> configs;  // built-in config names, "llama3_2/1B_lora_single_device"
  std::vector<FieldSpec> fields;
  std::vector<CrossCheck> checks;
  RecipeMain run;
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
  std::vector<std::string> ComponentNames() const;  // canonical names and aliases
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

}  // namespace tmx

namespace tmx {

// Validation of a config for the device it names (its `device` key, default "cuda" as in torchtune).
struct DeviceCheckResult {
  std::vector<Problem> problems;
  // The device the config would run on; nominal (probed=false) when it is not present on this machine.
  DeviceInfo device;
  bool device_available = false;
};

// Parses and resolves the config's device among `available`, then validates the config for it: an unknown
// device, an absent device and every field the device cannot serve are all listed.
DeviceCheckResult ValidateForDevice(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                                    const std::vector<DeviceInfo>& available);

}  // namespace tmx
