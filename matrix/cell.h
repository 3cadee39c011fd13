// A matrix cell: one built-in config on one device, and what running it showed. CellResult is the unit of
// the journal (one JSON line each), of the write-back into configs and of the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/status.h"

namespace tmx::matrix {

// Bump when a field changes meaning; readers refuse records of a newer schema.
inline constexpr int kCellSchemaVersion = 1;

// Outcome of one cell, as written into config metadata (`metadata.support.<device>.status`).
enum class CellStatus {
  kRuns,      // trained the budgeted steps with finite loss
  kFails,     // crashed, aborted, ran out of memory, non-finite loss or non-zero exit
  kInvalid,   // the recipe's own field checks reject the config on this device
  kTooLarge,  // predicted peak memory exceeds the device's memory; not started
  kTimeout,   // killed at the wall-clock limit
};
const char* CellStatusName(CellStatus s);                    // "runs", "fails", ...
std::optional<CellStatus> ParseCellStatus(const std::string& name);
// Whether a cell with this outcome started a child (runs, fails, timeout), rather than being recorded from
// the plan alone (invalid, too_large).
bool CellStarted(CellStatus s);

struct CellKey {
  std::string config;  // built-in config name, e.g. "llama3_2/1B_lora_single_device"
  std::string device;  // device string, e.g. "cpu", "cuda:0"
  bool operator<(const CellKey& o) const { return config != o.config ? config < o.config : device < o.device; }
  bool operator==(const CellKey& o) const { return config == o.config && device == o.device; }
};

// Where and when a result was observed.
struct Provenance {
  std::string host;
  std::string job;            // CI job name, or "" for a local run
  std::string commit;         // git commit of the checkout, or ""
  std::string torch_version;  // LibTorch version the cell ran with
  std::string device_name;    // e.g. "NVIDIA H200", or the CPU model
  std::string verified_at;    // UTC, ISO 8601, e.g. "2026-12-02T11:30:00Z"
};

struct CellResult {
  CellKey key;
  std::string recipe;
  std::string device_type;  // "cpu", "cuda", "mps", "xpu" (the key used in config metadata)
  CellStatus status = CellStatus::kFails;
  std::string reason;                     // empty for kRuns
  std::vector<std::string> problems;      // validation problems, each one line
  std::string config_hash;                // hash of the config text outside the generated block

  // Memory, in bytes. Predicted before the run; peak as measured by the child.
  int64_t predicted_memory_bytes = 0;
  int64_t device_memory_bytes = 0;        // total memory of the device, 0 if unknown
  std::optional<int64_t> peak_memory_bytes;

  // Timing and training signal, present when the child reported them.
  std::optional<double> init_time_s;
  std::vector<double> step_times_s;       // every step, warm-up included; warm-up count below
  int warmup_steps = 0;
  std::optional<double> step_time_median_s;  // over steps after warm-up
  std::optional<double> step_time_spread_s;  // median absolute deviation over the same steps
  std::optional<double> tokens_per_second;
  std::optional<double> first_loss;
  std::optional<double> last_loss;
  double wall_time_s = 0;

  // How the child ended.
  std::optional<int> exit_code;
  std::optional<int> term_signal;
  std::string output_tail;  // the last lines of the child's merged stdout/stderr

  Provenance provenance;
};

nlohmann::json ToJson(const CellResult& r);
// Rejects records of another schema version or with missing/ill-typed fields; `where` (e.g. "file:line")
// prefixes the message.
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, const std::string& where);

}  // namespace tmx::matrix
