// What the matrix says about a config: per column (a device type, its CPU class and torch version,
// harness/column.h) one support entry (status, measurements and where they were observed), and per config its entries
// with what its generated block claims. Two names for everything the configs, the checks and the reports pass around:
// SupportEntry and ConfigSupport.
//
// The fields of an entry are one table (SupportFields), which drives the block's rendering and parsing
// (support_block.h), equality, and the JSON report: adding a field is one row there.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "matrix/cell.h"

namespace tmx::matrix {

// One entry of `metadata.support`, keyed by its column ("cpu (amx, torch 2.11.0)").
struct SupportEntry {
  std::string status;  // a CellStatusName (a name in CellStatuses()), e.g. "runs"
  std::string reason;  // one line; empty for "runs"
  std::optional<double> tokens_per_second;  // a generation cell's: decode tokens/s
  // A generation cell's prefill (CellResult's); absent for training, and then left out of support.json too.
  std::optional<double> time_to_first_token_s;
  std::optional<double> prefill_tokens_per_second;
  std::optional<double> step_time_s;         // median step time after warm-up
  std::optional<double> step_time_spread_s;  // median absolute deviation of those step times (noise)
  std::optional<double> peak_memory_gib;     // measured peak, GiB (2^30 bytes)
  std::optional<double> wall_time_s;         // how long the cell took, start to end (balances CI shards)
  // Of wall_time_s, the part outside the training steps (process start, model, data): with step_time_s it
  // sets how many steps the next run of the cell trains (MatrixOptions::startup_share).
  std::optional<double> startup_time_s;
  std::string device_name;
  // A cpu entry's CPU class as its record has it (Provenance::cpu_class); "" where the record has none.
  std::string cpu_class;
  std::string torch_version;
  // The torch axis of the entry's device column (DeviceColumnKey: the device type and CPU class), the same in each
  // of its entries (AddTorchSummaries): every torch version measured there with its status, oldest first ("2.11.0
  // runs, 2.15.0 fails"), and `min_torch`, the oldest of them on which the config runs ("" where none does).
  std::string torch_versions;
  std::string min_torch;
  std::string verified_at;  // UTC, ISO 8601
  std::string config_hash;  // ConfigHash of the config the result was observed with
  // Where the result was observed (provenance, kept through `tune-matrix merge`).
  std::string host;
  std::string job;     // CI job name; empty for a local run
  std::string commit;  // git commit of the checkout that ran it
  // What shipped sample stood in for the config's data (e.g. the dataset it names was not on the machine);
  // empty when the config's own data was used.
  std::string stand_in;
  // Ranks a distributed recipe's cell trained with (tokens/s counts all of them, peak memory is the largest
  // rank's on an accelerator and their sum on cpu); absent for one process.
  std::optional<double> ranks;
  // ATen threads per process the measurement ran with (CellResult::threads: a cpu lane's width, or the cores a
  // cell had): speeds of entries with different thread counts are not compared. Absent where not recorded.
  std::optional<double> threads;
  // A proxied cell (CellResult's proxy fields, matrix/proxy_cell.h): whether every operation of the config
  // ran here ("yes": every proxy ran; "no": one failed; "": no proxy ran), which proxies ("1 and 4 of 32
  // layers (model.num_layers 4 of 32)"), and the real depth's numbers extrapolated from theirs: predictions
  // from measurements, kept apart from the measured fields above.
  std::string ops_verified;
  std::string proxy;
  // An evaluation cell's scores (CellResult::scores): "truthfulqa_mc2 acc 0.2321 ± 0.1526"; "" for any other.
  std::string scores;
  std::optional<double> extrapolated_tokens_per_second;
  std::optional<double> extrapolated_step_time_s;
  std::optional<double> extrapolated_peak_memory_gib;
  // The steps' model FLOP rate in GFLOP/s, and its share of the device's measured matmul peak at `peak_dtype`
  // (CellResult's, PeakShare); a proxied cell's extrapolated share. Absent where not counted or not measured.
  std::optional<double> gflops_per_second;
  std::optional<double> peak_share;
  std::optional<double> extrapolated_peak_share;
  // Where nothing was extrapolated: the share the deepest proxy reached (ProxyPeakShare), at its size.
  std::optional<double> proxy_peak_share;
  std::string peak_dtype;
  // A generation cell's decode (or a quantize cell's weights) over the device's memory bandwidth (BandwidthShare),
  // and its prefill over the matmul peak at `peak_dtype` (PrefillPeakShare). Absent for training.
  std::optional<double> bandwidth_share;
  std::optional<double> prefill_peak_share;
  // The numeric check (CellResult's, matrix/numeric_check.h): what was compared with what and how far apart
  // ("bf16 on cpu against float32 on cpu: first loss off by 0.12% (tolerance 2%), ..."), or why nothing was;
  // and the relative deltas of the first step's loss and gradient norm.
  std::string numeric;
  std::optional<double> loss_delta;
  std::optional<double> grad_norm_delta;
  // Its tensors (matrix/tensor_check.h): the one nearest to or furthest past its tolerance, and its relative
  // error (CellResult::tensor_worst, tensor_error).
  std::string tensor_worst;
  std::optional<double> tensor_error;
  // The numeric check's reference run's wall time (CellResult::reference_time_s), which wall_time_s leaves out:
  // the plan adds it to the cell's predicted time.
  std::optional<double> reference_time_s;
  // A repaired cell (CellResult's repair, matrix/repair_cell.h): status "invalid" as written, and with these
  // overrides (space-separated, as `tune run` takes them) the config got `repaired_status` ("runs", "fails",
  // "too_large", ...); the measurements above are then the repaired config's. Both "" for any other cell.
  std::string repair;
  std::string repaired_status;
  // Where the speeds above were measured beside other work and published anyway (CellResult::disturbed_accepted,
  // --accept-disturbed): why they are the machine's load as much as the device's; "" for an undisturbed speed.
  std::string speeds_disturbed;

  bool operator==(const SupportEntry& o) const;
  bool operator!=(const SupportEntry& o) const { return !(*this == o); }
};

// One field of SupportEntry: its name in the block and in support.json, and where it lives. Exactly one of
// `text` and `number` is set. In the block `status` is written plain; other text fields double-quoted and
// left out when empty; numbers written by `format` and left out when absent or not finite.
struct SupportField {
  const char* name;
  std::string SupportEntry::*text;
  std::optional<double> SupportEntry::*number;
  std::string (*format)(double);
  // In support.json a number not measured is null, except in a field added after reports without it were
  // published (only some cells measure it): left out, so the entries of the others keep their bytes. Such a
  // text field is left out when empty.
  bool omitted_when_absent = false;
};
// status, reason, the numbers, then the provenance strings: the order entries are written in.
const std::vector<SupportField>& SupportFields();

// `entry` as support.json writes it: every field in SupportFields order, null for a number not measured (or
// left out: SupportField::omitted_when_absent).
nlohmann::ordered_json SupportEntryToJson(const SupportEntry& entry);

// The entry a cell contributes to its config's metadata (status, reason, median step time, tokens/s, a
// generation's time to first token and prefill tokens/s, peak memory in GiB, provenance), stored under
// ColumnOf(cell).
SupportEntry SupportFromCell(const CellResult& cell);

// The column (harness/column.h) of an entry of `device_type`: ColumnOf its record, from the fields it keeps.
std::string ColumnOfEntry(const std::string& device_type, const SupportEntry& entry);

// Sets every entry's torch_versions and min_torch from the entries of `support` (keyed by column) that share its
// device column, so a block says per device on which torch versions a config was measured and from which it runs.
void AddTorchSummaries(std::map<std::string, SupportEntry>* support);

// "runs with 2 overrides", "fails with 1 override": a repaired cell's outcome in a few words.
std::string RepairedOutcome(const std::string& repaired_status, size_t overrides);

// For a cell measured beside other work (CellResult::disturbed): its timings (tokens/s, step time and spread,
// wall and start-up time, time to first token, prefill tokens/s, the extrapolated tokens/s and step time, the
// FLOP rate and the shares of the peak) are the machine's load, not the device's
// speed, so `entry` takes `previous`'s (the config's entry before this write-back; null: none, and the
// timings are left out).
void KeepPreviousSpeeds(const SupportEntry* previous, SupportEntry* entry);

// For a disturbed cell: where the run accepted its speed (CellResult::disturbed_accepted) and `previous` has no
// speed measured undisturbed, `entry` keeps the cell's speeds marked with why (speeds_disturbed); otherwise
// KeepPreviousSpeeds. An undisturbed speed is never superseded by a disturbed one. True where it marked.
bool KeepOrMarkSpeeds(const SupportEntry* previous, const CellResult& cell, SupportEntry* entry);

// One built-in config and what its generated block claims.
struct ConfigSupport {
  std::string config;                           // built-in name, e.g. "llama3_2/1B_lora_single_device"
  std::string recipe;                           // the recipe that lists it
  std::map<std::string, SupportEntry> entries;  // metadata.support, by column (ColumnOfEntry)
  std::vector<std::string> supported_devices;   // metadata.supported_devices: the columns that run
  std::string path;                             // its file, as problems name it
  std::string current_hash;                     // ConfigHash of the file as it is now
  // File lines (1-based; 0 when the config has no block), so problems can point at them.
  int supported_devices_line = 0;
  std::map<std::string, int> entry_lines;  // column -> line of its key under `support:`
  int block_end_line = 0;                  // line of the END marker
};

}  // namespace tmx::matrix
