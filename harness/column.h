// A column of the matrix: the observations of a config whose numbers mean the same thing. A device type alone
// is not one: a cpu's speed differs a thousandfold by its CPU class (base/cpu_class.h), and a config may run on
// one torch and fail on the next (issue 52). So a column is a device type, for cpu the class ATen and oneDNN
// used, and the torch version; records of different columns are different observations, never one superseding,
// merged into or compared for speed with another. This is the one place that says what a column is: the
// journal's grouping, the config blocks' keys, the history, check, compare, merge, the reports and `tune` all
// ask it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tmx {

struct Column {
  std::string device_type;  // "cpu", "cuda", ...
  // cpu: the record's class (RecordedCpuClass), "" where it is unknown; every other type: "".
  std::string cpu_class;
  std::string torch_version;  // "2.11.0"; "" where unknown
  bool operator==(const Column& o) const {
    return device_type == o.device_type && cpu_class == o.cpu_class && torch_version == o.torch_version;
  }
};

// What a cpu column of unknown class says in place of the class.
inline constexpr const char* kUnknownCpuClass = "class unknown";

// The column's key, and its name wherever a device is shown: "cpu (amx, torch 2.11.0)", "cpu (class unknown,
// torch 2.11.0)" for a cpu record of unknown class, "cuda (torch 2.11.0)"; without a torch version "cpu (amx)" or
// "cpu (class unknown)", and a type other than cpu its name alone ("cuda").
std::string ColumnKey(const Column& column);
// The device the column is of, without the torch version: "cpu (amx)", "cuda". A config's torch versions are
// summed up per device column (min_torch).
std::string DeviceColumnKey(const Column& column);
// The column a key names: ColumnKey's form, nullopt for any other string (a bare "cpu", the key of a block written
// before columns, included: its entry's fields say its column). ColumnKey(*ParseColumnKey(k)) == k.
std::optional<Column> ParseColumnKey(const std::string& key);
// The device type of a column key ("" for a string that is none).
std::string ColumnDeviceType(const std::string& key);

// Orders and de-duplicates column keys for reports: device types in OrderDeviceTypes' order, then cpu classes from
// the highest (unknown last), then torch versions from the oldest. A bare device type orders as its type; other
// strings that are no key go last, by text.
std::vector<std::string> OrderColumns(std::vector<std::string> keys);

// Compares torch versions part by part as numbers ("2.9.1" < "2.11.0" < "2.15.0"), a part that is not a number
// (a suffix such as "+cpu" or "a0") as text after the numbers: negative, zero or positive.
int CompareTorchVersions(const std::string& a, const std::string& b);

// A CPU whose records were made before records carried a class, and the class they were measured at: only where
// the committed records themselves show it. A record matches by its host and CPU model as recorded.
struct LegacyCpuClass {
  const char* host;
  const char* device_name;
  const char* cpu_class;
  const char* evidence;  // why the class is known, for the reader of this table
};
const std::vector<LegacyCpuClass>& LegacyCpuClasses();

// The class a record of `device_type` stands for: its recorded `cpu_class`, else for a cpu record of a CPU in
// LegacyCpuClasses that row's class, else "" (unknown; always "" for a type other than cpu).
std::string RecordedCpuClass(const std::string& device_type, const std::string& cpu_class, const std::string& host,
                             const std::string& device_name);

// The column of a record of `device_type` as recorded (its class by RecordedCpuClass): what a journal record's, a
// config block entry's and `tune`'s reading of one all are.
std::string ColumnOfRecord(const std::string& device_type, const std::string& cpu_class, const std::string& host,
                           const std::string& device_name, const std::string& torch_version);

}  // namespace tmx
