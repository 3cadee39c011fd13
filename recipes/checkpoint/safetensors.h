// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors): an 8-byte
// little-endian header length N, N bytes of JSON header padded with spaces to a multiple of 8, then the raw
// little-endian tensor data. The header maps each tensor name to {"dtype", "shape", "data_offsets"}
// (offsets relative to the data start) and may hold "__metadata__", a string-to-string map.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "base/status.h"

namespace tmx::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct LoadedSafetensors {
  // CPU tensors in the order their data lies in the file.
  NamedTensors tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` and `metadata` to `path` atomically (a temporary file renamed over `path`). Tensors may
// live on any device and be non-contiguous; they are copied to contiguous CPU memory first. Data is laid out
// with larger element sizes first (as the reference writer does) so every tensor is aligned in the file.
// Dtypes: BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 C64.
// InvalidArgument for an empty, reserved ("__metadata__") or repeated name, an undefined or sparse tensor,
// or a dtype the format has no name for; IoError when the file cannot be written.
Status SaveSafetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file, validating the header first: its length against the file size, the JSON, each
// entry's dtype, shape and data_offsets, shape x element size == byte length, and that the offsets cover
// the data exactly (in range, no overlap, no gap, nothing after the last tensor), and that the tensors fit in
// the machine's memory (CheckTensorsFitInMemory with MachineMemoryBytes()) before anything is allocated.
// NotFound/IoError for the file, InvalidArgument for bad contents, with messages naming the file and, where one
// is at fault, the tensor.
StatusOr<LoadedSafetensors> LoadSafetensors(const std::string& path);

// InvalidArgument naming `path`, both sizes and the fix when `data_bytes` of tensors exceed `memory_bytes`
// (0: unknown, anything passes).
Status CheckTensorsFitInMemory(const std::string& path, uint64_t data_bytes, int64_t memory_bytes);

// Told how far a load has gone: the bytes read so far of `total`, the sizes of all the files it reads.
using ReadProgress = std::function<void(int64_t done, int64_t total)>;

// Several safetensors files read as one load, so that a caller can show a large checkpoint loading:
// `progress` (when set) is told after each file's header and each tensor how many bytes of all the files'
// sizes have been read; once every file is loaded, done == total.
class SafetensorsLoad {
 public:
  SafetensorsLoad(const std::vector<std::string>& paths, ReadProgress progress);
  // LoadSafetensors(path), counted in the load's progress. REQUIRES: `path` is one of the paths.
  StatusOr<LoadedSafetensors> Load(const std::string& path);

 private:
  ReadProgress progress_;
  int64_t total_ = 0;
  int64_t done_ = 0;
};

// The module's parameters, then its buffers (recursively, with dotted names like "layers.0.attn.q_proj.weight",
// undefined ones left out), as they would be saved. The tensors share storage with the module.
NamedTensors ModuleTensors(const torch::nn::Module& module);

// Copies `tensors` into the module's parameters and buffers of the same name, without recording autograd,
// converting each to the dtype and device of the tensor it replaces. Checks everything before copying
// anything, so on failure the module is unchanged. Model tensors are checked in ModuleTensors order, then
// leftover checkpoint tensors in their order, and the first problem is reported with its tensor's name:
// - a shape mismatch: "<name>: shape [64, 64] in the checkpoint, [128, 64] in the model; fix: ..."
// - when `strict`: a model tensor missing from `tensors`, or a tensor in `tensors` the model lacks.
// When not `strict`, missing and unexpected tensors are skipped, but a checkpoint that matches none of
// the model's tensors is still an error (it is almost always a naming mistake, e.g. a prefix).
// A name repeated in `tensors` is an error too. The NF4 base of a QLoRA linear (models::LinearImpl::quantized)
// is quantised from its checkpoint tensor, in the model's dtype.
Status LoadIntoModule(torch::nn::Module& module, const NamedTensors& tensors, bool strict = true);

}  // namespace tmx::checkpoint
