// A matrix cell: one built-in config on one device, and what running it showed. CellResult is the unit of
// the journal (one JSON line each), of the write-back into configs and of the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/status.h"

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
  kTooSlow,   // predicted wall time (at the rate measured on this device type) exceeds the cell budget; not started
  kWrong,     // trained, but its first step disagrees with the float32 reference beyond its dtype's tolerance
};

// What is known of a status, in one table (CellStatuses) that journals, config metadata, the Markdown, JSON,
// JUnit and HTML reports and the page's script all read: a new status is one enum value and one row.
struct CellStatusInfo {
  CellStatus status;
  const char* name;         // "runs": how journals, config metadata and reports spell it
  const char* symbol;       // what the Markdown report puts before the name, e.g. "✅"
  const char* description;  // one line for a reader (the page's legend)
  // Whether a cell with this outcome started a child (runs, fails, timeout), rather than being recorded from
  // the plan alone (invalid, too_large, too_slow).
  bool started;
  // Sort order of a device column on the page: what runs first, then what might with another budget, then
  // the rest (0 first; every rank distinct).
  int rank;
  // Position in the page's legend and status filter (0 first; every position distinct).
  int listed;
};
// One row per CellStatus, in enum order (the order messages list them).
const std::vector<CellStatusInfo>& CellStatuses();
const CellStatusInfo& StatusInfo(CellStatus s);
// The row named `name`, or nullptr.
const CellStatusInfo* FindCellStatus(const std::string& name);

const char* CellStatusName(CellStatus s);                    // "runs", "fails", ...
std::optional<CellStatus> ParseCellStatus(const std::string& name);
// Every status name, comma-separated, for messages: "runs, fails, invalid, too_large, timeout, too_slow".
std::string CellStatusNames();
bool CellStarted(CellStatus s);  // StatusInfo(s).started
// Whether a status name (as config metadata holds it) is "runs".
bool IsRunsStatus(const std::string& name);

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
  // A cpu record's CPU class (base/cpu_class.h): what ATen and oneDNN used, the machine's class lowered by their
  // environment variables (`tune-matrix run --cpu-class`). "" on other device types, and in a record made before
  // records carried it (RecordedCpuClass says which of those are known). Part of the record's column.
  std::string cpu_class;
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
  // The cell's wall time outside its training steps: process start, model, data, optimizer, the summary at
  // the end (wall_time_s minus the step times). What makes a cell dearer than its steps; benchmarks/README.md
  // tracks its share of real-size cells.
  std::optional<double> startup_time_s;
  std::vector<double> step_times_s;       // every step, warm-up included; warm-up count below
  int warmup_steps = 0;
  std::optional<double> step_time_median_s;  // over steps after warm-up
  std::optional<double> step_time_spread_s;  // median absolute deviation over the same steps
  std::optional<double> tokens_per_second;  // a generation cell's: decode tokens/s
  // A generation cell's prefill (RunSummary's): from the prompt's forward to the first new token, and the prompt
  // tokens of every sequence over that time. Unknown for training.
  std::optional<double> time_to_first_token_s;
  std::optional<double> prefill_tokens_per_second;
  // An evaluation cell's scores (RunSummary::scores as ScoresText: "truthfulqa_mc2 acc 0.2321 ± 0.1526"); "" else.
  std::string scores;
  std::optional<double> first_loss;  // unknown for a run without a loss (generation)
  std::optional<double> last_loss;
  std::optional<double> first_grad_norm;  // RunSummary::first_grad_norm
  // The step's model FLOP rate (RunSummary::flops_per_second, recipes/flops.h) and the device's measured matmul
  // peak at the dtype the cell computed in (harness/matmul_peak.h; the matrix measures it once per run): their
  // quotient is the cell's share of the peak (PeakShare). Unknown where nothing was counted or measured.
  std::optional<double> flops_per_second;
  std::optional<double> peak_flops;
  std::string flops_dtype;  // the dtype peak_flops was measured at ("bf16"); "" without a peak
  // A generation cell's limits (issue 53): its decode steps' bytes read per second (RunSummary::bytes_per_second,
  // recipes/flops.h DecodeStepBytes) or a quantize cell's weights read per second, over the device's measured
  // memory bandwidth (harness/memory_bandwidth.h, the best kernel's): BandwidthShare; and its prefill's FLOP
  // rate (PrefillFlops over the time to the first token) over peak_flops: PrefillPeakShare.
  std::optional<double> bytes_per_second;
  std::optional<double> peak_bandwidth;
  std::optional<double> prefill_flops_per_second;
  double wall_time_s = 0;

  // How the child ended.
  std::optional<int> exit_code;
  std::optional<int> term_signal;
  std::string output_tail;  // the last lines of the child's merged stdout/stderr
  // What stood in for inputs the machine lacked (RunSummary::stand_ins joined with "; "); empty: none.
  std::string stand_in;
  // Processes (ranks) the cell trained with: 1, or a distributed recipe's ranks (RunSummary::world_size).
  int world_size = 1;

  // A proxy cell (matrix/proxy_cell.h): the config was too large or too slow for the device, so copies of it
  // with only their models' layers cut ran instead, the shallowest model at each of `proxy_layers` of its
  // `real_layers` layers. Each proxy's median step time, peak memory and tokens/s are recorded beside its
  // depth, and the real depth's are extrapolated from them: predictions from measurements, never measurements
  // of the config (peak_memory_bytes, tokens_per_second and the step times stay unknown). Empty proxy_layers:
  // no proxy ran.
  std::vector<double> proxy_layers;
  int real_layers = 0;
  // Where even one layer with the whole vocabulary did not fit, the proxies cut the vocabulary too
  // (harness/proxy.h): each proxy's ids (beside proxy_layers) and the config's. Two proxies at one vocabulary
  // and two depths give the cost per layer, two at one depth and two vocabularies the cost per id; the real
  // size's numbers add both. Empty and 0: the proxies kept the vocabulary.
  std::vector<double> proxy_vocab;
  int real_vocab = 0;
  std::string proxy_cut;  // what the deepest proxy cut: "model.num_layers 4 of 16, teacher_model.num_layers 8 of 32"
  std::vector<double> proxy_step_times_s;
  std::vector<double> proxy_peak_memory_bytes;
  std::vector<double> proxy_tokens_per_second;
  std::vector<double> proxy_flops_per_second;
  std::optional<double> extrapolated_step_time_s;
  std::optional<double> extrapolated_tokens_per_second;
  // The real size's FLOPs per step (extrapolated from the proxies', exact in depth and vocabulary) over its
  // extrapolated step time.
  std::optional<double> extrapolated_flops_per_second;
  std::optional<int64_t> extrapolated_peak_memory_bytes;
  // Whether every operation, dtype and shape of the config ran on the device: true when every proxy finished,
  // false when one failed (the cell is then `fails`, with the proxy's error); unknown without proxies.
  std::optional<bool> ops_verified;
  // (ProxyDepths says the depths for a reader.)
  // Why a too_large or too_slow cell has no proxy measurements (nothing to cut, a proxy too large or too
  // slow itself, a proxy stopped at the limit); "" otherwise.
  std::string proxy_note;

  // A repaired cell: the config as written is invalid on the device (status kInvalid, its problems and
  // reason), and each problem's device check named an override that removes it (harness/registry.h
  // DeviceRefusal::repair). The config ran with `repair` applied (in full, or proxied where it does not fit),
  // and `repaired_status` is what that run got; the measurements above are the repaired config's. Empty
  // repair: the cell ran (or was recorded) as written.
  std::vector<std::string> repair;
  std::optional<CellStatus> repaired_status;

  // The numeric check (matrix/numeric_check.h): the checked run's first step (the cell's, or its shallowest
  // proxy's) and its float32 reference's, the relative deltas and the tolerances of the checked dtype. The note
  // says what was compared with what, or why nothing was. Unknown where no reference ran.
  std::optional<double> numeric_loss;
  std::optional<double> numeric_grad_norm;
  std::optional<double> reference_loss;
  std::optional<double> reference_grad_norm;
  std::optional<double> loss_delta;
  std::optional<double> grad_norm_delta;
  std::optional<double> loss_tolerance;
  std::optional<double> grad_norm_tolerance;
  std::string numeric_dtype;  // the checked run's dtype ("bf16"), which chose the tolerances
  // The tensors compared (matrix/tensor_check.h): how many, and the one nearest to or furthest past its
  // tolerance (its name and kind, relative error, cosine similarity and tolerance). Unknown in records made
  // before the tensors were compared, which read as they are.
  std::optional<int> tensors_compared;
  std::string tensor_worst;
  std::optional<double> tensor_error;
  std::optional<double> tensor_cosine;
  std::optional<double> tensor_tolerance;
  std::string numeric_note;
  // The reference run's wall time: one more child of the cell, left out of wall_time_s (the cell's own
  // children), which the plan adds to the cell's predicted time (ReferenceRun::expected_duration_s).
  std::optional<double> reference_time_s;

  // Whether the cell had the machine to itself (base/cpu_usage.h), measured around its process tree: the CPU
  // time the tree got, and the shares of the machine's CPU that other processes and the hypervisor (steal)
  // took while it ran. `disturbed` says why the speed is not the device's ("" when it is): such a cell's status
  // counts, but its speed is neither published into the config nor compared by check or compare, unless the run
  // accepted it (`disturbed_accepted`, MatrixOptions::accept_disturbed): then it is published marked as measured
  // beside other work where the config has no speed measured undisturbed (KeepOrMarkSpeeds), and still never
  // compared.
  std::optional<double> cpu_time_s;
  std::optional<int> threads;  // ATen's CPU threads per process (RunSummary::threads), when the run said
  std::optional<double> others_cpu_share;
  std::optional<double> steal_share;
  std::string disturbed;
  std::optional<bool> disturbed_accepted;  // true where the run published a disturbed speed, marked; else absent

  Provenance provenance;
};

// How far past the reader's clock a record's provenance.verified_at may lie. The clocks of CI machines
// disagree a little; a record dated further ahead would outrank every later record of its cell for ever.
inline constexpr int64_t kMaxClockSkewSeconds = 15 * 60;

// Whether `verified_at` (a UTC time) is later than `now` by more than kMaxClockSkewSeconds: a date that would
// outrank every real measurement of its cell for ever, so it is never trusted as the newer one.
bool DatedAhead(const std::string& verified_at, int64_t now);

// The record's column (harness/column.h): its device type, CPU class (RecordedCpuClass) and torch version, as
// ColumnKey spells it ("cpu (amx, torch 2.11.0)"). Records of different columns are different observations.
std::string ColumnOf(const CellResult& r);

// The fields of a journal record, in one table (JournalFields) from which the writer (ToJson), the reader
// (CellResultFromJson) and the checks (ValidateCellResult) all follow: a new field is one row there.

// Where a field's value lives in a CellResult: a reference for the writer and one for the reader. Functions
// rather than a member pointer, so the fields of the nested key and provenance are rows too.
template <typename T>
struct JournalSlot {
  const T& (*get)(const CellResult&);
  T& (*set)(CellResult&);
};
// The value's C++ type says its JSON form: a string, a boolean, an array of strings, a status name, an integer (read
// into an int only within its range), a number (NaN and the infinities as "nan", "inf", "-inf", which JSON
// lacks), an array of such numbers; a std::optional holds a value that may be unknown.
using JournalValue =
    std::variant<JournalSlot<std::string>, JournalSlot<std::vector<std::string>>, JournalSlot<CellStatus>,
                 JournalSlot<int64_t>, JournalSlot<int>, JournalSlot<std::optional<int64_t>>,
                 JournalSlot<std::optional<int>>, JournalSlot<double>, JournalSlot<std::optional<double>>,
                 JournalSlot<std::vector<double>>, JournalSlot<std::optional<bool>>,
                 JournalSlot<std::optional<CellStatus>>>;

enum class JournalKind {
  kRequired,  // always written; a record without it is refused
  // Left out while it holds its value in a default CellResult (unknown, "", world_size 1), and a record
  // without it reads that value: a std::optional, or a field added after records without it were written.
  kOptional,
};

// What ValidateCellResult accepts of a field; each failure an InvalidArgument naming the field and the fix.
struct JournalBounds {
  // Integers and numbers (each one of a list): from min to max, never NaN. `expected` says the range in the
  // message ("field \"exit_code\" is 256, expected 0 to 255"); empty: any value (a loss may be anything).
  double min = 0;
  double max = 0;
  std::string expected;
  // What a range cannot say, checked on the whole record: a config name, the device against its type, the
  // warm-up against the steps, the date against the clock (`now`, seconds since the epoch).
  Status (*check)(const CellResult& r, const std::string& where, int64_t now) = nullptr;
};

struct JournalField {
  const char* key;  // JSON key; "provenance.host" is "host" in the record's "provenance" object
  JournalKind kind;
  JournalValue value;
  JournalBounds bounds;
};
// One row per field, in the order the reader reads and checks them (the first problem found is reported).
// The JSON's keys are sorted, so the order does not change what is written. "schema_version" is no field:
// every record is written with kCellSchemaVersion and the reader refuses any other before reading fields.
const std::vector<JournalField>& JournalFields();

// The share of the device's measured matmul peak a cell's steps reached (flops_per_second / peak_flops), or
// its proxies' extrapolation to the real size (`extrapolated`); unknown without both numbers.
std::optional<double> PeakShare(const CellResult& r, bool extrapolated = false);
// A decode's (or quantisation's) share of the device's measured memory bandwidth: bytes_per_second /
// peak_bandwidth; and a prefill's share of the matmul peak: prefill_flops_per_second / peak_flops. Unknown without
// both numbers. Over 1 where the device's caches hold what a step reads (a tiny model's weights).
std::optional<double> BandwidthShare(const CellResult& r);
std::optional<double> PrefillPeakShare(const CellResult& r);
// "61% of the memory bandwidth" ("4.2%" below 10%).
std::string BandwidthShareText(double share);

// The share of the peak a proxied cell's deepest proxy reached (its measured FLOP rate over peak_flops), for a
// cell whose proxies ran but drew no line to the real size (a proxy stopped, or their readings' noise): what the
// config's operations achieved here, at the proxy's size. Unknown where the proxies counted no FLOPs.
std::optional<double> ProxyPeakShare(const CellResult& r);
// "40% of the bf16 peak" ("4.2%" below 10%); without a dtype "40% of peak".
std::string PeakShareText(double share, const std::string& dtype);

// The depths of the proxies that ran, for a reader: "1 and 4", or with a vocabulary cut "1 at 16064 ids, 4 at
// 16064 ids and 1 at 8064 ids"; "" when none ran.
std::string ProxyDepths(const CellResult& r);

// What the proxies were cut from, for a reader: "32 layers", or with a vocabulary cut "32 layers and 128256 ids".
std::string ProxiedSize(const CellResult& r);

nlohmann::json ToJson(const CellResult& r);

// Reads one record: rejects records of another schema version or with missing or ill-typed fields, then
// applies ValidateCellResult. Every reader of journals (ReadJournal, so `run --resume`, `merge` and `check`)
// goes through here. `where` (e.g. "file:line") prefixes the message; `now` is seconds since the epoch.
StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, const std::string& where, int64_t now = UnixNow());

// The checks on a record's values (JournalFields' bounds, in row order), each failure an InvalidArgument
// "<where>: cell record ...; fix: ...":
//   config is not empty (merge checks it and the recipe against the registry); device is a device string
//   (not "auto") and device_type is its type; memory sizes are 0 to 2^60 bytes; durations (init, wall, each
//   step, median, spread, time to first token) are finite, 0 to 1e9 s; warmup_steps is 0 to the number of
//   step times; exit_code is 0 to 255 and term_signal 1 to 127; world_size is 1 to 65536; tokens_per_second
//   and prefill_tokens_per_second are 0 or more (inf allowed: a step too short to time); losses may be
//   anything, or absent (a run without a loss); provenance.verified_at is a real UTC time
//   "YYYY-MM-DDTHH:MM:SSZ" at most kMaxClockSkewSeconds after `now`.
Status ValidateCellResult(const CellResult& r, const std::string& where, int64_t now);

}  // namespace tmx::matrix
