#include "base/sha.h"

#include <gtest/gtest.h>

namespace tmx {
namespace {

struct Vector {
  std::string input;
  std::string sha256;
  std::string sha1;
};

// FIPS 180-4's examples (NIST's "Examples with intermediate values") and the empty message.
const Vector kVectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
     "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
     "a9993e364706816aba3e25717850c26c9cd0d89d"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
     "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1",
     "a49b2446a02c645bf419f995b67091253a04a259"},
};

TEST(ShaTest, StandardVectors) {
  for (const Vector& v : kVectors) {
    Sha256 a;
    a.Update(v.input);
    EXPECT_EQ(a.HexDigest(), v.sha256) << "input: '" << v.input << "'";
    EXPECT_EQ(a.HexDigest(), v.sha256) << "a second call, input: '" << v.input << "'";
    Sha1 b;
    b.Update(v.input);
    EXPECT_EQ(b.HexDigest(), v.sha1) << "input: '" << v.input << "'";
  }
}

TEST(ShaTest, MillionAsInPiecesOfEverySize) {
  const std::string million(1000000, 'a');
  for (size_t piece : {1, 7, 63, 64, 65, 1000, 1000000}) {
    Sha256 a;
    Sha1 b;
    for (size_t i = 0; i < million.size(); i += piece) {
      size_t n = std::min(piece, million.size() - i);
      a.Update(million.data() + i, n);
      b.Update(million.data() + i, n);
    }
    EXPECT_EQ(a.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") << "piece " << piece;
    EXPECT_EQ(b.HexDigest(), "34aa973cd4c4daa4f61eeb2bdbad27316534016f") << "piece " << piece;
  }
}

TEST(ShaTest, PaddingBoundaries) {
  // 55, 56 and 64 bytes: the length fits in the last block, needs one more, or follows a full block.
  EXPECT_EQ([] { Sha256 s; s.Update(std::string(55, 'a')); return s.HexDigest(); }(),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ([] { Sha256 s; s.Update(std::string(56, 'a')); return s.HexDigest(); }(),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ([] { Sha256 s; s.Update(std::string(64, 'a')); return s.HexDigest(); }(),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(ShaTest, GitBlobId) {
  // `printf 'hello\n' | git hash-object --stdin` and the empty blob.
  EXPECT_EQ(GitBlobSha1("hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(GitBlobSha1(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

}  // namespace
}  // namespace tmx
