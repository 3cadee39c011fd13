#include "matrix/cell.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "base/cpu_class.h"
#include "base/json_io.h"
#include "base/text.h"
#include "harness/column.h"
#include "harness/device.h"

namespace tmx::matrix {
namespace {

using nlohmann::json;

// Reads the fields of one JSON object; every error names `where`, the field and what was expected.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string where, std::string prefix)
      : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {}

  bool Has(const char* name) const { return obj_.contains(name); }

  // One overload per JournalValue type.
  Status Read(const char* name, std::string* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_string()) return TypeError(name, "a string", *v);
    *out = v->get<std::string>();
    return Status::OK();
  }

  Status Read(const char* name, std::vector<std::string>* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_array()) return TypeError(name, "an array of strings", *v);
    out->clear();
    for (const json& e : *v) {
      if (!e.is_string()) return TypeError(name, "an array of strings", e);
      out->push_back(e.get<std::string>());
    }
    return Status::OK();
  }

  Status Read(const char* name, CellStatus* out) const {
    std::string status;
    TM_RETURN_IF_ERROR(Read(name, &status));
    std::optional<CellStatus> parsed = ParseCellStatus(status);
    if (!parsed) return Error(Field(name) + " is \"" + status + "\", expected one of " + CellStatusNames());
    *out = *parsed;
    return Status::OK();
  }

  Status Read(const char* name, bool* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_boolean()) return TypeError(name, "true or false", *v);
    *out = v->get<bool>();
    return Status::OK();
  }

  Status Read(const char* name, int64_t* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    return ToInt64(name, *v, out);
  }

  Status Read(const char* name, int* out) const {
    int64_t value;
    TM_RETURN_IF_ERROR(Read(name, &value));
    return Narrow(name, value, out);
  }

  Status Read(const char* name, double* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    std::optional<double> d = NumberFromJson(*v);
    if (!d) return TypeError(name, kNumberExpected, *v);
    *out = *d;
    return Status::OK();
  }

  Status Read(const char* name, std::vector<double>* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_array()) return TypeError(name, "an array of numbers", *v);
    out->clear();
    for (const json& e : *v) {
      std::optional<double> d = NumberFromJson(e);
      if (!d) return TypeError(name, "an array of numbers", e);
      out->push_back(*d);
    }
    return Status::OK();
  }

  // A value that is present (an absent optional field is the caller's to skip).
  template <typename T>
  Status Read(const char* name, std::optional<T>* out) const {
    T value;
    TM_RETURN_IF_ERROR(Read(name, &value));
    *out = value;
    return Status::OK();
  }

  Status Object(const char* name, const json** out) const {
    TM_RETURN_IF_ERROR(Find(name, out));
    if (!(*out)->is_object()) return TypeError(name, "an object", **out);
    return Status::OK();
  }

  Status Error(const std::string& problem) const {
    return Status::InvalidArgument(where_ + ": cell record " + problem);
  }

 private:
  static constexpr const char* kNumberExpected = "a number (or \"nan\", \"inf\", \"-inf\")";

  std::string Field(const char* name) const { return "field \"" + prefix_ + name + "\""; }

  Status Find(const char* name, const json** out) const {
    auto it = obj_.find(name);
    if (it == obj_.end()) return Error("has no " + Field(name));
    *out = &*it;
    return Status::OK();
  }

  Status TypeError(const char* name, const char* expected, const json& got) const {
    return Error(Field(name) + " must be " + expected + ", not " + got.type_name());
  }

  Status ToInt64(const char* name, const json& v, int64_t* out) const {
    if (v.is_number_integer() &&
        (!v.is_number_unsigned() || v.get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()})) {
      *out = v.get<int64_t>();
      return Status::OK();
    }
    if (v.is_number_integer()) return Error(Field(name) + " is out of range");
    return TypeError(name, "an integer", v);
  }

  Status Narrow(const char* name, int64_t value, int* out) const {
    if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
      return Error(Field(name) + " is out of range: " + std::to_string(value));
    }
    *out = static_cast<int>(value);
    return Status::OK();
  }

  const json& obj_;
  std::string where_;
  std::string prefix_;
};

// A journal key split at its dot: "provenance.host" is "host" in the object "provenance"; "config" is in
// the record itself (empty parent).
std::pair<std::string, std::string> SplitKey(const char* key) {
  std::string k = key;
  size_t dot = k.find('.');
  if (dot == std::string::npos) return {"", k};
  return {k.substr(0, dot), k.substr(dot + 1)};
}

json ValueToJson(const std::string& v) { return v; }
json ValueToJson(const std::vector<std::string>& v) { return v; }
json ValueToJson(CellStatus v) { return CellStatusName(v); }
json ValueToJson(bool v) { return v; }
json ValueToJson(int64_t v) { return v; }
json ValueToJson(int v) { return v; }
json ValueToJson(double v) { return NumberToJson(v); }
json ValueToJson(const std::vector<double>& v) {
  json values = json::array();
  for (double d : v) values.push_back(NumberToJson(d));
  return values;
}
template <typename T>
json ValueToJson(const std::optional<T>& v) {
  // An unknown value is left out by its kOptional row; null here would only show a row of the wrong kind.
  return v ? ValueToJson(*v) : json(nullptr);
}

constexpr int64_t kMaxMemoryBytes = int64_t{1} << 60;
constexpr double kMaxSeconds = 1e9;
constexpr size_t kMaxDeviceLength = 64;  // longer is no device string; keeps messages and matching cheap
constexpr const char* kFix = "repair or delete that line, or rerun the cell";

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

Status Fail(const std::string& where, const std::string& problem, const char* fix = kFix) {
  return Status::InvalidArgument(where + ": cell record " + problem + "; fix: " + fix);
}

// Whether a value lies in its row's range. Integers are compared as integers: a double cannot hold every
// int64 (2^60 + 1 would read as 2^60).
bool InRange(int64_t v, const JournalBounds& b) {
  constexpr double kInt64Limit = 0x1p63;
  return (b.min <= -kInt64Limit || v >= static_cast<int64_t>(b.min)) &&
         (b.max >= kInt64Limit || v <= static_cast<int64_t>(b.max));
}
bool InRange(double v, const JournalBounds& b) { return v >= b.min && v <= b.max; }  // false for NaN

// A field's range check, one overload per JournalValue type: each failure names the field, its value and
// what was expected.
Status CheckRange(const JournalField& field, int64_t v, const std::string& where) {
  if (InRange(v, field.bounds)) return Status::OK();
  return Fail(where, std::string("field \"") + field.key + "\" is " + std::to_string(v) + ", expected " +
                         field.bounds.expected);
}
Status CheckRange(const JournalField& field, int v, const std::string& where) {
  return CheckRange(field, int64_t{v}, where);
}
Status CheckRange(const JournalField& field, double v, const std::string& where) {
  if (InRange(v, field.bounds)) return Status::OK();
  return Fail(where, std::string("field \"") + field.key + "\" is " + FormatNumber(v) + ", expected " +
                         field.bounds.expected);
}
Status CheckRange(const JournalField& field, const std::vector<double>& values, const std::string& where) {
  for (double v : values) TM_RETURN_IF_ERROR(CheckRange(field, v, where));
  return Status::OK();
}
// Text and status have no range; a bounds.check says what they must hold.
template <typename T>
Status CheckRange(const JournalField&, const T&, const std::string&) {
  return Status::OK();
}
template <typename T>
Status CheckRange(const JournalField& field, const std::optional<T>& v, const std::string& where) {
  return v ? CheckRange(field, *v, where) : Status::OK();
}

Status CheckConfigNamed(const CellResult& r, const std::string& where, int64_t) {
  return r.key.config.empty() ? Fail(where, "field \"config\" is empty") : Status::OK();
}

Status CheckDevice(const CellResult& r, const std::string& where, int64_t) {
  StatusOr<DeviceSelector> device =
      r.key.device.size() <= kMaxDeviceLength ? ParseDeviceSelector(r.key.device) : Status::InvalidArgument("too long");
  if (!device.ok() || device->is_auto) {
    return Fail(where, "field \"device\" is \"" + r.key.device.substr(0, kMaxDeviceLength) +
                           "\", not a device such as cpu or cuda:0");
  }
  if (r.device_type != device->type) {
    return Fail(where, "device type \"" + r.device_type + "\" does not match device \"" + r.key.device + "\"");
  }
  return Status::OK();
}

// A CPU class is a cpu record's, and one of base/cpu_class.h's names.
Status CheckCpuClass(const CellResult& r, const std::string& where, int64_t) {
  const std::string& cpu_class = r.provenance.cpu_class;
  if (cpu_class.empty() || (r.device_type == "cpu" && FindCpuClass(cpu_class) != nullptr)) return Status::OK();
  return Fail(where,
              "provenance.cpu_class \"" + cpu_class.substr(0, 40) + "\" " +
                  (r.device_type == "cpu" ? "is not a CPU class (" + CpuClassNames() + ")"
                                          : "is set on a " + r.device_type + " record; only cpu records have one"));
}

// The warm-up counts among the recorded steps, so its range depends on how many there are.
Status CheckWarmup(const CellResult& r, const std::string& where, int64_t) {
  int64_t steps = static_cast<int64_t>(r.step_times_s.size());
  if (r.warmup_steps >= 0 && r.warmup_steps <= steps) return Status::OK();
  return Fail(where, "field \"warmup_steps\" is " + std::to_string(r.warmup_steps) + ", expected 0 to the " +
                         std::to_string(steps) + " steps recorded");
}

Status CheckVerifiedAt(const CellResult& r, const std::string& where, int64_t now) {
  const std::string& verified_at = r.provenance.verified_at;
  std::optional<int64_t> t = ParseUtc(verified_at);
  if (!t) {
    return Fail(where, "provenance.verified_at \"" + verified_at.substr(0, 40) +
                           "\" is not a UTC time of the form 2026-12-02T11:30:00Z, so the record cannot be "
                           "ordered against other journals");
  }
  if (*t > now + kMaxClockSkewSeconds) {
    return Fail(where,
                "provenance.verified_at \"" + verified_at + "\" is later than this machine's clock (" +
                    FormatUtc(now) + ") by more than " + std::to_string(kMaxClockSkewSeconds) +
                    " s; a record dated ahead would outrank every later record of its cell",
                "correct the clock of the machine that wrote it and rerun the cell, or delete that line");
  }
  return Status::OK();
}

// A repaired status belongs to an invalid cell with a repair: what the config got with the repair applied.
Status CheckRepaired(const CellResult& r, const std::string& where, int64_t) {
  if (r.repair.empty() && !r.repaired_status) return Status::OK();
  if (r.status != CellStatus::kInvalid || r.repair.empty() || !r.repaired_status ||
      *r.repaired_status == CellStatus::kInvalid) {
    return Fail(where, "has a repair without a repaired status, or a repaired status without a repair, or either on "
                       "a cell that is not invalid as written (status \"" + std::string(CellStatusName(r.status)) +
                       "\"); a repair is recorded with the status its run got, on an invalid cell");
  }
  return Status::OK();
}

// The type of the member `M` points to.
template <typename M>
struct MemberOf;
template <typename T, typename C>
struct MemberOf<T C::*> {
  using Type = T;
};

// The slot of a member of CellResult, or of a member of one of its members (key.config, provenance.host).
template <auto member>
auto Slot() {
  using T = typename MemberOf<decltype(member)>::Type;
  return JournalSlot<T>{[](const CellResult& r) -> const T& { return r.*member; },
                        [](CellResult& r) -> T& { return r.*member; }};
}
template <auto outer, auto inner>
auto Slot() {
  using T = typename MemberOf<decltype(inner)>::Type;
  return JournalSlot<T>{[](const CellResult& r) -> const T& { return r.*outer.*inner; },
                        [](CellResult& r) -> T& { return r.*outer.*inner; }};
}

JournalBounds Range(double min, double max, std::string expected) { return {min, max, std::move(expected)}; }
JournalBounds Bytes() {
  return Range(0, static_cast<double>(kMaxMemoryBytes), "bytes from 0 to " + std::to_string(kMaxMemoryBytes));
}
JournalBounds Seconds() { return Range(0, kMaxSeconds, "seconds from 0 to " + FormatNumber(kMaxSeconds)); }
JournalBounds TokensPerSecond() {
  return Range(0, std::numeric_limits<double>::infinity(),
               "tokens per second from 0 (inf for a step too short to time)");
}
JournalBounds FlopsPerSecond() {
  return Range(0, std::numeric_limits<double>::infinity(), "FLOP/s from 0 (inf for a step too short to time)");
}
JournalBounds BytesPerSecond() {
  return Range(0, std::numeric_limits<double>::infinity(), "bytes/s from 0 (inf for a step too short to time)");
}
JournalBounds Check(Status (*check)(const CellResult&, const std::string&, int64_t)) { return {0, 0, "", check}; }

// The object holding `key`'s value: the record, or the nested object its prefix names.
json& Parent(json& record, const std::string& parent) { return parent.empty() ? record : record[parent]; }

using R = CellResult;
constexpr JournalKind kRequired = JournalKind::kRequired;
constexpr JournalKind kOptional = JournalKind::kOptional;

// What every record has: the cell, its status and why, its memory and its steps.
std::vector<JournalField> RunFields() {
  return {
      {"config", kRequired, Slot<&R::key, &CellKey::config>(), Check(CheckConfigNamed)},
      {"device", kRequired, Slot<&R::key, &CellKey::device>(), Check(CheckDevice)},  // and device_type
      {"recipe", kRequired, Slot<&R::recipe>(), {}},
      {"device_type", kRequired, Slot<&R::device_type>(), {}},
      {"status", kRequired, Slot<&R::status>(), {}},
      {"reason", kRequired, Slot<&R::reason>(), {}},
      {"problems", kRequired, Slot<&R::problems>(), {}},
      {"config_hash", kRequired, Slot<&R::config_hash>(), {}},
      {"predicted_memory_bytes", kRequired, Slot<&R::predicted_memory_bytes>(), Bytes()},
      {"device_memory_bytes", kRequired, Slot<&R::device_memory_bytes>(), Bytes()},
      {"peak_memory_bytes", kOptional, Slot<&R::peak_memory_bytes>(), Bytes()},
      {"init_time_s", kOptional, Slot<&R::init_time_s>(), Seconds()},
      {"startup_time_s", kOptional, Slot<&R::startup_time_s>(), Seconds()},
      {"step_times_s", kRequired, Slot<&R::step_times_s>(), Seconds()},
      {"warmup_steps", kRequired, Slot<&R::warmup_steps>(), Check(CheckWarmup)},
      {"step_time_median_s", kOptional, Slot<&R::step_time_median_s>(), Seconds()},
      {"step_time_spread_s", kOptional, Slot<&R::step_time_spread_s>(), Seconds()},
      {"tokens_per_second", kOptional, Slot<&R::tokens_per_second>(), TokensPerSecond()},
      {"first_loss", kOptional, Slot<&R::first_loss>(), {}},  // a loss may be anything, NaN included
      {"last_loss", kOptional, Slot<&R::last_loss>(), {}},
      {"wall_time_s", kRequired, Slot<&R::wall_time_s>(), Seconds()},
      {"exit_code", kOptional, Slot<&R::exit_code>(), Range(0, 255, "0 to 255")},
      {"term_signal", kOptional, Slot<&R::term_signal>(), Range(1, 127, "1 to 127")},
      {"output_tail", kRequired, Slot<&R::output_tail>(), {}},
  };
}

// The machine's load, generation's prefill, scores, and what a cell that does not fit measured through its
// proxies.
std::vector<JournalField> LoadAndProxyFields() {
  return {
      // Added after schema version 1 was first written: records without them read "" and one process.
      {"stand_in", kOptional, Slot<&R::stand_in>(), {}},
      {"world_size", kOptional, Slot<&R::world_size>(), Range(1, 65536, "1 to 65536 ranks")},
      {"cpu_time_s", kOptional, Slot<&R::cpu_time_s>(), Seconds()},
      {"threads", kOptional, Slot<&R::threads>(), Range(1, 65536, "1 to 65536 threads")},
      {"others_cpu_share", kOptional, Slot<&R::others_cpu_share>(), Range(0, 1, "a share from 0 to 1")},
      {"steal_share", kOptional, Slot<&R::steal_share>(), Range(0, 1, "a share from 0 to 1")},
      {"disturbed", kOptional, Slot<&R::disturbed>(), {}},
      {"disturbed_accepted", kOptional, Slot<&R::disturbed_accepted>(), {}},
      {"time_to_first_token_s", kOptional, Slot<&R::time_to_first_token_s>(), Seconds()},
      {"prefill_tokens_per_second", kOptional, Slot<&R::prefill_tokens_per_second>(), TokensPerSecond()},
      {"scores", kOptional, Slot<&R::scores>(), {}},
      {"proxy_layers", kOptional, Slot<&R::proxy_layers>(), Range(1, 65536, "1 to 65536 layers")},
      {"real_layers", kOptional, Slot<&R::real_layers>(), Range(0, 65536, "0 to 65536 layers")},
      {"proxy_vocab", kOptional, Slot<&R::proxy_vocab>(), Range(1, 1e7, "1 to 10000000 ids")},
      {"real_vocab", kOptional, Slot<&R::real_vocab>(), Range(0, 1e7, "0 to 10000000 ids")},
      {"proxy_cut", kOptional, Slot<&R::proxy_cut>(), {}},
      {"proxy_step_times_s", kOptional, Slot<&R::proxy_step_times_s>(), Seconds()},
      {"proxy_peak_memory_bytes", kOptional, Slot<&R::proxy_peak_memory_bytes>(), Bytes()},
      {"proxy_tokens_per_second", kOptional, Slot<&R::proxy_tokens_per_second>(), TokensPerSecond()},
      {"extrapolated_step_time_s", kOptional, Slot<&R::extrapolated_step_time_s>(), Seconds()},
      {"extrapolated_tokens_per_second", kOptional, Slot<&R::extrapolated_tokens_per_second>(), TokensPerSecond()},
      {"extrapolated_peak_memory_bytes", kOptional, Slot<&R::extrapolated_peak_memory_bytes>(), Bytes()},
      {"ops_verified", kOptional, Slot<&R::ops_verified>(), {}},
      {"proxy_note", kOptional, Slot<&R::proxy_note>(), {}},
  };
}

// The numeric verdict against float32, the FLOP and bandwidth shares, and the repair that ran.
std::vector<JournalField> NumericFields() {
  return {
      {"first_grad_norm", kOptional, Slot<&R::first_grad_norm>(), {}},
      {"numeric_loss", kOptional, Slot<&R::numeric_loss>(), {}},
      {"numeric_grad_norm", kOptional, Slot<&R::numeric_grad_norm>(), {}},
      {"reference_loss", kOptional, Slot<&R::reference_loss>(), {}},
      {"reference_grad_norm", kOptional, Slot<&R::reference_grad_norm>(), {}},
      {"loss_delta", kOptional, Slot<&R::loss_delta>(), Range(0, kMaxSeconds, "a relative delta of 0 or more")},
      {"grad_norm_delta", kOptional, Slot<&R::grad_norm_delta>(),
       Range(0, kMaxSeconds, "a relative delta of 0 or more")},
      {"loss_tolerance", kOptional, Slot<&R::loss_tolerance>(), Range(0, 1, "a relative tolerance from 0 to 1")},
      {"grad_norm_tolerance", kOptional, Slot<&R::grad_norm_tolerance>(),
       Range(0, 1, "a relative tolerance from 0 to 1")},
      {"numeric_dtype", kOptional, Slot<&R::numeric_dtype>(), {}},
      {"tensors_compared", kOptional, Slot<&R::tensors_compared>(), Range(0, 1e7, "0 to 10000000 tensors")},
      {"tensor_worst", kOptional, Slot<&R::tensor_worst>(), {}},
      {"tensor_error", kOptional, Slot<&R::tensor_error>(), Range(0, INFINITY, "a relative error of 0 or more")},
      {"tensor_cosine", kOptional, Slot<&R::tensor_cosine>(), Range(-1, 1, "a cosine similarity from -1 to 1")},
      {"tensor_tolerance", kOptional, Slot<&R::tensor_tolerance>(), Range(0, 1, "a relative tolerance from 0 to 1")},
      {"numeric_note", kOptional, Slot<&R::numeric_note>(), {}},
      {"reference_time_s", kOptional, Slot<&R::reference_time_s>(), Seconds()},
      {"flops_per_second", kOptional, Slot<&R::flops_per_second>(), FlopsPerSecond()},
      {"peak_flops", kOptional, Slot<&R::peak_flops>(), FlopsPerSecond()},
      {"flops_dtype", kOptional, Slot<&R::flops_dtype>(), {}},
      {"bytes_per_second", kOptional, Slot<&R::bytes_per_second>(), BytesPerSecond()},
      {"peak_bandwidth", kOptional, Slot<&R::peak_bandwidth>(), BytesPerSecond()},
      {"prefill_flops_per_second", kOptional, Slot<&R::prefill_flops_per_second>(), FlopsPerSecond()},
      {"proxy_flops_per_second", kOptional, Slot<&R::proxy_flops_per_second>(), FlopsPerSecond()},
      {"extrapolated_flops_per_second", kOptional, Slot<&R::extrapolated_flops_per_second>(), FlopsPerSecond()},
      {"repair", kOptional, Slot<&R::repair>(), {}},
      {"repaired_status", kOptional, Slot<&R::repaired_status>(), Check(CheckRepaired)},
  };
}

// Where, when and on what the record was measured.
std::vector<JournalField> ProvenanceFields() {
  return {
      {"provenance.host", kRequired, Slot<&R::provenance, &Provenance::host>(), {}},
      {"provenance.job", kRequired, Slot<&R::provenance, &Provenance::job>(), {}},
      {"provenance.commit", kRequired, Slot<&R::provenance, &Provenance::commit>(), {}},
      {"provenance.torch_version", kRequired, Slot<&R::provenance, &Provenance::torch_version>(), {}},
      {"provenance.device_name", kRequired, Slot<&R::provenance, &Provenance::device_name>(), {}},
      // Added after schema version 1 was first written (issue 57): a record without it reads "", a class known only
      // where RecordedCpuClass knows the CPU.
      {"provenance.cpu_class", kOptional, Slot<&R::provenance, &Provenance::cpu_class>(), Check(CheckCpuClass)},
      {"provenance.verified_at", kRequired, Slot<&R::provenance, &Provenance::verified_at>(), Check(CheckVerifiedAt)},
  };
}

}  // namespace

const std::vector<JournalField>& JournalFields() {
  static const std::vector<JournalField> fields = [] {
    std::vector<JournalField> all;
    for (auto part : {RunFields, LoadAndProxyFields, NumericFields, ProvenanceFields}) {
      std::vector<JournalField> some = part();
      all.insert(all.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
    }
    return all;
  }();
  return fields;
}

Status ValidateCellResult(const CellResult& r, const std::string& where, int64_t now) {
  for (const JournalField& field : JournalFields()) {
    if (!field.bounds.expected.empty()) {
      TM_RETURN_IF_ERROR(
          std::visit([&](const auto& slot) { return CheckRange(field, slot.get(r), where); }, field.value));
    }
    if (field.bounds.check) TM_RETURN_IF_ERROR(field.bounds.check(r, where, now));
  }
  return Status::OK();
}

const std::vector<CellStatusInfo>& CellStatuses() {
  // status, name, symbol, description, started, rank, listed
  static const std::vector<CellStatusInfo> statuses = {
      {CellStatus::kRuns, "runs", "✅", "trained the budgeted steps with finite loss", true, 0, 0},
      {CellStatus::kFails, "fails", "❌", "crashed, ran out of memory, non-finite loss or non-zero exit", true, 3, 1},
      {CellStatus::kInvalid, "invalid", "🚫", "the recipe rejects the config on this device", false, 6, 6},
      {CellStatus::kTooLarge, "too_large", "⛔", "predicted peak memory exceeds the device's; not started", false, 5,
       5},
      {CellStatus::kTimeout, "timeout", "⏱", "killed at the wall-clock limit", true, 1, 3},
      {CellStatus::kTooSlow, "too_slow", "🐢",
       "predicted to take longer than the cell budget on this device; not started", false, 4, 4},
      {CellStatus::kWrong, "wrong", "≠",
       "trained, but its first step disagrees with the float32 reference beyond its dtype's tolerance", true, 2, 2},
  };
  return statuses;
}

const CellStatusInfo& StatusInfo(CellStatus s) {
  // Rows are in enum order (cell_test checks it).
  return CellStatuses().at(static_cast<size_t>(s));
}

const CellStatusInfo* FindCellStatus(const std::string& name) {
  for (const CellStatusInfo& info : CellStatuses()) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

const char* CellStatusName(CellStatus s) { return StatusInfo(s).name; }

std::string CellStatusNames() {
  std::string names;
  for (const CellStatusInfo& info : CellStatuses()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names;
}

bool CellStarted(CellStatus s) { return StatusInfo(s).started; }

bool IsRunsStatus(const std::string& name) { return name == CellStatusName(CellStatus::kRuns); }

std::optional<CellStatus> ParseCellStatus(const std::string& name) {
  const CellStatusInfo* info = FindCellStatus(name);
  if (info == nullptr) return std::nullopt;
  return info->status;
}

namespace {

std::optional<double> Share(const std::optional<double>& rate, const std::optional<double>& limit) {
  if (!rate || !limit || !(*limit > 0) || !std::isfinite(*rate)) return std::nullopt;
  return *rate / *limit;
}

std::string Percent(double share) {
  const double percent = 100 * share;
  return tmx::FormatNumber(percent, percent < 9.95 ? 1 : 0) + "%";
}

}  // namespace

std::optional<double> PeakShare(const CellResult& r, bool extrapolated) {
  return Share(extrapolated ? r.extrapolated_flops_per_second : r.flops_per_second, r.peak_flops);
}

std::optional<double> BandwidthShare(const CellResult& r) { return Share(r.bytes_per_second, r.peak_bandwidth); }

std::optional<double> PrefillPeakShare(const CellResult& r) { return Share(r.prefill_flops_per_second, r.peak_flops); }

std::string BandwidthShareText(double share) { return Percent(share) + " of the memory bandwidth"; }

std::optional<double> ProxyPeakShare(const CellResult& r) {
  if (r.proxy_layers.empty() || r.proxy_flops_per_second.size() != r.proxy_layers.size() || !r.peak_flops ||
      !(*r.peak_flops > 0)) {
    return std::nullopt;
  }
  size_t deepest = 0;
  for (size_t i = 1; i < r.proxy_layers.size(); ++i) {
    if (r.proxy_layers[i] > r.proxy_layers[deepest]) deepest = i;
  }
  const double rate = r.proxy_flops_per_second[deepest];
  if (!std::isfinite(rate) || !(rate > 0)) return std::nullopt;
  return rate / *r.peak_flops;
}

std::string PeakShareText(double share, const std::string& dtype) {
  return Percent(share) + " of " + (dtype.empty() ? "peak" : "the " + dtype + " peak");
}

std::string ProxyDepths(const CellResult& r) {
  std::string depths;
  const bool cut = r.proxy_vocab.size() == r.proxy_layers.size();
  for (size_t i = 0; i < r.proxy_layers.size(); ++i) {
    depths += (i == 0 ? "" : i + 1 == r.proxy_layers.size() ? " and " : ", ") +
              std::to_string(static_cast<int64_t>(r.proxy_layers[i]));
    if (cut) depths += " at " + std::to_string(static_cast<int64_t>(r.proxy_vocab[i])) + " ids";
  }
  return depths;
}

std::string ProxiedSize(const CellResult& r) {
  return std::to_string(r.real_layers) + " layers" +
         (r.real_vocab > 0 ? " and " + std::to_string(r.real_vocab) + " ids" : "");
}

nlohmann::json ToJson(const CellResult& r) {
  static const CellResult defaults{};
  json j = json::object();
  j["schema_version"] = kCellSchemaVersion;
  for (const JournalField& field : JournalFields()) {
    auto [parent, name] = SplitKey(field.key);
    std::visit(
        [&](const auto& slot) {
          if (field.kind == JournalKind::kOptional && slot.get(r) == slot.get(defaults)) return;
          Parent(j, parent)[name] = ValueToJson(slot.get(r));
        },
        field.value);
  }
  return j;
}

StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, const std::string& where, int64_t now) {
  if (!j.is_object()) {
    return Status::InvalidArgument(where + ": cell record must be a JSON object, not " + j.type_name());
  }
  FieldReader f(j, where, "");
  auto version = j.find("schema_version");
  if (version == j.end()) return f.Error("has no \"schema_version\"");
  if (!version->is_number_integer() || version->get<int64_t>() != kCellSchemaVersion) {
    // Only a plain value is shown: dumping a deeply nested one would recurse as deep as it nests.
    std::string shown = version->is_primitive() ? version->dump().substr(0, 40) : version->type_name();
    return f.Error("has schema_version " + shown + ", but this tune-matrix reads only version " +
                   std::to_string(kCellSchemaVersion) +
                   " (fix: read it with the tune-matrix that wrote it, or rerun the cell)");
  }

  CellResult r;  // a kOptional field the record leaves out keeps its value here
  for (const JournalField& field : JournalFields()) {
    auto [parent, name] = SplitKey(field.key);
    const json* obj = &j;
    if (!parent.empty()) TM_RETURN_IF_ERROR(f.Object(parent.c_str(), &obj));
    FieldReader reader(*obj, where, parent.empty() ? "" : parent + ".");
    if (field.kind == JournalKind::kOptional && !reader.Has(name.c_str())) continue;
    TM_RETURN_IF_ERROR(
        std::visit([&](const auto& slot) { return reader.Read(name.c_str(), &slot.set(r)); }, field.value));
  }
  TM_RETURN_IF_ERROR(ValidateCellResult(r, where, now));
  return r;
}

std::string ColumnOf(const CellResult& r) {
  const Provenance& p = r.provenance;
  return ColumnOfRecord(r.device_type, p.cpu_class, p.host, p.device_name, p.torch_version);
}

bool DatedAhead(const std::string& verified_at, int64_t now) {
  std::optional<int64_t> t = ParseUtc(verified_at);
  return t && *t > now + kMaxClockSkewSeconds;
}

}  // namespace tmx::matrix
