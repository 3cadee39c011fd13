#include "harness/registry.h"

#include <algorithm>
#include <cmath>
#include <charconv>
#include <exception>

#include "base/system_folders.h"
#include "base/text.h"

namespace tmx {
namespace {

std::string Dotted(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

class Validator {
 public:
  Validator(const Config& config, const Registry& registry, const DeviceInfo* device)
      : config_(config), registry_(registry), device_(device) {}

  // A problem with the value at `key` (or, with at_key, with the key itself).
  void Add(const std::string& key, const std::string& message, bool device_related = false, bool at_key = false) {
    Problem p;
    p.where = (at_key ? config_.KeyOriginOf(key) : config_.OriginOf(key)).ToString();
    p.key = key;
    p.message = message;
    p.device_related = device_related;
    problems_.push_back(std::move(p));
  }

  // A device check's refusal of the value at `key`, with its repair.
  void Refused(const std::string& key, DeviceRefusal refusal) {
    if (refusal.reason.empty()) return;
    Add(key, refusal.reason + (refusal.repair.empty() ? "" : "; use " + JoinStrings(refusal.repair, " ")),
        /*device_related=*/true);
    problems_.back().repair = std::move(refusal.repair);
  }

  // Flags keys of `map` that no spec names, each with the nearest valid key.
  void CheckKeys(const YAML::Node& map, const std::string& prefix, const std::vector<FieldSpec>& specs,
                 const std::string& owner) {
    std::vector<std::string> names;
    for (const FieldSpec& f : specs) names.push_back(f.name);
    for (const auto& kv : map) {
      std::string key = kv.first.as<std::string>("");
      if (prefix.empty() && (key == "metadata" || (!key.empty() && key[0] == '_'))) continue;
      if (!prefix.empty() && key == "_component_") continue;
      bool known = false;
      for (const std::string& n : names) known = known || n == key;
      if (known) continue;
      // A key of a component written at the top ("lr" for "optimizer.lr") first, then close spellings.
      std::vector<std::string> hints = prefix.empty() ? ComponentKeysNamed(map, key) : std::vector<std::string>();
      for (const std::string& h : ClosestMatches(key, names, 3)) {
        if (hints.size() < 3) hints.push_back(h);
      }
      for (std::string& h : hints) h = "'" + h + "'";
      std::string accepted;
      if (hints.empty()) {
        accepted = names.size() <= 12 ? " (it takes " + JoinAlternatives(names, "and") + ")"
                                      : " (it takes " + std::to_string(names.size()) +
                                            " keys: `tune cat` of one of its built-in configs shows them)";
      }
      Add(Dotted(prefix, key),
          "unknown key for " + owner + (hints.empty() ? accepted : "; did you mean " + JoinAlternatives(hints) + "?"),
          false, /*at_key=*/true);
    }
  }

  // The dotted keys "<top>.<key>" of the components the config's top-level maps name that take `key`.
  std::vector<std::string> ComponentKeysNamed(const YAML::Node& map, const std::string& key) const {
    std::vector<std::string> found;
    for (const auto& kv : map) {
      if (!kv.second.IsMap()) continue;
      const ComponentSpec* comp = nullptr;
      for (const auto& field : kv.second) {
        if (field.first.as<std::string>("") == "_component_" && field.second.IsScalar()) {
          comp = registry_.FindComponent(field.second.Scalar());
        }
      }
      if (comp == nullptr) continue;
      for (const FieldSpec& f : comp->params) {
        if (f.name == key) found.push_back(kv.first.as<std::string>("") + "." + key);
      }
    }
    return found;
  }

  void CheckFields(const YAML::Node& map, const std::string& prefix, const std::vector<FieldSpec>& specs) {
    for (const FieldSpec& spec : specs) {
      std::string key = Dotted(prefix, spec.name);
      YAML::Node value;
      bool present = false;
      for (const auto& kv : map) {
        if (kv.first.as<std::string>("") == spec.name) {
          value.reset(kv.second);
          present = true;
        }
      }
      if (!present) {
        if (spec.required) Add(key, "missing required key (" + spec.doc + ")");
        continue;
      }
      CheckValue(value, key, spec);
    }
  }

  void CheckValue(const YAML::Node& value, const std::string& key, const FieldSpec& spec) {
    if (value.IsNull()) {
      if (!spec.nullable) Add(key, std::string("expected ") + Expected(spec) + ", got null");
      return;
    }
    bool ok = true;
    switch (spec.type) {
      case FieldType::kBool:
        ok = value.IsScalar() && Converts<bool>(value);
        break;
      case FieldType::kInt:
        ok = value.IsScalar() && Converts<int64_t>(value);
        break;
      case FieldType::kFloat:
        ok = value.IsScalar() && Converts<double>(value);
        break;
      case FieldType::kString:
        ok = value.IsScalar();
        break;
      case FieldType::kStringList:
        ok = value.IsSequence();
        if (ok) {
          for (const auto& item : value) ok = ok && item.IsScalar();
        }
        break;
      case FieldType::kComponent:
        ok = IsComponentNode(value);
        break;
      case FieldType::kAny:
        break;
    }
    if (!ok && spec.type == FieldType::kComponent && value.IsMap()) {
      // A section a config lacks, created by overrides of its keys alone (profiler.enabled=True): name the fix.
      std::string example;
      for (const ComponentSpec& c : registry_.components()) {
        if (c.kind == spec.component_kind && c.unsupported_reason.empty()) {
          example = c.aliases.empty() ? c.name : c.aliases.front();
          break;
        }
      }
      Add(key, key + " has no _component_ (expected " + Expected(spec) + "); fix: " +
                   (example.empty() ? "add " + key + "._component_" : "add " + key + "._component_=" + example));
      return;
    }
    if (!ok) {
      Add(key, std::string("expected ") + Expected(spec) + ", got " + DescribeNode(value));
      return;
    }
    if (!spec.choices.empty()) {
      std::string v = value.Scalar();
      bool found = false;
      for (const std::string& c : spec.choices) found = found || c == v;
      if (!found) {
        std::string hint = ClosestMatch(v, spec.choices);
        Add(key,
            "'" + v + "' is not one of " + JoinStrings(spec.choices, ", ") +
                (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
        return;
      }
    }
    std::string violated = Violation(value, spec);
    if (violated.empty() && spec.value_check) violated = spec.value_check(value);
    if (!violated.empty()) {
      Add(key, violated);
      return;
    }
    if (spec.type == FieldType::kComponent) {
      CheckComponent(value, key, spec.component_kind);
    }
    if (device_ && spec.device_check) Refused(key, spec.device_check(value, config_, *device_));
  }

  // Which constraint of `spec` the (well-typed) value breaks, as a message with the fix; "" when none.
  static std::string Violation(const YAML::Node& value, const FieldSpec& spec) {
    if (spec.type == FieldType::kFloat && !std::isfinite(value.as<double>())) {
      return "'" + value.Scalar() + "' is not a finite number (" + spec.doc + ")";
    }
    if ((spec.type == FieldType::kInt || spec.type == FieldType::kFloat) && (spec.min || spec.max)) {
      double v = value.as<double>();
      std::string range = RangeText(spec);
      bool low = spec.min && (spec.min_exclusive ? !(v > *spec.min) : !(v >= *spec.min));
      bool high = spec.max && (spec.max_exclusive ? !(v < *spec.max) : !(v <= *spec.max));
      if (low || high || v != v) {
        return "'" + value.Scalar() + "' is out of range: must be " + range +
               (spec.nullable ? " (or null to turn it off)" : "");
      }
    }
    if (spec.type == FieldType::kString && spec.non_empty && value.Scalar().empty()) {
      return "must not be empty (" + spec.doc + ")";
    }
    if (spec.type == FieldType::kStringList && !spec.element_choices.empty()) {
      std::vector<std::string> seen;
      for (const auto& item : value) {
        const std::string& v = item.Scalar();
        if (std::find(spec.element_choices.begin(), spec.element_choices.end(), v) == spec.element_choices.end()) {
          std::string hint = ClosestMatch(v, spec.element_choices);
          return "'" + v + "' is not one of " + JoinStrings(spec.element_choices, ", ") +
                 (hint.empty() ? "" : "; did you mean '" + hint + "'?");
        }
        if (std::find(seen.begin(), seen.end(), v) != seen.end()) return "'" + v + "' is listed twice";
        seen.push_back(v);
      }
    }
    return "";
  }

  static std::string RangeText(const FieldSpec& spec) {
    auto num = [](double d) {
      char buf[64];
      return std::string(buf, std::to_chars(buf, buf + sizeof buf, d).ptr);  // shortest form: "0", "1", "0.5"
    };
    if (spec.min && spec.max) {
      return "in " + std::string(spec.min_exclusive ? "(" : "[") + num(*spec.min) + ", " + num(*spec.max) +
             (spec.max_exclusive ? ")" : "]");
    }
    if (spec.min) return (spec.min_exclusive ? "above " : "at least ") + num(*spec.min);
    return (spec.max_exclusive ? "below " : "at most ") + num(*spec.max);
  }

  void CheckComponent(const YAML::Node& node, const std::string& key, const std::string& kind) {
    YAML::Node name_node = node["_component_"];
    std::string name = name_node.IsScalar() ? name_node.Scalar() : "";
    const ComponentSpec* comp = registry_.FindComponent(name);
    std::string ckey = key + "._component_";
    if (comp == nullptr) {
      std::vector<std::string> same_kind;  // names and torchtune's aliases of the supported components of the kind
      size_t count = 0;
      for (const ComponentSpec& c : registry_.components()) {
        if ((kind.empty() || c.kind == kind) && c.unsupported_reason.empty()) {
          ++count;
          same_kind.push_back(c.name);
          same_kind.insert(same_kind.end(), c.aliases.begin(), c.aliases.end());
        }
      }
      // A few suggestions, never the whole catalogue: the closest names of the kind, else of any kind. A name in
      // a module that is no typo (two edits) of one with components here (torchtune's llama3_2_vision) is a
      // family not implemented, whose closest names are other models (an 11B vision model is no 1B text one).
      const std::string module = name.substr(0, name.rfind('.') + 1);
      const bool module_known =
          module.empty() || std::any_of(same_kind.begin(), same_kind.end(), [&](const std::string& n) {
            return EditDistance(module, n.substr(0, n.rfind('.') + 1)) <= 2;
          });
      std::vector<std::string> hints;
      if (module_known) hints = ClosestMatches(name, same_kind, 3);
      if (module_known && hints.empty()) {
        hints = ClosestMatches(name, registry_.ComponentNames(/*supported_only=*/true), 3);
      }
      for (std::string& h : hints) h = "'" + h + "'";
      const std::string listing = "`tune ls --components" + (kind.empty() ? std::string() : " " + kind) + "`";
      const std::string family =
          module_known ? "" : "; tune-matrix implements nothing of " + module.substr(0, module.size() - 1) + " yet";
      Add(ckey, "unknown component '" + name + "'" + family +
                    (hints.empty() ? "" : "; did you mean " + JoinAlternatives(hints) + "?") + " (" + listing +
                    " lists " + (count == 1 ? "the " : "all ") + std::to_string(count) +
                    (kind.empty() ? "" : " " + kind) + (count == 1 ? " component)" : " components)"));
      return;
    }
    if (!kind.empty() && comp->kind != kind) {
      Add(ckey, "'" + name + "' is a " + comp->kind + " component; " + key + " needs a " + kind);
      return;
    }
    if (device_ && comp->device_check) Refused(ckey, comp->device_check(node, config_, *device_));
    if (!comp->unsupported_reason.empty()) {
      Add(ckey, "component '" + name + "' is recognised but not supported: " + comp->unsupported_reason);
      return;
    }
    CheckKeys(node, key, comp->params, "component '" + comp->name + "'");
    CheckFields(node, key, comp->params);
  }

  std::vector<Problem> Take() { return std::move(problems_); }

 private:
  template <typename T>
  static bool Converts(const YAML::Node& node) {
    try {
      node.as<T>();
      return true;
    } catch (const YAML::Exception&) {
      return false;
    }
  }

  static const char* Expected(const FieldSpec& spec) {
    switch (spec.type) {
      case FieldType::kBool:
        return "True or False";
      case FieldType::kInt:
        return "an integer";
      case FieldType::kFloat:
        return "a number";
      case FieldType::kString:
        return "a string";
      case FieldType::kStringList:
        return "a list of strings, e.g. [q_proj, v_proj]";
      case FieldType::kComponent:
        return "a component (a mapping with _component_)";
      case FieldType::kAny:
        return "a value";
    }
    return "a value";
  }

  const Config& config_;
  const Registry& registry_;
  const DeviceInfo* device_;
  std::vector<Problem> problems_;
};

}  // namespace

FieldSpec Field(std::string name, FieldType type, std::string default_yaml, std::string doc) {
  FieldSpec f;
  f.name = std::move(name);
  f.type = type;
  f.default_yaml = std::move(default_yaml);
  f.doc = std::move(doc);
  return f;
}

FieldSpec Nullable(FieldSpec f) {
  f.nullable = true;
  return f;
}

FieldSpec Required(FieldSpec f) {
  f.required = true;
  return f;
}

FieldSpec Choices(FieldSpec f, std::vector<std::string> choices) {
  f.choices = std::move(choices);
  return f;
}

FieldSpec AtLeast(FieldSpec f, double min) {
  f.min = min;
  f.min_exclusive = false;
  return f;
}

FieldSpec Above(FieldSpec f, double min) {
  f.min = min;
  f.min_exclusive = true;
  return f;
}

FieldSpec AtMost(FieldSpec f, double max) {
  f.max = max;
  f.max_exclusive = false;
  return f;
}

FieldSpec Below(FieldSpec f, double max) {
  f.max = max;
  f.max_exclusive = true;
  return f;
}

FieldSpec NonEmpty(FieldSpec f) {
  f.non_empty = true;
  return f;
}

FieldSpec ElementsFrom(FieldSpec f, std::vector<std::string> choices) {
  f.element_choices = std::move(choices);
  return f;
}

FieldSpec WithCheck(FieldSpec f, DeviceCheck check) {
  f.device_check = std::move(check);
  return f;
}

FieldSpec WithValueCheck(FieldSpec f, ValueCheck check) {
  f.value_check = std::move(check);
  return f;
}

FieldSpec ComponentField(std::string name, std::string kind, std::string doc, bool required) {
  FieldSpec f = Field(std::move(name), FieldType::kComponent, "", std::move(doc));
  f.component_kind = std::move(kind);
  f.required = required;
  f.nullable = !required;
  return f;
}

const char* FieldTypeName(FieldType t) {
  switch (t) {
    case FieldType::kBool:
      return "bool";
    case FieldType::kInt:
      return "int";
    case FieldType::kFloat:
      return "float";
    case FieldType::kString:
      return "string";
    case FieldType::kStringList:
      return "list";
    case FieldType::kComponent:
      return "component";
    case FieldType::kAny:
      return "any";
  }
  return "any";
}

std::string Problem::ToString() const { return where + ": " + key + ": " + message; }

std::vector<std::string> RepairOf(const std::vector<Problem>& problems) {
  std::vector<std::string> repair;
  for (const Problem& p : problems) {
    if (p.repair.empty()) return {};
    for (const std::string& o : p.repair) {
      if (std::find(repair.begin(), repair.end(), o) == repair.end()) repair.push_back(o);
    }
  }
  return repair;
}

Status Registry::AddRecipe(RecipeSpec recipe) {
  if (FindRecipe(recipe.name) != nullptr) {
    return Status::InvalidArgument("recipe '" + recipe.name + "' is registered twice");
  }
  recipes_.push_back(std::move(recipe));
  return Status::OK();
}

Status Registry::AddComponent(ComponentSpec component) {
  std::vector<std::string> names = component.aliases;
  names.push_back(component.name);
  for (const std::string& n : names) {
    if (component_index_.count(n)) return Status::InvalidArgument("component '" + n + "' is registered twice");
  }
  for (const std::string& n : names) component_index_[n] = components_.size();
  components_.push_back(std::move(component));
  return Status::OK();
}

StatusOr<CellEstimate> RecipeSpec::Estimate(const Config& config, const Registry& registry,
                                            const DeviceInfo& device) const {
  if (!estimate) return CellEstimate();
  try {
    return estimate(config, registry, device);
  } catch (const std::exception& e) {
    return Status::Internal("recipe " + name + " could not estimate this config on " + device.id + " (" + e.what() +
                            "); a bug of the estimate, not of the config: the cell runs unpredicted");
  }
}

const char* RecipeTaskName(RecipeTask task) {
  switch (task) {
    case RecipeTask::kTrain: return "train";
    case RecipeTask::kGenerate: return "generate";
    case RecipeTask::kQuantize: return "quantize";
    case RecipeTask::kEvaluate: return "evaluate";
  }
  return "train";
}

int RecipeSpec::CellRanks(const DeviceTypeTraits& traits) const {
  return launches_ranks() ? traits.matrix_ranks : 1;
}

std::vector<std::string> RecipeSpec::CellLaunchArgs(const DeviceTypeTraits& traits) const {
  if (!launches_ranks()) return {};
  // The device type's ranks, launched by tune run as one process group.
  return {"--nproc_per_node", std::to_string(traits.matrix_ranks)};
}

const RecipeSpec* Registry::FindRecipe(const std::string& name) const {
  for (const RecipeSpec& r : recipes_) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const ComponentSpec* Registry::FindComponent(const std::string& name) const {
  auto it = component_index_.find(name);
  return it == component_index_.end() ? nullptr : &components_[it->second];
}

std::vector<std::string> Registry::RecipeNames() const {
  std::vector<std::string> names;
  for (const RecipeSpec& r : recipes_) names.push_back(r.name);
  return names;
}

std::vector<std::string> Registry::ComponentNames(bool supported_only) const {
  std::vector<std::string> names;
  for (const auto& [name, index] : component_index_) {
    if (!supported_only || components_[index].unsupported_reason.empty()) names.push_back(name);
  }
  return names;
}

const RecipeSpec* Registry::RecipeForConfig(const std::string& config_name) const {
  for (const RecipeSpec& r : recipes_) {
    for (const std::string& c : r.configs) {
      if (c == config_name) return &r;
    }
  }
  return nullptr;
}

namespace {

// output_dir, which every recipe takes (its run summary goes there): never a system folder, whatever the
// recipe's own check of the key says (it may know only the top-level ones). Reported once per key.
void CheckOutputDir(const Config& config, std::vector<Problem>* problems) {
  const YAML::Node dir = config.Find("output_dir");
  if (!dir.IsScalar() || dir.Scalar().empty()) return;
  for (const Problem& p : *problems) {
    if (p.key == "output_dir") return;
  }
  const std::string problem = SystemFolderProblem(dir.Scalar());
  if (problem.empty()) return;
  problems->push_back({config.OriginOf("output_dir").ToString(), "output_dir",
                       "'" + dir.Scalar() + "' " + problem +
                           ", and a run writes its checkpoints, metrics and summary.json straight into output_dir; "
                           "use a folder of its own, e.g. output_dir=/tmp/torchtune/my_run"});
}

}  // namespace

std::vector<Problem> ValidateConfig(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                                    const DeviceInfo* device) {
  Validator v(config, registry, device);
  v.CheckKeys(config.root(), "", recipe.fields, "recipe '" + recipe.name + "'");
  v.CheckFields(config.root(), "", recipe.fields);
  std::vector<Problem> problems = v.Take();
  CheckOutputDir(config, &problems);
  for (const CrossCheck& check : recipe.checks) {
    for (Problem& p : check(config, registry, device)) problems.push_back(std::move(p));
  }
  return problems;
}

namespace {

// Applies the defaults of `fields` under `prefix`, descending into component nodes that name a known
// component.
void ApplyDefaults(Config* config, const std::string& prefix, const std::vector<FieldSpec>& fields,
                   const Registry& registry, const std::string& owner) {
  for (const FieldSpec& f : fields) {
    std::string key = prefix.empty() ? f.name : prefix + "." + f.name;
    if (f.type == FieldType::kComponent) {
      YAML::Node node = config->Find(key);
      if (!IsComponentNode(node) || !node["_component_"].IsScalar()) continue;
      const ComponentSpec* c = registry.FindComponent(node["_component_"].Scalar());
      if (c != nullptr) ApplyDefaults(config, key, c->params, registry, "component '" + c->name + "'");
      continue;
    }
    if (f.default_yaml.empty()) continue;
    // Defaults are the schema's own YAML: a parse failure is a bug in the schema, caught by the registry test.
    config->SetDefault(key, YAML::Load(f.default_yaml), owner);
  }
}

}  // namespace

Status ApplySchemaDefaults(Config* config, const RecipeSpec& recipe, const Registry& registry) {
  try {
    ApplyDefaults(config, "", recipe.fields, registry, "recipe '" + recipe.name + "'");
  } catch (const YAML::Exception& e) {
    return Status::Internal("recipe '" + recipe.name + "': a schema default is not valid YAML (" + e.msg + ")");
  }
  return Status::OK();
}

}  // namespace tmx

namespace tmx {

DeviceCheckResult ValidateForDevice(const Config& config, const RecipeSpec& recipe, const Registry& registry,
                                    const DeviceLookup& lookup) {
  DeviceCheckResult result;
  const DeviceInfo* device = nullptr;
  YAML::Node node = config.Find("device");
  std::string fallback = "cpu";
  for (const FieldSpec& f : recipe.fields) {
    if (f.name == "device" && !f.default_yaml.empty()) fallback = f.default_yaml;
  }
  std::string text = node.IsDefined() && node.IsScalar() ? node.Scalar() : fallback;
  StatusOr<DeviceSelector> selector = ParseDeviceSelector(text);
  if (!selector.ok()) {
    result.problems.push_back({config.OriginOf("device").ToString(), "device", selector.status().message(), false});
  } else {
    StatusOr<DeviceInfo> resolved = lookup(*selector);
    if (resolved.ok()) {
      result.device = *resolved;
      result.device_available = true;
    } else {
      result.device = NominalDeviceInfo(*selector);
      result.absent = Problem{config.OriginOf("device").ToString(), "device", resolved.status().message(), true};
    }
    device = &result.device;
  }
  for (Problem& p : ValidateConfig(config, recipe, registry, device)) result.problems.push_back(std::move(p));
  return result;
}

}  // namespace tmx
