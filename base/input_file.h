// The one way to open a file a user hands us (a config, a tokenizer, a dataset file, a checkpoint) for
// reading, without trusting what is at the path: symbolic links are followed (a chain the kernel bounds), and
// anything that is not a regular file (a FIFO with no writer, a socket, a device, a folder) is refused
// without blocking and without reading from it. A file over the caller's size limit is refused before a
// byte of it is read. Every error names the file, the problem and the fix.
//
// ReadFile (here with a size limit, in base/file_util.h with the default one) is built on it; readers that
// read parts of a file (the safetensors reader) open an InputFile and read through it.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace tmx {

struct InputFileOptions {
  // The largest file accepted, in bytes; 0 accepts any size (for a reader that bounds every read by what the
  // file itself declares, like the safetensors reader: its header is bounded and each tensor must lie in
  // the file). A larger file is InvalidArgument, found from its size before anything is read. The default
  // is far above any file this project reads whole into memory, and far below what would exhaust it.
  int64_t max_bytes = int64_t{1} << 30;  // 1 GiB
  // What the file is, for the size message: "a config", "a dataset file".
  std::string kind = "an input file";
  // How to get under the limit, for the size message.
  std::string too_large_fix = "pass a smaller file";

  InputFileOptions& MaxBytes(int64_t bytes) {
    max_bytes = bytes;
    return *this;
  }
};

// The options of each kind of input, with its limit. Each limit is many times the largest real file of its
// kind (noted), so only a wrong or hostile file meets it.
// A YAML config, a checkpoint's config.json: 4 MiB (torchtune's configs and config.json are a few KiB).
InputFileOptions ConfigInput();
// tokenizer.json, tokenizer.model, vocab.json and merges.txt, a tiktoken file: 256 MiB (Gemma's
// tokenizer.json, among the largest, is about 33 MiB).
InputFileOptions TokenizerInput();
// A .json, .jsonl, .csv or .txt dataset file: 2 GiB (read whole into memory, then parsed into records that
// take several times more).
InputFileOptions DatasetInput();
// model.safetensors.index.json: 64 MiB (the largest published indexes are a few MiB). The safetensors files
// themselves take no limit here: their header is bounded (100 MB, as the reference reader) and every tensor
// is checked against it.
InputFileOptions CheckpointIndexInput();

// An input file opened for reading. Owns its descriptor, closed by the destructor; movable, not copyable.
class InputFile {
 public:
  // Opens `path` for reading, following symbolic links.
  // NotFound: nothing there (or a dangling link). InvalidArgument: not a regular file ("<path>: is a FIFO,
  // not a regular file; fix: pass a regular file"), a loop of symbolic links, or larger than
  // options.max_bytes ("<path>: 5242880 bytes, over the 4.00 MiB limit for a config; fix: ..."). IoError: it
  // cannot be opened (e.g. permissions).
  static StatusOr<InputFile> Open(const std::string& path, const InputFileOptions& options = {});

  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  // The size when opened, in bytes.
  uint64_t size() const { return size_; }

  // Reads the file from its start to its end. A file that grew past the size limit since it was opened is
  // InvalidArgument, like one that was that large; IoError when reading fails.
  StatusOr<std::string> ReadAll() const;
  // Reads exactly `n` bytes at `offset` into `out`. IoError naming the file when it ends sooner (it was
  // truncated while being read) or reading fails.
  Status ReadAt(uint64_t offset, void* out, size_t n) const;

 private:
  InputFile(std::string path, int fd, uint64_t size, InputFileOptions options);
  Status TooLarge(uint64_t bytes) const;

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  InputFileOptions options_;
};

// Reads the whole file at `path` within the limit of `options`, e.g. ReadFile(path, ConfigInput()); the errors
// of InputFile::Open and ReadAll. ReadFile(path) (base/file_util.h) is ReadFile(path, InputFileOptions()).
StatusOr<std::string> ReadFile(const std::string& path, const InputFileOptions& options);

}  // namespace tmx
