#include "harness/env_failure.h"

#include <cerrno>
#include <cstring>
#include <sstream>

namespace tmx {
namespace {

struct Known {
  int err;
  const char* name;
};

// Every errno this module speaks of, with its symbolic name.
constexpr Known kNames[] = {
    {ENOSPC, "ENOSPC"},   {EDQUOT, "EDQUOT"}, {EROFS, "EROFS"},
    {EACCES, "EACCES"},   {EPERM, "EPERM"},   {EMFILE, "EMFILE"},
    {ENFILE, "ENFILE"},   {EIO, "EIO"},       {ENOMEM, "ENOMEM"},
    {EAGAIN, "EAGAIN"},   {ENOENT, "ENOENT"}, {ENOEXEC, "ENOEXEC"},
    {ENOTDIR, "ENOTDIR"}, {ELOOP, "ELOOP"},   {ENAMETOOLONG, "ENAMETOOLONG"},
    {ETXTBSY, "ETXTBSY"}, {E2BIG, "E2BIG"},
};

bool OneOf(int err, std::initializer_list<int> set) {
  for (int e : set) {
    if (e == err) return true;
  }
  return false;
}

// The failures a child's output can show (its own runtime errors are its verdict; these are not).
constexpr int kChildVisible[] = {ENOSPC, EDQUOT, EROFS, EACCES, EMFILE, ENFILE};

}  // namespace

bool IsEnvironmentErrno(int err, FailureStage stage) {
  if (OneOf(err, {ENOSPC, EDQUOT, EROFS, EACCES, EPERM, EMFILE, ENFILE, EIO})) return true;
  switch (stage) {
    case FailureStage::kHarness:
      return OneOf(err, {ENOMEM, EAGAIN});
    case FailureStage::kExec:
      return OneOf(err, {ENOENT, ENOEXEC, ENOTDIR, ELOOP, ENAMETOOLONG, ETXTBSY, E2BIG});
    case FailureStage::kChild:
      return false;
  }
  return false;
}

std::string DescribeErrno(int err) {
  for (const Known& k : kNames) {
    if (k.err == err) return std::string(k.name) + " (" + std::strerror(err) + ")";
  }
  return "errno " + std::to_string(err);
}

std::optional<std::string> FindEnvironmentFailure(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    for (int err : kChildVisible) {
      if (line.find(std::strerror(err)) != std::string::npos) {
        size_t first = line.find_first_not_of(" \t\r");
        size_t last = line.find_last_not_of(" \t\r");
        return line.substr(first, last - first + 1);
      }
    }
  }
  return std::nullopt;
}

}  // namespace tmx
