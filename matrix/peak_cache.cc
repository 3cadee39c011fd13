#include "matrix/peak_cache.h"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"

namespace tmx::matrix {
namespace {

std::string SafeName(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return out.empty() ? "_" : out;
}

// `field` of device `id`'s entry: an object of positive finite numbers (a peak per dtype, a bandwidth per kernel).
StatusOr<std::map<std::string, double>> PositiveNumbers(const std::string& path, const std::string& id,
                                                        const std::string& field, const nlohmann::json& j) {
  const std::string fix = "; fix: delete the file (a quiet run remakes it)";
  if (!j.is_object()) return Status::InvalidArgument(path + ": " + id + ": " + field + " must be an object" + fix);
  std::map<std::string, double> out;
  for (const auto& [name, value] : j.items()) {
    if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
      return Status::InvalidArgument(path + ": " + id + ": " + field + "." + name + " is not a positive number" + fix);
    }
    out[name] = value.get<double>();
  }
  return out;
}

}  // namespace

std::string PeakCachePath(const std::string& host, const std::string& cpu_class, const std::string& torch_version) {
  const char* dir = std::getenv("TUNE_MATRIX_PEAK_CACHE");
  const char* home = std::getenv("HOME");
  const std::string folder = dir != nullptr && *dir != '\0'
                                 ? std::string(dir)
                                 : std::string(home != nullptr ? home : "") + "/.cache/tune-matrix/peaks";
  return folder + "/" + SafeName(host) + "_" + SafeName(cpu_class.empty() ? "any" : cpu_class) + "_torch" +
         SafeName(torch_version) + ".json";
}

Status SavePeaks(const std::string& path, const std::vector<DeviceInfo>& devices) {
  nlohmann::json j = nlohmann::json::object();
  for (const DeviceInfo& d : devices) {
    if (d.matmul_peak_flops.empty()) continue;
    j[d.id] = {{"matmul_peak_flops", d.matmul_peak_flops}, {"matmul_peak_threads", d.matmul_peak_threads}};
    if (!d.memory_bandwidth.empty()) j[d.id]["memory_bandwidth"] = d.memory_bandwidth;
  }
  if (j.empty()) return Status::OK();
  TM_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
  return WriteFileAtomically(path, DumpJson(j, 2) + "\n");
}

StatusOr<int> LoadPeaks(const std::string& path, std::vector<DeviceInfo>* devices) {
  if (::access(path.c_str(), F_OK) != 0) return 0;
  InputFileOptions small;  // a few hundred bytes per device
  small.max_bytes = int64_t{1} << 20;
  small.kind = "a peak cache";
  small.too_large_fix = "delete it (a quiet run remakes it)";
  StatusOr<std::string> text = ReadFile(path, small);
  if (!text.ok()) return text.status();
  StatusOr<nlohmann::json> j = ParseJsonText(path, *text);
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Status::InvalidArgument(path + ": expected an object of devices; fix: delete the file");
  int set = 0;
  for (DeviceInfo& d : *devices) {
    auto entry = j->find(d.id);
    if (entry == j->end()) continue;
    const nlohmann::json& flops = (*entry)["matmul_peak_flops"];
    const nlohmann::json& threads = (*entry)["matmul_peak_threads"];
    if (!flops.is_object() || !threads.is_number_integer() || threads.get<int64_t>() < 1) {
      return Status::InvalidArgument(path + ": " + d.id + ": matmul_peak_flops must be an object of dtypes and " +
                                     "matmul_peak_threads a count; fix: delete the file (a quiet run remakes it)");
    }
    StatusOr<std::map<std::string, double>> peaks = PositiveNumbers(path, d.id, "matmul_peak_flops", flops);
    TM_RETURN_IF_ERROR(peaks.status());
    const nlohmann::json none = nlohmann::json::object();
    const auto kept = entry->find("memory_bandwidth");
    StatusOr<std::map<std::string, double>> bandwidth =
        PositiveNumbers(path, d.id, "memory_bandwidth", kept == entry->end() ? none : *kept);
    TM_RETURN_IF_ERROR(bandwidth.status());
    // Measured now at other threads (a lane's CPUs against the whole host's): its own reading stands.
    if (d.matmul_peak_threads > 0 && d.matmul_peak_threads != threads.get<int64_t>()) continue;
    d.matmul_peak_flops = std::move(*peaks);
    if (!bandwidth->empty()) d.memory_bandwidth = std::move(*bandwidth);
    d.matmul_peak_threads = static_cast<int>(threads.get<int64_t>());
    ++set;
  }
  return set;
}

}  // namespace tmx::matrix
