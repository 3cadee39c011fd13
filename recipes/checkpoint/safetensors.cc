#include "recipes/checkpoint/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "base/file_util.h"
#include "base/input_file.h"
#include "base/json_io.h"
#include "base/process_info.h"
#include "base/text.h"
#include "recipes/checkpoint/quantized_values.h"
#include "recipes/checkpoint/safetensors_header.h"
#include "recipes/models/lora.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; this reader and writer copy bytes as they are");

namespace tmx::checkpoint {
namespace {

using nlohmann::json;

// The LibTorch type of each dtype of SafetensorsDtypes() (safetensors_header.h, which knows their sizes).
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

std::string ShapeText(c10::IntArrayRef shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string Quote(const std::string& name) { return "\"" + name + "\""; }

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
      return Status::InvalidArgument(
          where + "tensor " + Quote(name) + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
          ", which safetensors cannot store; fix: convert it to one of " + KnownSafetensorsDtypes());
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

  // Written piece by piece: the tensors are not copied into one buffer (a 7B model would need its size again).
  std::string head;
  AppendLittleEndian64(&head, header_text.size());
  head += header_text;
  std::vector<std::string_view> pieces = {head};
  for (size_t i : order) {
    if (cpu[i].nbytes() > 0) pieces.emplace_back(static_cast<const char*>(cpu[i].data_ptr()), cpu[i].nbytes());
  }
  return WriteFileAtomically(path, pieces);
}

Status CheckTensorsFitInMemory(const std::string& path, uint64_t data_bytes, int64_t memory_bytes) {
  if (memory_bytes <= 0 || data_bytes <= static_cast<uint64_t>(memory_bytes)) return Status::OK();
  return Status::InvalidArgument(
      path + ": its tensors hold " + FormatBytes(static_cast<int64_t>(std::min<uint64_t>(data_bytes, INT64_MAX))) +
      ", more than this machine's " + FormatBytes(memory_bytes) +
      " of memory, so they cannot be loaded here; fix: check the file (a sparse or damaged file declares tensors "
      "it does not hold) or load the model on a machine with more memory");
}

namespace {

// LoadSafetensors, telling `read` the bytes of the header and then of each tensor as they are read (together
// the file's size, since the tensors cover the data exactly).
StatusOr<LoadedSafetensors> LoadReporting(const std::string& path, const std::function<void(int64_t)>& read) {
  // No size limit on the file: its header is bounded and every tensor must lie inside the file.
  StatusOr<InputFile> file = InputFile::Open(path, InputFileOptions().MaxBytes(0));
  if (!file.ok()) return file.status();
  uint64_t length_field = 0;
  if (file->size() >= 8) TM_RETURN_IF_ERROR(file->ReadAt(0, &length_field, 8));
  StatusOr<uint64_t> header_size = CheckSafetensorsHeaderLength(file->size(), length_field, path);
  if (!header_size.ok()) return header_size.status();
  std::string header_text(*header_size, '\0');
  TM_RETURN_IF_ERROR(file->ReadAt(8, header_text.data(), *header_size));
  uint64_t data_start = 8 + *header_size;
  StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(header_text, file->size() - data_start, path);
  if (!header.ok()) return header.status();
  // The header was checked to cover the data exactly, so the file's size is what the tensors take: refuse before
  // allocating what the machine cannot give (a sparse file of a terabyte would otherwise end in the OOM killer).
  TM_RETURN_IF_ERROR(CheckTensorsFitInMemory(path, file->size() - data_start, MachineMemoryBytes()));
  if (read) read(static_cast<int64_t>(data_start));

  LoadedSafetensors loaded;
  loaded.metadata = std::move(header->metadata);
  for (const SafetensorsEntry& e : header->entries) {
    c10::ScalarType dtype;
    if (!DtypeFromName(e.dtype, &dtype)) {  // safetensors_header.cc and Dtypes() list the same names
      return Status::Internal(path + ": tensor " + Quote(e.name) + ": dtype " + e.dtype + " has no LibTorch type");
    }
    at::Tensor t;
    try {
      t = at::empty(e.shape, at::TensorOptions().dtype(dtype));
    } catch (const c10::Error&) {
      return Status::IoError(path + ": tensor " + Quote(e.name) + ": could not allocate " +
                             FormatBytes(static_cast<int64_t>(e.end - e.begin)) +
                             " for it (the machine is out of memory); fix: free memory or load on a larger machine");
    }
    TM_RETURN_IF_ERROR(file->ReadAt(data_start + e.begin, t.data_ptr(), e.end - e.begin));
    if (dtype == c10::kBool) {
      const uint8_t* bytes = static_cast<const uint8_t*>(t.data_ptr());
      if (std::any_of(bytes, bytes + (e.end - e.begin), [](uint8_t b) { return b > 1; })) {
        return Status::InvalidArgument(path + ": tensor " + Quote(e.name) +
                                       ": BOOL data holds bytes other than 0 and 1; the file is corrupt");
      }
    }
    loaded.tensors.emplace_back(e.name, std::move(t));
    if (read) read(static_cast<int64_t>(e.end - e.begin));
  }
  TM_RETURN_IF_ERROR(CheckInt4Values(path, loaded.tensors));
  return loaded;
}

}  // namespace

StatusOr<LoadedSafetensors> LoadSafetensors(const std::string& path) { return LoadReporting(path, {}); }

SafetensorsLoad::SafetensorsLoad(const std::vector<std::string>& paths, ReadProgress progress)
    : progress_(std::move(progress)) {
  for (const std::string& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) total_ += static_cast<int64_t>(st.st_size);
  }
}

StatusOr<LoadedSafetensors> SafetensorsLoad::Load(const std::string& path) {
  if (!progress_) return LoadReporting(path, {});
  return LoadReporting(path, [this](int64_t bytes) {
    done_ += bytes;
    progress_(done_, std::max(done_, total_));
  });
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

namespace {

// "<p>.scales" for a weight "<p>.weight" (where an int4 linear keeps its scales), else "".
std::string ScalesOf(const std::string& weight) {
  return EndsWith(weight, ".weight") ? weight.substr(0, weight.size() - 7) + ".scales" : "";
}

Status Int4IntoPlain(const std::string& scales) {
  return Status::InvalidArgument(scales + ": the checkpoint holds int4-quantised weights (the quantize recipe's) and "
                                          "the model plain ones; fix: set quantizer to the quantizer it was written "
                                          "with");
}

// Whether the checkpoint's `src` can be copied into the model's `dst` of the same name: the shape, and a dtype
// an integer tensor keeps (quantised codes, ids) where a floating one converts.
Status CheckCopyable(const std::string& name, const at::Tensor& src, const at::Tensor& dst,
                     const std::map<std::string, const at::Tensor*>& by_name) {
  if (src.sizes() != dst.sizes()) {
    return Status::InvalidArgument(name + ": shape " + ShapeText(src.sizes()) + " in the checkpoint, " +
                                   ShapeText(dst.sizes()) +
                                   " in the model; fix: build the model with the configuration the checkpoint "
                                   "was saved from");
  }
  if (!c10::isFloatingType(dst.scalar_type()) && c10::isFloatingType(src.scalar_type())) {
    // Integer model tensors are quantised codes (models::LinearImpl::QuantizeInt4): values would be truncated.
    return Status::InvalidArgument(name + ": " + std::string(c10::toString(src.scalar_type())) +
                                   " values in the checkpoint, quantised " +
                                   std::string(c10::toString(dst.scalar_type())) +
                                   " codes in the model; fix: load the checkpoint the quantize recipe wrote "
                                   "(tune run quantize), or set quantizer=null to load the unquantised weights");
  }
  if ((!c10::isFloatingType(src.scalar_type()) || !c10::isFloatingType(dst.scalar_type())) &&
      src.scalar_type() != dst.scalar_type()) {
    const std::string scales = ScalesOf(name);
    if (!scales.empty() && by_name.count(scales)) return Int4IntoPlain(scales);
    // Floating tensors convert between dtypes; integers would become weights of their values (an I32 tensor
    // into a float32 weight) or codes truncated to a narrower type.
    return Status::InvalidArgument(name + ": " + std::string(c10::toString(src.scalar_type())) +
                                   " values in the checkpoint, a " + std::string(c10::toString(dst.scalar_type())) +
                                   " tensor in the model; an integer tensor loads only into one of its own dtype; "
                                   "fix: load a checkpoint saved from this model (the file holds other tensors "
                                   "under this name)");
  }
  return Status::OK();
}

}  // namespace

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
    TM_RETURN_IF_ERROR(CheckCopyable(name, src, dst, by_name));
    copies.push_back({&name, dst, &src});
  }
  if (strict) {
    for (const auto& [name, tensor] : tensors) {
      if (model_names.count(name) == 0) {
        if (EndsWith(name, ".scales")) return Int4IntoPlain(name);
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
  // An NF4 base (QLoRA) is a meta placeholder: its layer quantises the checkpoint tensor instead.
  const auto quantized = models::QuantizedLinears(module);
  for (const Copy& c : copies) {
    try {
      auto linear = quantized.find(c.dst.unsafeGetTensorImpl());
      if (linear != quantized.end()) {
        TM_RETURN_IF_ERROR(linear->second->SetBaseWeight(*c.src, *c.name));
        continue;
      }
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
