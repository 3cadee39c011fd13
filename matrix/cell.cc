#include "matrix/cell.h"

#include <cmath>
#include <limits>
#include <utility>

namespace tmx::matrix {
namespace {

using nlohmann::json;

constexpr std::pair<CellStatus, const char*> kStatusNames[] = {
    {CellStatus::kRuns, "runs"},         {CellStatus::kFails, "fails"},
    {CellStatus::kInvalid, "invalid"},   {CellStatus::kTooLarge, "too_large"},
    {CellStatus::kTimeout, "timeout"},
};

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

}  // namespace

const char* CellStatusName(CellStatus s) {
  for (const auto& [status, name] : kStatusNames) {
    if (status == s) return name;
  }
  return "unknown";
}

bool CellStarted(CellStatus s) {
  return s == CellStatus::kRuns || s == CellStatus::kFails || s == CellStatus::kTimeout;
}

std::optional<CellStatus> ParseCellStatus(const std::string& name) {
  for (const auto& [status, n] : kStatusNames) {
    if (name == n) return status;
  }
  return std::nullopt;
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
  const Provenance& p = r.provenance;
  j["provenance"] = {{"host", p.host},
                     {"job", p.job},
                     {"commit", p.commit},
                     {"torch_version", p.torch_version},
                     {"device_name", p.device_name},
                     {"verified_at", p.verified_at}};
  return j;
}

StatusOr<CellResult> CellResultFromJson(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) {
    return Status::InvalidArgument(where + ": cell record must be a JSON object, not " + j.type_name());
  }
  FieldReader f(j, where, "");
  auto version = j.find("schema_version");
  if (version == j.end()) return f.Error("has no \"schema_version\"");
  if (!version->is_number_integer() || version->get<int64_t>() != kCellSchemaVersion) {
    return f.Error("has schema_version " + version->dump() + ", but this tune-matrix reads only version " +
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
                   "\", expected one of runs, fails, invalid, too_large, timeout");
  }
  r.status = *parsed;
  TM_RETURN_IF_ERROR(f.String("reason", &r.reason));
  TM_RETURN_IF_ERROR(f.StringList("problems", &r.problems));
  TM_RETURN_IF_ERROR(f.String("config_hash", &r.config_hash));
  TM_RETURN_IF_ERROR(f.Int64("predicted_memory_bytes", &r.predicted_memory_bytes));
  TM_RETURN_IF_ERROR(f.Int64("device_memory_bytes", &r.device_memory_bytes));
  TM_RETURN_IF_ERROR(f.OptionalInt64("peak_memory_bytes", &r.peak_memory_bytes));
  TM_RETURN_IF_ERROR(f.OptionalDouble("init_time_s", &r.init_time_s));
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

  const json* prov;
  TM_RETURN_IF_ERROR(f.Object("provenance", &prov));
  FieldReader p(*prov, where, "provenance.");
  TM_RETURN_IF_ERROR(p.String("host", &r.provenance.host));
  TM_RETURN_IF_ERROR(p.String("job", &r.provenance.job));
  TM_RETURN_IF_ERROR(p.String("commit", &r.provenance.commit));
  TM_RETURN_IF_ERROR(p.String("torch_version", &r.provenance.torch_version));
  TM_RETURN_IF_ERROR(p.String("device_name", &r.provenance.device_name));
  TM_RETURN_IF_ERROR(p.String("verified_at", &r.provenance.verified_at));
  return r;
}

}  // namespace tmx::matrix
