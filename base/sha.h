// SHA-256 and SHA-1 (FIPS 180-4), streaming: what a download checks its bytes against (the Hub lists an LFS
// file's sha256 and a git file's blob sha1). Small and dependency-free; not for secrets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace tmx {

// What both hashes share: 64-byte blocks, the same padding, the digest as the state words in hex. Feed bytes
// with Update, then HexDigest() once (lowercase hex). Copyable: a copy continues independently.
class Sha {
 public:
  virtual ~Sha() = default;
  void Update(const void* data, size_t n);
  void Update(const std::string& s) { Update(s.data(), s.size()); }
  std::string HexDigest();  // ends the hash; a second call returns the same digest

 protected:
  Sha(std::initializer_list<uint32_t> initial);
  virtual void Block(const uint8_t* p) = 0;  // one 64-byte block into h_
  uint32_t h_[8] = {};

 private:
  size_t words_;  // of h_ in the digest
  uint8_t buf_[64] = {};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
  std::string digest_;
};

class Sha256 : public Sha {
 public:
  Sha256();

 private:
  void Block(const uint8_t* p) override;
};

class Sha1 : public Sha {
 public:
  Sha1();

 private:
  void Block(const uint8_t* p) override;
};

// The id git gives a file's content: sha1 of "blob <size>\0" followed by the content.
std::string GitBlobSha1(const std::string& content);

}  // namespace tmx
