// A runnable cpu cell for scheduler tests (proxies, repairs, numeric checks build theirs from it).
#pragma once

#include <string>

#include "matrix/plan.h"

namespace tmx::matrix {

// `config` of `recipe` on cpu, runnable, 3 steps, its output folder `<dir>/cell`, its preset naming the cell.
inline PlannedCell RunnableCpuCell(const std::string& config, const std::string& recipe, const std::string& dir) {
  PlannedCell c;
  c.key = {config, "cpu"};
  c.recipe = recipe;
  c.device.id = "cpu";
  c.device.type = "cpu";
  c.device_type = "cpu";
  c.runnable = true;
  c.steps = 3;
  c.output_dir = dir + "/cell";
  c.preset.key = c.key;
  c.preset.recipe = c.recipe;
  c.preset.device_type = "cpu";
  return c;
}

}  // namespace tmx::matrix
