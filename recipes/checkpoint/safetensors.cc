#include "recipes/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "base/file_util.h"
#include "base/json_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader and writer copy bytes as they are");

namespace tmx::checkpoint {
namespace {

using nlohmann::json;

// The reference implementation refuses headers over 100 MB; so do we, before allocating for one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  c10::ScalarType type;
};

const std::vector<DtypeInfo>& Dtypes() {
  static const std::vector<DtypeInfo> dtypes = {
      {"BOOL", c10::kBool},       {"U8", c10::kByte},
      {"I8", c10::kChar},         {"I16", c10::kShort},
      {"U16", c10::kUInt16},      {"I32", c10::kInt},
      {"U32", c10::kUInt32},      {"I64", c10::kLong},
      {"U64", c10::kUInt64},      {"F16", c10::kHalf},
      {"BF16", c10::kBFloat16},   {"F32", c10::kFloat},
      {"F64", c10::kDouble},      {"F8_E4M3", c10::kFloat8_e4m3fn},
      {"F8_E5M2", c10::kFloat8_e5m2}, {"C64", c10::kComplexFloat},
  };
  return dtypes;
}

const char* DtypeName(c10::ScalarType type) {
  for (const DtypeInfo& d : Dtypes()) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

bool DtypeFromName(const std::string& name, c10::ScalarType* type) {
  for (const DtypeInfo& d : Dtypes()) {
    if (name == d.name) {
      *type = d.type;
      return true;
    }
  }
  return false;
}

std::string KnownDtypes() {
  std::string out;
  for (const DtypeInfo& d : Dtypes()) out += std::string(out.empty() ? "" : " ") + d.name;
  return out;
}

std::string ShapeText(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string Quote(const std::string& name) { return "\"" + name + "\""; }

// ---- Reading -------------------------------------------------------------------------------------------

// Closes the descriptor on every return path.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`.
Status ReadAt(int fd, uint64_t offset, void* out, uint64_t size, const std::string& path) {
  char* dst = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = ::pread(fd, dst, std::min<uint64_t>(size, 1u << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(path + ": cannot read (" + std::strerror(errno) + ")");
    if (n == 0) return Status::IoError(path + ": the file shrank while it was being read");
    dst += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return Status::OK();
}

struct Entry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

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

StatusOr<Entry> ParseEntry(const std::string& name, const json& value, uint64_t data_size, const std::string& path) {
  std::string where = path + ": tensor " + Quote(name) + ": ";
  if (!value.is_object()) {
    return Status::InvalidArgument(where + "header entry is not an object with \"dtype\", \"shape\" and "
                                   "\"data_offsets\"; the file is not a valid safetensors file");
  }
  Entry e;
  e.name = name;
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    return Status::InvalidArgument(where + "\"dtype\" is missing or not a string");
  }
  if (!DtypeFromName(dtype->get<std::string>(), &e.dtype)) {
    return Status::InvalidArgument(where + "unknown dtype " + Quote(dtype->get<std::string>()) + " (known: " +
                                   KnownDtypes() + ")");
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
      return Status::InvalidArgument(where + "\"shape\" " + JsonForMessage(*shape) + " holds a value that is not a "
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
  uint64_t itemsize = c10::elementSize(e.dtype);
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

// Parses and checks the header; returns the entries sorted by data offset.
StatusOr<std::vector<Entry>> ParseHeader(const std::string& text, uint64_t data_size, const std::string& path,
                                         std::map<std::string, std::string>* metadata) {
  StatusOr<json> parsed = ParseJsonText(path + ": the safetensors header", text);
  if (!parsed.ok()) return parsed.status();
  const json& header = *parsed;
  if (!header.is_object()) {
    return Status::InvalidArgument(path + ": the safetensors header is a JSON " + header.type_name() +
                                   ", expected an object; the file is corrupt or not a safetensors file");
  }
  std::vector<Entry> entries;
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
    StatusOr<Entry> entry = ParseEntry(it.key(), *it, data_size, path);
    if (!entry.ok()) return entry.status();
    entries.push_back(std::move(entry).value());
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < expected) {
      return Status::InvalidArgument(path + ": tensor " + Quote(e.name) + ": data_offsets [" +
                                     std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                     "] overlap those of tensor " + Quote(previous->name) + " (which end at " +
                                     std::to_string(expected) + "); the file is corrupt");
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
  return entries;
}

// ---- Writing -------------------------------------------------------------------------------------------

void AppendLittleEndian64(std::string* out, uint64_t value) {
  char bytes[8];
  std::memcpy(bytes, &value, 8);
  out->append(bytes, 8);
}

}  // namespace

Status SaveSafetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string where = path + ": ";
  std::set<std::string> names;
  std::vector<at::Tensor> cpu;
  cpu.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") {
      return Status::InvalidArgument(where + "tensor name " + Quote(name) +
                                     " is not allowed; fix: give every tensor a non-empty name other than "
                                     "\"__metadata__\"");
    }
    if (!names.insert(name).second) {
      return Status::InvalidArgument(where + "tensor " + Quote(name) + " is given twice; fix: name each tensor once");
    }
    if (!tensor.defined()) {
      return Status::InvalidArgument(where + "tensor " + Quote(name) + " is undefined; fix: leave it out");
    }
    if (tensor.layout() != c10::kStrided) {
      return Status::InvalidArgument(where + "tensor " + Quote(name) +
                                     " is not dense; fix: convert it with to_dense() before saving");
    }
    if (DtypeName(tensor.scalar_type()) == nullptr) {
      return Status::InvalidArgument(where + "tensor " + Quote(name) + " has dtype " +
                                     std::string(c10::toString(tensor.scalar_type())) +
                                     ", which safetensors cannot store; fix: convert it to one of " + KnownDtypes());
    }
    try {
      cpu.push_back(tensor.detach().to(at::kCPU).contiguous());
    } catch (const std::exception& e) {
      return Status::Internal(where + "tensor " + Quote(name) + ": cannot copy it to the CPU (" + e.what() + ")");
    }
  }

  // Larger elements first (stable, so the caller's order is kept otherwise): with the header padded to a
  // multiple of 8, every tensor's data is then aligned to its element size.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cpu[a].element_size() > cpu[b].element_size(); });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    uint64_t nbytes = cpu[i].nbytes();
    header[tensors[i].first] = {{"dtype", DtypeName(cpu[i].scalar_type())},
                                {"shape", cpu[i].sizes().vec()},
                                {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string header_text = DumpJson(header);
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string file;
  file.reserve(8 + header_text.size() + offset);
  AppendLittleEndian64(&file, header_text.size());
  file += header_text;
  for (size_t i : order) {
    if (cpu[i].nbytes() > 0) file.append(static_cast<const char*>(cpu[i].data_ptr()), cpu[i].nbytes());
  }
  return WriteFileAtomically(path, file);
}

StatusOr<LoadedSafetensors> LoadSafetensors(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": cannot be opened (" + std::strerror(errno) + ")");
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::IoError(path + ": cannot stat (" + std::strerror(errno) + ")");
  uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    return Status::InvalidArgument(path + ": only " + std::to_string(file_size) +
                                   " bytes, too short for a safetensors file (it starts with an 8-byte header "
                                   "length); the file is truncated or not a safetensors file");
  }
  uint64_t header_size = 0;
  TM_RETURN_IF_ERROR(ReadAt(fd.get(), 0, &header_size, 8, path));
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    return Status::InvalidArgument(path + ": header length " + std::to_string(header_size) + " is larger than " +
                                   (header_size > file_size - 8
                                        ? "the " + std::to_string(file_size - 8) + " bytes that follow it"
                                        : "the limit of " + std::to_string(kMaxHeaderBytes) + " bytes") +
                                   "; the file is truncated or not a safetensors file");
  }
  std::string header_text(header_size, '\0');
  TM_RETURN_IF_ERROR(ReadAt(fd.get(), 8, header_text.data(), header_size, path));

  LoadedSafetensors loaded;
  uint64_t data_start = 8 + header_size;
  StatusOr<std::vector<Entry>> entries = ParseHeader(header_text, file_size - data_start, path, &loaded.metadata);
  if (!entries.ok()) return entries.status();

  for (const Entry& e : *entries) {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.dtype));
    TM_RETURN_IF_ERROR(ReadAt(fd.get(), data_start + e.begin, t.data_ptr(), e.end - e.begin, path));
    if (e.dtype == c10::kBool) {
      const uint8_t* bytes = static_cast<const uint8_t*>(t.data_ptr());
      if (std::any_of(bytes, bytes + (e.end - e.begin), [](uint8_t b) { return b > 1; })) {
        return Status::InvalidArgument(path + ": tensor " + Quote(e.name) +
                                       ": BOOL data holds bytes other than 0 and 1; the file is corrupt");
      }
    }
    loaded.tensors.emplace_back(e.name, std::move(t));
  }
  return loaded;
}

NamedTensors ModuleTensors(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    if (item.value().defined()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

Status LoadIntoModule(torch::nn::Module& module, const NamedTensors& tensors, bool strict) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : tensors) {
    if (!by_name.emplace(name, &tensor).second) {
      return Status::InvalidArgument(name + ": the checkpoint holds this tensor twice; fix: name each tensor once");
    }
    if (!tensor.defined()) return Status::InvalidArgument(name + ": the checkpoint tensor is undefined");
  }

  NamedTensors targets = ModuleTensors(module);
  std::set<std::string> model_names;
  struct Copy {
    const std::string* name;
    at::Tensor dst;
    const at::Tensor* src;
  };
  std::vector<Copy> copies;
  for (const auto& [name, dst] : targets) {
    model_names.insert(name);
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (!strict) continue;
      return Status::InvalidArgument(name + ": in the model but not in the checkpoint; fix: load a checkpoint of "
                                            "this model, or load with strict=false to keep the model's value");
    }
    const at::Tensor& src = *it->second;
    if (src.sizes() != dst.sizes()) {
      return Status::InvalidArgument(name + ": shape " + ShapeText(src.sizes()) + " in the checkpoint, " +
                                     ShapeText(dst.sizes()) +
                                     " in the model; fix: build the model with the configuration the checkpoint "
                                     "was saved from");
    }
    copies.push_back({&name, dst, &src});
  }
  if (strict) {
    for (const auto& [name, tensor] : tensors) {
      if (model_names.count(name) == 0) {
        return Status::InvalidArgument(name + ": in the checkpoint but not in the model; fix: load a checkpoint "
                                              "of this model, or load with strict=false to ignore it");
      }
    }
  } else if (copies.empty() && !targets.empty() && !tensors.empty()) {
    return Status::InvalidArgument("none of the " + std::to_string(tensors.size()) +
                                   " checkpoint tensors matches a model tensor (checkpoint names look like " +
                                   Quote(tensors.front().first) + ", model names like " +
                                   Quote(targets.front().first) + "); fix: save and load with the same names");
  }

  torch::NoGradGuard no_grad;
  for (const Copy& c : copies) {
    try {
      c.dst.copy_(*c.src);
    } catch (const std::exception& e) {
      // Reached only for a conversion copy_ refuses or a device failure, after the checks above.
      return Status::Internal(*c.name + ": cannot copy the checkpoint tensor into the model (" +
                              std::string(e.what()) + "); the module is partly loaded");
    }
  }
  return Status::OK();
}

}  // namespace tmx::checkpoint
