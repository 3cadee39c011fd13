#include "base/status.h"

namespace tmx {

std::string Status::ToString() const {
  if (ok()) return "ok";
  return "error: " + message_;
}

int Status::ExitCode() const {
  switch (code_) {
    case Code::kOk:
      return 0;
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kAlreadyExists:
    case Code::kUnavailable:
    case Code::kFailedPrecondition:
      return 2;
    case Code::kIoError:
    case Code::kInternal:
      return 1;
  }
  return 1;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace tmx
