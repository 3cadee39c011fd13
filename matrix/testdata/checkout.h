// A checkout in a scratch folder for the record-keeping tests: three small built-in configs under
// <dir>/configs (found through TUNE_MATRIX_CONFIG_DIR) and a registry of two recipes listing them, plus a
// way to make observations of them as a run would record them.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "base/file_util.h"
#include "harness/config_store.h"
#include "harness/registry.h"
#include "matrix/cell.h"
#include "matrix/support_block.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix::testing {

class TestCheckout {
 public:
  TestCheckout() {
    setenv("TUNE_MATRIX_CONFIG_DIR", configs_dir().c_str(), 1);
    EXPECT_TRUE(MakeDirs(configs_dir() + "/tiny").ok());
    Write("tiny/lora", "# LoRA, small\nbatch_size: 4  # per step\nlr: 3e-4\n");
    Write("tiny/lora_big", "batch_size: 64\nlr: 3e-4\n");
    Write("tiny/full", "batch_size: 2\nlr: 1e-5\n");
    // The keys the configs hold, and those a matrix cell sets (device, output_dir, the step budget).
    std::vector<FieldSpec> fields = {Field("batch_size", FieldType::kInt, "1", "batch"),
                                     Field("lr", FieldType::kFloat, "1e-3", "learning rate"),
                                     Field("device", FieldType::kString, "cpu", "device"),
                                     Field("output_dir", FieldType::kString, "", "output"),
                                     Field("steps", FieldType::kInt, "10", "steps")};
    auto budget = [](int steps) { return std::vector<std::string>{"steps=" + std::to_string(steps)}; };
    RecipeSpec lora{"lora_finetune_single_device", "", RecipeLaunch::kOneProcess, {"tiny/lora", "tiny/lora_big"}, fields, {}, nullptr};
    RecipeSpec full{"full_finetune_single_device", "", RecipeLaunch::kOneProcess, {"tiny/full"}, fields, {}, nullptr};
    lora.cell_overrides = full.cell_overrides = budget;
    EXPECT_TRUE(registry.AddRecipe(lora).ok());
    EXPECT_TRUE(registry.AddRecipe(full).ok());
  }
  ~TestCheckout() { unsetenv("TUNE_MATRIX_CONFIG_DIR"); }

  std::string dir() const { return scratch_.path(); }
  std::string configs_dir() const { return scratch_.path() + "/configs"; }
  std::string Path(const std::string& config) const { return BuiltinConfigPath(config); }
  std::string Read(const std::string& config) const { return ReadFile(Path(config)).value(); }
  void Write(const std::string& config, const std::string& text) const {
    ASSERT_TRUE(WriteFileAtomically(BuiltinConfigPath(config), text).ok());
  }

  // The columns Observe's records go to: cpu on an AMX machine, cuda, both on torch 2.11.0.
  static constexpr const char* kCpu = "cpu (amx, torch 2.11.0)";
  static constexpr const char* kCuda = "cuda (torch 2.11.0)";

  // A record of `config` on `device` as `tune-matrix run` writes it, observed with the config as it is now.
  CellResult Observe(const std::string& config, const std::string& device, CellStatus status,
                     const std::string& verified_at, double tokens_per_second = 100) const {
    CellResult r;
    r.key = {config, device};
    r.recipe = registry.RecipeForConfig(config)->name;
    r.device_type = device.substr(0, device.find(':'));
    r.status = status;
    if (status != CellStatus::kRuns) r.reason = std::string(CellStatusName(status)) + " for a reason";
    r.config_hash = ConfigHash(Read(config));
    if (status == CellStatus::kRuns || status == CellStatus::kFails || status == CellStatus::kTimeout) {
      r.wall_time_s = 12.5;
    }
    if (status == CellStatus::kRuns) {
      r.tokens_per_second = tokens_per_second;
      r.step_time_median_s = 400 / tokens_per_second;
      r.step_time_spread_s = r.step_time_median_s.value() * 0.01;
      r.step_times_s = {*r.step_time_median_s};  // the speed's timed step (matrix/record_rules.h)
      r.peak_memory_bytes = int64_t{3} << 29;
    }
    r.provenance.host = "host-" + r.device_type;
    r.provenance.job = "job-" + r.device_type;
    r.provenance.commit = "0123456789abcdef0123456789abcdef01234567";
    r.provenance.torch_version = "2.11.0";
    r.provenance.device_name = r.device_type == "cpu" ? "Test CPU" : "Test GPU";
    if (r.device_type == "cpu") r.provenance.cpu_class = "amx";
    r.provenance.verified_at = verified_at;
    return r;
  }

  Registry registry;

 private:
  test::ScratchDir scratch_{"checkout"};
};

}  // namespace tmx::matrix::testing
