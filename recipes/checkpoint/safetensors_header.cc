#include "recipes/checkpoint/safetensors_header.h"

#include <algorithm>
#include <climits>

#include <nlohmann/json.hpp>

#include "base/json_io.h"

namespace tmx::checkpoint {
namespace {

using nlohmann::json;

const SafetensorsDtype* FindDtype(const std::string& name) {
  for (const SafetensorsDtype& d : SafetensorsDtypes()) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string Quote(const std::string& name) { return "\"" + name + "\""; }

// Reads a non-negative integer JSON value; false if it is anything else.
bool ToUnsigned(const json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

StatusOr<SafetensorsEntry> ParseEntry(const std::string& name, const json& value, uint64_t data_size,
                                      const std::string& path) {
  std::string where = path + ": tensor " + Quote(name) + ": ";
  if (!value.is_object()) {
    return Status::InvalidArgument(where +
                                   "header entry is not an object with \"dtype\", \"shape\" and "
                                   "\"data_offsets\"; the file is not a valid safetensors file");
  }
  SafetensorsEntry e;
  e.name = name;
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return Status::InvalidArgument(where + "\"dtype\" is missing or not a string");
  }
  e.dtype = dtype->get<std::string>();
  const SafetensorsDtype* known = FindDtype(e.dtype);
  if (known == nullptr) {
    return Status::InvalidArgument(where + "unknown dtype " + Quote(e.dtype) + " (known: " + KnownSafetensorsDtypes() +
                                   ")");
  }
  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    return Status::InvalidArgument(where + "\"shape\" is missing or not an array");
  }
  uint64_t numel = 1;
  bool overflow = false;
  for (const json& dim : *shape) {
    uint64_t d = 0;
    if (!ToUnsigned(dim, &d) || d > static_cast<uint64_t>(INT64_MAX)) {
      return Status::InvalidArgument(where + "\"shape\" " + JsonForMessage(*shape) +
                                     " holds a value that is not a "
                                     "non-negative integer");
    }
    e.shape.push_back(static_cast<int64_t>(d));
    overflow |= __builtin_mul_overflow(numel, d, &numel);
  }
  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 || !ToUnsigned((*offsets)[0], &e.begin) ||
      !ToUnsigned((*offsets)[1], &e.end) || e.begin > e.end) {
    return Status::InvalidArgument(where + "\"data_offsets\" must be [begin, end] with 0 <= begin <= end, got " +
                                   (offsets == value.end() ? std::string("nothing") : JsonForMessage(*offsets)));
  }
  uint64_t itemsize = known->bytes;
  uint64_t nbytes = 0;
  overflow |= __builtin_mul_overflow(numel, itemsize, &nbytes);
  std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (overflow || nbytes != e.end - e.begin) {
    return Status::InvalidArgument(where + "shape " + ShapeText(e.shape) + " of " + dtype->get<std::string>() +
                                   " needs " + (overflow ? std::string("more than 2^64") : std::to_string(nbytes)) +
                                   " bytes, but data_offsets " + range + " hold " + std::to_string(e.end - e.begin));
  }
  if (e.end > data_size) {
    return Status::InvalidArgument(where + "data_offsets " + range + " run past the end of the data (" +
                                   std::to_string(data_size) + " bytes); the file is truncated or corrupt");
  }
  return e;
}

}  // namespace

const std::vector<SafetensorsDtype>& SafetensorsDtypes() {
  static const std::vector<SafetensorsDtype> dtypes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},   {"I16", 2}, {"U16", 2}, {"I32", 4},     {"U32", 4},     {"I64", 8},
      {"U64", 8},  {"F16", 2}, {"BF16", 2}, {"F32", 4}, {"F64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"C64", 8},
  };
  return dtypes;
}

std::string KnownSafetensorsDtypes() {
  std::string out;
  for (const SafetensorsDtype& d : SafetensorsDtypes()) out += std::string(out.empty() ? "" : " ") + d.name;
  return out;
}

StatusOr<uint64_t> CheckSafetensorsHeaderLength(uint64_t file_size, uint64_t length_field, const std::string& path) {
  if (file_size < 8) {
    return Status::InvalidArgument(path + ": only " + std::to_string(file_size) +
                                   " bytes, too short for a safetensors file (it starts with an 8-byte header "
                                   "length); the file is truncated or not a safetensors file");
  }
  if (length_field > kMaxSafetensorsHeaderBytes || length_field > file_size - 8) {
    return Status::InvalidArgument(path + ": header length " + std::to_string(length_field) + " is larger than " +
                                   (length_field > file_size - 8
                                        ? "the " + std::to_string(file_size - 8) + " bytes that follow it"
                                        : "the limit of " + std::to_string(kMaxSafetensorsHeaderBytes) + " bytes") +
                                   "; the file is truncated or not a safetensors file");
  }
  return length_field;
}

StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const std::string& text, uint64_t data_size,
                                                   const std::string& path) {
  SafetensorsHeader parsed;
  std::map<std::string, std::string>* metadata = &parsed.metadata;
  StatusOr<json> parsed_json = ParseJsonText(path + ": the safetensors header", text);
  if (!parsed_json.ok()) return parsed_json.status();
  const json& header = *parsed_json;
  if (!header.is_object()) {
    return Status::InvalidArgument(path + ": the safetensors header is a JSON " + header.type_name() +
                                   ", expected an object; the file is corrupt or not a safetensors file");
  }
  std::vector<SafetensorsEntry>& entries = parsed.entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) {
        return Status::InvalidArgument(path + ": \"__metadata__\" is a JSON " + std::string(it->type_name()) +
                                       ", expected an object of strings");
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Status::InvalidArgument(path + ": \"__metadata__\" value " + Quote(m.key()) + " is a JSON " +
                                         m->type_name() + ", expected a string");
        }
        (*metadata)[m.key()] = m->get<std::string>();
      }
      continue;
    }
    StatusOr<SafetensorsEntry> entry = ParseEntry(it.key(), *it, data_size, path);
    if (!entry.ok()) return entry.status();
    entries.push_back(std::move(entry).value());
  }
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin < expected) {
      return Status::InvalidArgument(path + ": tensor " + Quote(e.name) + ": data_offsets [" + std::to_string(e.begin) +
                                     ", " + std::to_string(e.end) + "] overlap those of tensor " +
                                     Quote(previous->name) + " (which end at " + std::to_string(expected) +
                                     "); the file is corrupt");
    }
    if (e.begin > expected) {
      return Status::InvalidArgument(path + ": tensor " + Quote(e.name) + ": data_offsets begin at " +
                                     std::to_string(e.begin) + ", leaving a gap after byte " +
                                     std::to_string(expected) + "; the file is corrupt");
    }
    expected = e.end;
    previous = &e;
  }
  if (expected != data_size) {
    return Status::InvalidArgument(path + ": " + std::to_string(data_size - expected) +
                                   " bytes of data follow the last tensor; the file is corrupt");
  }
  return parsed;
}

}  // namespace tmx::checkpoint
