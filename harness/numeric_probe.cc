#include "harness/numeric_probe.h"

#include <cstdlib>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/file_util.h"

namespace tmx {
namespace {

constexpr const char* kHeader = "tune-matrix numeric probe 1\n";

Status Malformed(const std::string& path, const std::string& problem) {
  return Status::InvalidArgument(path + ": not a numeric probe (" + problem +
                                 "); fix: delete it and run the cell again, which writes a new one");
}

}  // namespace

const ProbeTensor* NumericProbe::Find(const std::string& name, const std::string& kind) const {
  for (const ProbeTensor& t : tensors) {
    if (t.name == name && t.kind == kind) return &t;
  }
  return nullptr;
}

std::vector<int64_t> ProbeSampleIndices(int64_t elements) {
  const int64_t n = std::min(elements, kProbeSampleElements);
  std::vector<int64_t> indices(static_cast<size_t>(std::max<int64_t>(0, n)));
  for (int64_t i = 0; i < n; ++i) {
    indices[static_cast<size_t>(i)] = elements <= kProbeSampleElements ? i : i * elements / kProbeSampleElements;
  }
  return indices;
}

bool NumericProbeRequested() {
  const char* v = std::getenv(kNumericProbeEnv);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

Status WriteNumericProbe(const std::string& path, const NumericProbe& probe) {
  nlohmann::json names = nlohmann::json::array();
  for (const ProbeTensor& t : probe.tensors) names.push_back({t.name, t.kind, t.values.size()});
  const nlohmann::json index = {{"dtype", probe.dtype}, {"quantized", probe.quantized}, {"tensors", names}};
  std::string text = std::string(kHeader) + index.dump() + "\n";
  for (const ProbeTensor& t : probe.tensors) {
    text.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  }
  return WriteFileAtomically(path, text);
}

StatusOr<NumericProbe> ReadNumericProbe(const std::string& path) {
  if (!PathExists(path)) return Status::NotFound(path + ": no numeric probe");
  StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  const size_t header = std::strlen(kHeader);
  if (text->compare(0, header, kHeader) != 0) return Malformed(path, "no header line");
  const size_t end = text->find('\n', header);
  if (end == std::string::npos) return Malformed(path, "no index line");
  const nlohmann::json index = nlohmann::json::parse(text->substr(header, end - header), nullptr, false);
  if (!index.is_object() || !index.contains("tensors") || !index["tensors"].is_array()) {
    return Malformed(path, "an unreadable index line");
  }
  NumericProbe probe;
  probe.dtype = index.value("dtype", "");
  probe.quantized = index.value("quantized", false);
  size_t offset = end + 1;
  for (const nlohmann::json& entry : index["tensors"]) {
    if (!entry.is_array() || entry.size() != 3 || !entry[0].is_string() || !entry[1].is_string() ||
        !entry[2].is_number_unsigned()) {
      return Malformed(path, "an index entry that is not [name, kind, count]");
    }
    ProbeTensor t{entry[0].get<std::string>(), entry[1].get<std::string>(), {}};
    const size_t count = entry[2].get<size_t>();
    if (offset + count * sizeof(float) > text->size()) return Malformed(path, "cut short at " + t.name);
    t.values.resize(count);
    std::memcpy(t.values.data(), text->data() + offset, count * sizeof(float));
    offset += count * sizeof(float);
    probe.tensors.push_back(std::move(t));
  }
  if (offset != text->size()) return Malformed(path, "bytes after the last tensor");
  return probe;
}

}  // namespace tmx
