#include "matrix/cell.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "harness/device.h"

namespace tmx::matrix {
namespace {

using nlohmann::json;


// JSON has no NaN or infinity, and a non-finite loss is exactly what a failing cell may report, so those
// values travel as the strings "nan", "inf" and "-inf".
json DoubleToJson(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}

std::optional<double> DoubleFromJson(const json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

// Reads the fields of one JSON object; every error names `where`, the field and what was expected.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string where, std::string prefix)
      : obj_(obj), where_(std::move(where)), prefix_(std::move(prefix)) {}

  Status String(const char* name, std::string* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_string()) return TypeError(name, "a string", *v);
    *out = v->get<std::string>();
    return Status::OK();
  }

  // A string a record may leave out (fields added after schema version 1 was written): absent reads as "".
  Status OptionalString(const char* name, std::string* out) const {
    if (!obj_.contains(name)) {
      out->clear();
      return Status::OK();
    }
    return String(name, out);
  }

  Status StringList(const char* name, std::vector<std::string>* out) const {
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

  Status Int64(const char* name, int64_t* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    return ToInt64(name, *v, out);
  }

  Status OptionalInt64(const char* name, std::optional<int64_t>* out) const {
    *out = std::nullopt;
    if (!obj_.contains(name)) return Status::OK();
    int64_t value;
    TM_RETURN_IF_ERROR(ToInt64(name, obj_.at(name), &value));
    *out = value;
    return Status::OK();
  }

  Status Int(const char* name, int* out) const {
    int64_t value;
    TM_RETURN_IF_ERROR(Int64(name, &value));
    return Narrow(name, value, out);
  }

  Status OptionalInt(const char* name, std::optional<int>* out) const {
    std::optional<int64_t> value;
    TM_RETURN_IF_ERROR(OptionalInt64(name, &value));
    *out = std::nullopt;
    if (!value) return Status::OK();
    int narrowed;
    TM_RETURN_IF_ERROR(Narrow(name, *value, &narrowed));
    *out = narrowed;
    return Status::OK();
  }

  Status Double(const char* name, double* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    std::optional<double> d = DoubleFromJson(*v);
    if (!d) return TypeError(name, kNumberExpected, *v);
    *out = *d;
    return Status::OK();
  }

  Status OptionalDouble(const char* name, std::optional<double>* out) const {
    *out = std::nullopt;
    if (!obj_.contains(name)) return Status::OK();
    double value;
    TM_RETURN_IF_ERROR(Double(name, &value));
    *out = value;
    return Status::OK();
  }

  Status DoubleList(const char* name, std::vector<double>* out) const {
    const json* v;
    TM_RETURN_IF_ERROR(Find(name, &v));
    if (!v->is_array()) return TypeError(name, "an array of numbers", *v);
    out->clear();
    for (const json& e : *v) {
      std::optional<double> d = DoubleFromJson(e);
      if (!d) return TypeError(name, "an array of numbers", e);
      out->push_back(*d);
    }
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

// Range checks of one record; each failure names the field, its value and what was expected.
class RangeChecker {
 public:
  explicit RangeChecker(const std::string& where) : where_(where) {}

  Status Fail(const std::string& problem, const char* fix = kFix) const {
    return Status::InvalidArgument(where_ + ": cell record " + problem + "; fix: " + fix);
  }
  Status NotEmpty(const char* name, const std::string& v) const {
    return v.empty() ? Fail(Field(name) + " is empty") : Status::OK();
  }
  Status Bytes(const char* name, std::optional<int64_t> v) const {
    if (!v || (*v >= 0 && *v <= kMaxMemoryBytes)) return Status::OK();
    return Fail(Field(name) + " is " + std::to_string(*v) + ", expected bytes from 0 to " +
                std::to_string(kMaxMemoryBytes));
  }
  Status Seconds(const char* name, std::optional<double> v) const {
    if (!v || (*v >= 0 && *v <= kMaxSeconds)) return Status::OK();  // false for nan
    return Fail(Field(name) + " is " + FormatNumber(*v) + ", expected seconds from 0 to " + FormatNumber(kMaxSeconds));
  }
  Status Int(const char* name, std::optional<int64_t> v, int64_t lo, int64_t hi, const std::string& what) const {
    if (!v || (*v >= lo && *v <= hi)) return Status::OK();
    return Fail(Field(name) + " is " + std::to_string(*v) + ", expected " + what);
  }

 private:
  static std::string Field(const char* name) { return std::string("field \"") + name + "\""; }
  const std::string& where_;
};

Status CheckDevice(const CellResult& r, const RangeChecker& check) {
  StatusOr<DeviceSelector> device =
      r.key.device.size() <= kMaxDeviceLength ? ParseDeviceSelector(r.key.device) : Status::InvalidArgument("too long");
  if (!device.ok() || device->is_auto) {
    return check.Fail("field \"device\" is \"" + r.key.device.substr(0, kMaxDeviceLength) +
                      "\", not a device such as cpu or cuda:0");
  }
  if (r.device_type != device->type) {
    return check.Fail("device type \"" + r.device_type + "\" does not match device \"" + r.key.device + "\"");
  }
  return Status::OK();
}

Status CheckVerifiedAt(const std::string& verified_at, int64_t now, const RangeChecker& check) {
  std::optional<int64_t> t = ParseUtc(verified_at);
  if (!t) {
    return check.Fail("provenance.verified_at \"" + verified_at.substr(0, 40) +
                      "\" is not a UTC time of the form 2026-12-02T11:30:00Z, so the record cannot be ordered "
                      "against other journals");
  }
  if (*t > now + kMaxClockSkewSeconds) {
    return check.Fail("provenance.verified_at \"" + verified_at + "\" is later than this machine's clock (" +
                          FormatUtc(now) + ") by more than " + std::to_string(kMaxClockSkewSeconds) +
                          " s; a record dated ahead would outrank every later record of its cell",
                      "correct the clock of the machine that wrote it and rerun the cell, or delete that line");
  }
  return Status::OK();
}

}  // namespace

Status ValidateCellResult(const CellResult& r, const std::string& where, int64_t now) {
  RangeChecker check(where);
  TM_RETURN_IF_ERROR(check.NotEmpty("config", r.key.config));
  TM_RETURN_IF_ERROR(CheckDevice(r, check));
  TM_RETURN_IF_ERROR(check.Bytes("predicted_memory_bytes", r.predicted_memory_bytes));
  TM_RETURN_IF_ERROR(check.Bytes("device_memory_bytes", r.device_memory_bytes));
  TM_RETURN_IF_ERROR(check.Bytes("peak_memory_bytes", r.peak_memory_bytes));
  TM_RETURN_IF_ERROR(check.Seconds("init_time_s", r.init_time_s));
  TM_RETURN_IF_ERROR(check.Seconds("startup_time_s", r.startup_time_s));
  TM_RETURN_IF_ERROR(check.Seconds("wall_time_s", r.wall_time_s));
  for (double t : r.step_times_s) TM_RETURN_IF_ERROR(check.Seconds("step_times_s", t));
  TM_RETURN_IF_ERROR(check.Seconds("step_time_median_s", r.step_time_median_s));
  TM_RETURN_IF_ERROR(check.Seconds("step_time_spread_s", r.step_time_spread_s));
  int64_t steps = static_cast<int64_t>(r.step_times_s.size());
  TM_RETURN_IF_ERROR(
      check.Int("warmup_steps", r.warmup_steps, 0, steps, "0 to the " + std::to_string(steps) + " steps recorded"));
  TM_RETURN_IF_ERROR(check.Int("exit_code", r.exit_code, 0, 255, "0 to 255"));
  TM_RETURN_IF_ERROR(check.Int("term_signal", r.term_signal, 1, 127, "1 to 127"));
  TM_RETURN_IF_ERROR(check.Int("world_size", std::optional<int>(r.world_size), 1, 65536, "1 to 65536 ranks"));
  if (r.tokens_per_second && !(*r.tokens_per_second >= 0)) {
    return check.Fail("field \"tokens_per_second\" is " + FormatNumber(*r.tokens_per_second) +
                      ", expected tokens per second from 0 (inf for a step too short to time)");
  }
  return CheckVerifiedAt(r.provenance.verified_at, now, check);
}

const std::vector<CellStatusInfo>& CellStatuses() {
  // status, name, symbol, description, started, rank, listed
  static const std::vector<CellStatusInfo> statuses = {
      {CellStatus::kRuns, "runs", "✅", "trained the budgeted steps with finite loss", true, 0, 0},
      {CellStatus::kFails, "fails", "❌", "crashed, ran out of memory, non-finite loss or non-zero exit", true, 2, 1},
      {CellStatus::kInvalid, "invalid", "🚫", "the recipe rejects the config on this device", false, 5, 5},
      {CellStatus::kTooLarge, "too_large", "⛔", "predicted peak memory exceeds the device's; not started", false, 4,
       4},
      {CellStatus::kTimeout, "timeout", "⏱", "killed at the wall-clock limit", true, 1, 2},
      {CellStatus::kTooSlow, "too_slow", "🐢",
       "predicted to take longer than the cell budget on this device; not started", false, 3, 3},
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

nlohmann::json ToJson(const CellResult& r) {
  json j = json::object();
  j["schema_version"] = kCellSchemaVersion;
  j["config"] = r.key.config;
  j["device"] = r.key.device;
  j["recipe"] = r.recipe;
  j["device_type"] = r.device_type;
  j["status"] = CellStatusName(r.status);
  j["reason"] = r.reason;
  j["problems"] = r.problems;
  j["config_hash"] = r.config_hash;
  j["predicted_memory_bytes"] = r.predicted_memory_bytes;
  j["device_memory_bytes"] = r.device_memory_bytes;
  if (r.peak_memory_bytes) j["peak_memory_bytes"] = *r.peak_memory_bytes;
  if (r.init_time_s) j["init_time_s"] = DoubleToJson(*r.init_time_s);
  if (r.startup_time_s) j["startup_time_s"] = DoubleToJson(*r.startup_time_s);
  json steps = json::array();
  for (double t : r.step_times_s) steps.push_back(DoubleToJson(t));
  j["step_times_s"] = std::move(steps);
  j["warmup_steps"] = r.warmup_steps;
  if (r.step_time_median_s) j["step_time_median_s"] = DoubleToJson(*r.step_time_median_s);
  if (r.step_time_spread_s) j["step_time_spread_s"] = DoubleToJson(*r.step_time_spread_s);
  if (r.tokens_per_second) j["tokens_per_second"] = DoubleToJson(*r.tokens_per_second);
  if (r.first_loss) j["first_loss"] = DoubleToJson(*r.first_loss);
  if (r.last_loss) j["last_loss"] = DoubleToJson(*r.last_loss);
  j["wall_time_s"] = DoubleToJson(r.wall_time_s);
  if (r.exit_code) j["exit_code"] = *r.exit_code;
  if (r.term_signal) j["term_signal"] = *r.term_signal;
  j["output_tail"] = r.output_tail;
  if (!r.stand_in.empty()) j["stand_in"] = r.stand_in;
  if (r.world_size != 1) j["world_size"] = r.world_size;
  const Provenance& p = r.provenance;
  j["provenance"] = {{"host", p.host},
                     {"job", p.job},
                     {"commit", p.commit},
                     {"torch_version", p.torch_version},
                     {"device_name", p.device_name},
                     {"verified_at", p.verified_at}};
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

  CellResult r;
  std::string status;
  TM_RETURN_IF_ERROR(f.String("config", &r.key.config));
  TM_RETURN_IF_ERROR(f.String("device", &r.key.device));
  TM_RETURN_IF_ERROR(f.String("recipe", &r.recipe));
  TM_RETURN_IF_ERROR(f.String("device_type", &r.device_type));
  TM_RETURN_IF_ERROR(f.String("status", &status));
  std::optional<CellStatus> parsed = ParseCellStatus(status);
  if (!parsed) {
    return f.Error("field \"status\" is \"" + status +
                   "\", expected one of " + CellStatusNames());
  }
  r.status = *parsed;
  TM_RETURN_IF_ERROR(f.String("reason", &r.reason));
  TM_RETURN_IF_ERROR(f.StringList("problems", &r.problems));
  TM_RETURN_IF_ERROR(f.String("config_hash", &r.config_hash));
  TM_RETURN_IF_ERROR(f.Int64("predicted_memory_bytes", &r.predicted_memory_bytes));
  TM_RETURN_IF_ERROR(f.Int64("device_memory_bytes", &r.device_memory_bytes));
  TM_RETURN_IF_ERROR(f.OptionalInt64("peak_memory_bytes", &r.peak_memory_bytes));
  TM_RETURN_IF_ERROR(f.OptionalDouble("init_time_s", &r.init_time_s));
  TM_RETURN_IF_ERROR(f.OptionalDouble("startup_time_s", &r.startup_time_s));
  TM_RETURN_IF_ERROR(f.DoubleList("step_times_s", &r.step_times_s));
  TM_RETURN_IF_ERROR(f.Int("warmup_steps", &r.warmup_steps));
  TM_RETURN_IF_ERROR(f.OptionalDouble("step_time_median_s", &r.step_time_median_s));
  TM_RETURN_IF_ERROR(f.OptionalDouble("step_time_spread_s", &r.step_time_spread_s));
  TM_RETURN_IF_ERROR(f.OptionalDouble("tokens_per_second", &r.tokens_per_second));
  TM_RETURN_IF_ERROR(f.OptionalDouble("first_loss", &r.first_loss));
  TM_RETURN_IF_ERROR(f.OptionalDouble("last_loss", &r.last_loss));
  TM_RETURN_IF_ERROR(f.Double("wall_time_s", &r.wall_time_s));
  TM_RETURN_IF_ERROR(f.OptionalInt("exit_code", &r.exit_code));
  TM_RETURN_IF_ERROR(f.OptionalInt("term_signal", &r.term_signal));
  TM_RETURN_IF_ERROR(f.String("output_tail", &r.output_tail));
  TM_RETURN_IF_ERROR(f.OptionalString("stand_in", &r.stand_in));
  std::optional<int> world_size;
  TM_RETURN_IF_ERROR(f.OptionalInt("world_size", &world_size));
  r.world_size = world_size.value_or(1);

  const json* prov;
  TM_RETURN_IF_ERROR(f.Object("provenance", &prov));
  FieldReader p(*prov, where, "provenance.");
  TM_RETURN_IF_ERROR(p.String("host", &r.provenance.host));
  TM_RETURN_IF_ERROR(p.String("job", &r.provenance.job));
  TM_RETURN_IF_ERROR(p.String("commit", &r.provenance.commit));
  TM_RETURN_IF_ERROR(p.String("torch_version", &r.provenance.torch_version));
  TM_RETURN_IF_ERROR(p.String("device_name", &r.provenance.device_name));
  TM_RETURN_IF_ERROR(p.String("verified_at", &r.provenance.verified_at));
  TM_RETURN_IF_ERROR(ValidateCellResult(r, where, now));
  return r;
}

}  // namespace tmx::matrix
