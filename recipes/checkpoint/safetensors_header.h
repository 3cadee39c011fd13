// The layout of a safetensors file, checked without LibTorch: its size, its 8-byte header length and its JSON
// header (dtypes, shapes, data_offsets, __metadata__). The reader (safetensors.h) reads a file through these
// checks, then the tensors; the fuzzer (fuzz/targets.h) feeds them hostile bytes in memory, which is why this
// part links no LibTorch (the sanitizer build has none).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace tmx::checkpoint {

// The reference implementation refuses headers over 100 MB; so do we, before allocating for one.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// A dtype as the format spells it, with its element size.
struct SafetensorsDtype {
  const char* name;  // "F32"
  uint64_t bytes;    // 4
};

// Every dtype read and written here: BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 C64.
const std::vector<SafetensorsDtype>& SafetensorsDtypes();
// Their names, separated by spaces, for messages.
std::string KnownSafetensorsDtypes();

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of SafetensorsDtypes()
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // data_offsets, relative to the end of the header
  uint64_t end = 0;
};

struct SafetensorsHeader {
  // Sorted by data offset; together they cover the data exactly.
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// The header length that a file of `file_size` bytes declares in its first 8 bytes, `length_field`, checked:
// InvalidArgument (naming `path`) for a file under 8 bytes, or a length over kMaxSafetensorsHeaderBytes or
// over the bytes that follow it. REQUIRES: `length_field` is 0 when `file_size` < 8.
StatusOr<uint64_t> CheckSafetensorsHeaderLength(uint64_t file_size, uint64_t length_field, const std::string& path);

// Parses and checks the header `text` of the file at `path` (for messages), whose data after the header is
// `data_size` bytes: the JSON, each entry's dtype, shape and data_offsets, shape x element size == byte
// length, and that the offsets cover the data exactly (in range, no overlap, no gap, nothing after the last
// tensor). InvalidArgument naming the file and, where one is at fault, the tensor.
StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const std::string& text, uint64_t data_size,
                                                   const std::string& path);

}  // namespace tmx::checkpoint
