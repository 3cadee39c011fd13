// For the recipes' end-to-end tests: a config's recipe run in this process on the cpu, as `tune run` runs it once
// the config resolves (schema defaults applied), with what it printed and the summary.json it wrote.
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"
#include "recipes/builtin.h"

namespace tmx::recipes {

struct InProcessRun {
  Status status;           // the recipe's; a config that does not resolve is its error
  std::string printed;     // what the run printed
  nlohmann::json summary;  // <output_dir>/summary.json; null when none was written
  std::string output_dir;  // the resolved config's
};

// How the run is entered: the config's recipe's own `run` unless given (RecipeRun: another recipe's).
using RecipeEntry = std::function<Status(const Config& config, const RunContext& context)>;

// `recipe`'s run, to run a config through a recipe other than its own (a distributed config in one process, a
// distillation config as plain LoRA fine-tuning of its student).
inline RecipeEntry RecipeRun(RecipeSpec recipe) {
  return [recipe = std::move(recipe)](const Config& config, const RunContext& context) {
    return recipe.run(config, context);
  };
}

// Runs the built-in config (or file) `name` with `overrides` on the cpu. `stand_ins`: RunContext::allow_stand_ins.
inline InProcessRun RunInProcess(const std::string& name, const std::vector<std::string>& overrides,
                                 const RecipeEntry& entry = nullptr, bool stand_ins = false) {
  InProcessRun run;
  const Registry& registry = BuiltinRegistry();
  StatusOr<LocatedConfig> located = LocateConfig(name, registry);
  if (!located.ok()) {
    run.status = located.status();
    return run;
  }
  StatusOr<Config> config = LoadResolvedConfig(*located, overrides, located->recipe, &registry);
  if (!config.ok()) {
    run.status = config.status();
    return run;
  }
  RunContext context;
  context.registry = &registry;
  context.device = *ProbeDevice(*ParseDeviceSelector("cpu"));
  context.config_name = name;
  context.allow_stand_ins = stand_ins;
  std::ostringstream out;
  context.out = &out;
  run.status = entry ? entry(*config, context) : located->recipe->run(*config, context);
  run.printed = out.str();
  run.output_dir = config->Find("output_dir").Scalar();
  StatusOr<std::string> text = ReadFile(run.output_dir + "/summary.json");
  if (text.ok()) run.summary = nlohmann::json::parse(*text);
  return run;
}

}  // namespace tmx::recipes
