#include "harness/column.h"

#include <algorithm>
#include <tuple>

#include "base/cpu_class.h"
#include "base/text.h"
#include "harness/device_types.h"

namespace tmx {
namespace {

constexpr const char* kTorchPrefix = "torch ";

bool IsDeviceTypeName(const std::string& s) {
  if (s.empty() || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

// A torch version as a key holds it: "2.11.0", "2.11.0+cpu", "2.15.0a0+git1234".
bool IsTorchVersion(const std::string& s) {
  if (s.empty() || !(s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '.' || c == '+' || c == '-' || c == '_';
  });
}

// The parts inside the parentheses: the class (cpu), then the torch version.
std::vector<std::string> Qualifiers(const Column& c) {
  std::vector<std::string> parts;
  if (c.device_type == "cpu") parts.push_back(c.cpu_class.empty() ? kUnknownCpuClass : c.cpu_class);
  if (!c.torch_version.empty()) parts.push_back(kTorchPrefix + c.torch_version);
  return parts;
}

std::string Named(const std::string& type, const std::vector<std::string>& parts) {
  return parts.empty() ? type : type + " (" + JoinStrings(parts, ", ") + ")";
}

// A run of digits at `i` as a number (advancing `i`), or nothing.
std::optional<long long> NumberAt(const std::string& s, size_t* i) {
  size_t j = *i;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9' && j - *i < 15) ++j;
  if (j == *i) return std::nullopt;
  long long v = std::stoll(s.substr(*i, j - *i));
  *i = j;
  return v;
}

}  // namespace

std::string ColumnKey(const Column& column) { return Named(column.device_type, Qualifiers(column)); }

std::string DeviceColumnKey(const Column& column) {
  Column device = column;
  device.torch_version.clear();
  return ColumnKey(device);
}

std::optional<Column> ParseColumnKey(const std::string& key) {
  Column c;
  size_t open = key.find(" (");
  c.device_type = key.substr(0, open);
  if (!IsDeviceTypeName(c.device_type)) return std::nullopt;
  if (open == std::string::npos) return ColumnKey(c) == key ? std::optional<Column>(c) : std::nullopt;
  if (key.back() != ')') return std::nullopt;
  std::vector<std::string> parts = SplitList(key.substr(open + 2, key.size() - open - 3), ',');
  for (std::string& p : parts) {
    if (!p.empty() && p[0] == ' ') p.erase(0, 1);
  }
  size_t i = 0;
  if (c.device_type == "cpu" && i < parts.size() && parts[i] != kUnknownCpuClass) {
    if (FindCpuClass(parts[i]) == nullptr) return std::nullopt;
    c.cpu_class = parts[i++];
  } else if (c.device_type == "cpu" && i < parts.size()) {
    ++i;
  }
  if (i < parts.size() && parts[i].rfind(kTorchPrefix, 0) == 0)
    c.torch_version = parts[i++].substr(std::string(kTorchPrefix).size());
  if (i != parts.size() || (!c.torch_version.empty() && !IsTorchVersion(c.torch_version))) return std::nullopt;
  if (ColumnKey(c) != key) return std::nullopt;  // one spelling per column
  return c;
}

std::string ColumnDeviceType(const std::string& key) {
  std::optional<Column> c = ParseColumnKey(key);
  return c ? c->device_type : "";
}

int CompareTorchVersions(const std::string& a, const std::string& b) {
  std::vector<std::string> pa = SplitList(a, '.'), pb = SplitList(b, '.');
  for (size_t k = 0; k < pa.size() || k < pb.size(); ++k) {
    if (k == pa.size() || k == pb.size()) return k == pa.size() ? -1 : 1;  // "2.11" before "2.11.0"
    size_t i = 0, j = 0;
    std::optional<long long> x = NumberAt(pa[k], &i), y = NumberAt(pb[k], &j);
    if (x.has_value() != y.has_value()) return x ? 1 : -1;
    if (x && *x != *y) return *x < *y ? -1 : 1;
    int rest = pa[k].compare(i, std::string::npos, pb[k], j, std::string::npos);
    if (rest != 0) return rest < 0 ? -1 : 1;
  }
  return 0;
}

std::vector<std::string> OrderColumns(std::vector<std::string> keys) {
  std::vector<std::string> types;
  for (const std::string& k : keys) types.push_back(IsDeviceTypeName(k) ? k : ColumnDeviceType(k));
  std::vector<std::string> type_order = OrderDeviceTypes(types);
  auto type_rank = [&](const std::string& type) {
    auto it = std::find(type_order.begin(), type_order.end(), type);
    return type.empty() ? 1 << 30 : static_cast<int>(it - type_order.begin());
  };
  // A bare device type (a key of before columns) orders as its type.
  auto parse = [](const std::string& k) {
    std::optional<Column> c = ParseColumnKey(k);
    if (!c && IsDeviceTypeName(k)) c = Column{k, "", ""};
    return c;
  };
  std::sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    std::optional<Column> x = parse(a), y = parse(b);
    if (!x || !y) return x.has_value() != y.has_value() ? x.has_value() : a < b;
    int tx = type_rank(x->device_type), ty = type_rank(y->device_type);
    if (tx != ty) return tx < ty;
    int cx = CpuClassRank(x->cpu_class), cy = CpuClassRank(y->cpu_class);  // unknown (-1) last
    if (cx != cy) return cx > cy;
    int t = CompareTorchVersions(x->torch_version, y->torch_version);
    return t != 0 ? t < 0 : a < b;
  });
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

const std::vector<LegacyCpuClass>& LegacyCpuClasses() {
  static const std::vector<LegacyCpuClass> rows = {
      {"vm", "Intel(R) Xeon(R) Processor", "amx",
       "the 358 committed records of this host and model (2026-12-05 to 2026-12-07, torch 2.11.0) include 284 that "
       "measured the bf16 matmul peak at their threads (1 or 2): 1.42 to 2.64 TFLOP/s, six times and more what "
       "oneDNN's best without AMX gives on such a machine (231 GFLOP/s at 2 threads capped to AVX512_CORE_BF16, issue "
       "57), and the benchmark notes of those days name it an Intel Xeon with AMX. The records of the host's AMD "
       "EPYC have no such evidence (both an AVX2-only and an AVX-512 bf16 EPYC recorded under that name) and stay "
       "of unknown class"},
  };
  return rows;
}

std::string RecordedCpuClass(const std::string& device_type, const std::string& cpu_class, const std::string& host,
                             const std::string& device_name) {
  if (device_type != "cpu") return "";
  if (!cpu_class.empty()) return cpu_class;
  for (const LegacyCpuClass& row : LegacyCpuClasses()) {
    if (host == row.host && device_name == row.device_name) return row.cpu_class;
  }
  return "";
}

std::string ColumnOfRecord(const std::string& device_type, const std::string& cpu_class, const std::string& host,
                           const std::string& device_name, const std::string& torch_version) {
  return ColumnKey({device_type, RecordedCpuClass(device_type, cpu_class, host, device_name), torch_version});
}

}  // namespace tmx
