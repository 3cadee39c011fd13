// Status: the result of an operation that can fail in an expected way (a bad config, a missing file).
// Modelled on leveldb's Status: a code plus a message that names the subject, the problem and the fix.
// Exceptions are kept for broken invariants; user errors travel as Status values up to the CLI, which
// prints ToString() and exits with ExitCode().
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tmx {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,    // bad config value, bad override, wrong type, unknown key
    kNotFound,           // missing file, unknown config/recipe/component
    kAlreadyExists,      // refusing to overwrite
    kUnavailable,        // device not present on this machine
    kFailedPrecondition, // config valid but not runnable here (device lacks a feature)
    kIoError,            // reading or writing a file failed
    kInternal,           // a run failed for a reason that is not the user's input
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status AlreadyExists(std::string msg) { return Status(Code::kAlreadyExists, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) { return Status(Code::kFailedPrecondition, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(Code::kIoError, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "error: <message>" (or "ok").
  std::string ToString() const;
  // Process exit status for this status: 0 for ok, 2 for a user's input error, 1 otherwise.
  int ExitCode() const;
  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}                  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}          // NOLINT: implicit by design
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok()
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tmx

// Returns from the enclosing function when `expr` (a Status) is not ok.
#define TM_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::tmx::Status _tm_status = (expr);     \
    if (!_tm_status.ok()) return _tm_status; \
  } while (0)
