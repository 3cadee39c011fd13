// A fresh temporary folder per test, removed with everything in it when the owner goes away.
//
// No std::filesystem: libtorch.so exports its own copies of some std::filesystem functions, and
// std::filesystem::remove_all resolves to libtorch's copy and crashes in binaries that link torch.
#pragma once

#include <string>

namespace tmx::test {

class ScratchDir {
 public:
  // Creates <TMPDIR or /tmp>/<prefix>_XXXXXX. REQUIRES: prefix is a plain name.
  explicit ScratchDir(const std::string& prefix = "tm_test");
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tmx::test
