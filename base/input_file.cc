#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/file_util.h"
#include "base/text.h"

namespace tmx {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

InputFileOptions Kind(const char* kind, int64_t max_bytes, const char* fix) {
  InputFileOptions options;
  options.kind = kind;
  options.max_bytes = max_bytes;
  options.too_large_fix = fix;
  return options;
}

// The error for a failed stat or open of `path`, from errno.
Status OpenError(const std::string& path, int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return Status::NotFound(path + ": no such file");
    case ELOOP:
      return Status::InvalidArgument(path +
                                     ": a loop of symbolic links (or a chain of more than 40); fix: point "
                                     "the link at a regular file");
    case EACCES:
      return Status::IoError(path + ": cannot be read (" + std::strerror(err) +
                             "); fix: make it readable by this user");
    default:
      return Status::IoError(path + ": cannot be read (" + std::strerror(err) + ")");
  }
}

Status NotRegular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument(path + ": is " + DescribeFileKind(mode) +
                                 ", not a regular file; fix: pass a regular file");
}

}  // namespace

InputFileOptions ConfigInput() {
  return Kind("a config", 4 * kMiB, "pass the config file itself (a config is a few KiB of YAML or JSON)");
}

InputFileOptions TokenizerInput() {
  return Kind("a tokenizer file", 256 * kMiB, "pass the model's tokenizer file (tokenizer.json or tokenizer.model)");
}

InputFileOptions DatasetInput() {
  return Kind("a dataset file", 2048 * kMiB,
              "split it into several files in the dataset's folder, or train on a slice of it");
}

InputFileOptions CheckpointIndexInput() {
  return Kind("a checkpoint index", 64 * kMiB,
              "pass the model.safetensors.index.json that save_pretrained wrote with the shards");
}

StatusOr<InputFile> InputFile::Open(const std::string& path, const InputFileOptions& options) {
  // stat first: what is not a regular file is refused without being opened at all (opening some devices
  // has effects of its own).
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenError(path, errno);
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  // O_NONBLOCK: should the path have become a FIFO since the stat, the open must not wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  InputFile file(path, fd, 0, options);  // closes fd on every return below
  if (::fstat(fd, &st) != 0) return Status::IoError(path + ": cannot be read (" + std::strerror(errno) + ")");
  if (!S_ISREG(st.st_mode)) return NotRegular(path, st.st_mode);
  file.size_ = static_cast<uint64_t>(st.st_size);
  TM_RETURN_IF_ERROR(file.TooLarge(file.size_));
  return file;
}

InputFile::InputFile(std::string path, int fd, uint64_t size, InputFileOptions options)
    : path_(std::move(path)), fd_(fd), size_(size), options_(std::move(options)) {}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      size_(other.size_),
      options_(std::move(other.options_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    options_ = std::move(other.options_);
  }
  return *this;
}

Status InputFile::TooLarge(uint64_t bytes) const {
  if (options_.max_bytes <= 0 || bytes <= static_cast<uint64_t>(options_.max_bytes)) return Status::OK();
  return Status::InvalidArgument(path_ + ": " + std::to_string(bytes) + " bytes, over the " +
                                 FormatBytes(options_.max_bytes) + " limit for " + options_.kind +
                                 "; fix: " + options_.too_large_fix);
}

StatusOr<std::string> InputFile::ReadAll() const {
  std::string out;
  out.reserve(size_);
  char buf[1 << 16];
  for (uint64_t offset = 0;;) {
    ssize_t n = ::pread(fd_, buf, sizeof(buf), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError(path_ + ": cannot be read (" + std::strerror(errno) + ")");
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
    TM_RETURN_IF_ERROR(TooLarge(offset));  // it grew since it was opened
  }
}

Status InputFile::ReadAt(uint64_t offset, void* out, size_t n) const {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::IoError(path_ + ": cannot be read (" + std::strerror(errno) + ")");
    if (got == 0) {
      return Status::IoError(path_ + ": ends at byte " + std::to_string(offset) +
                             ", sooner than when it was opened; fix: do not change the file while it is read");
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return Status::OK();
}

StatusOr<std::string> ReadFile(const std::string& path, const InputFileOptions& options) {
  StatusOr<InputFile> file = InputFile::Open(path, options);
  if (!file.ok()) return file.status();
  return file->ReadAll();
}

}  // namespace tmx
