#include "recipes/checkpoint/safetensors_header.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace tmx::checkpoint {
namespace {

TEST(SafetensorsHeaderTest, ParsesEntriesInDataOrderWithMetadata) {
  StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(
      R"({"b": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [16, 28]},
          "__metadata__": {"format": "pt"},
          "a": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]},
          "empty": {"dtype": "I8", "shape": [0], "data_offsets": [28, 28]}})",
      28, "m.safetensors");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  ASSERT_EQ(header->entries.size(), 3u);
  EXPECT_EQ(header->entries[0].name, "a");
  EXPECT_EQ(header->entries[1].name, "b");
  EXPECT_EQ(header->entries[1].dtype, "BF16");
  EXPECT_EQ(header->entries[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header->entries[2].begin, 28u);
  EXPECT_EQ(header->metadata.at("format"), "pt");
}

TEST(SafetensorsHeaderTest, TheHeaderLengthIsCheckedAgainstTheFileAndTheLimit) {
  EXPECT_EQ(*CheckSafetensorsHeaderLength(100, 92, "m"), 92u);
  struct Case {
    uint64_t file_size, length;
    std::string message;
  } cases[] = {
      {3, 0,
       "m: only 3 bytes, too short for a safetensors file (it starts with an 8-byte header length); the file "
       "is truncated or not a safetensors file"},
      {100, 93,
       "m: header length 93 is larger than the 92 bytes that follow it; the file is truncated or not a "
       "safetensors file"},
      {uint64_t{1} << 40, 100'000'001,
       "m: header length 100000001 is larger than the limit of 100000000 bytes; the "
       "file is truncated or not a safetensors file"},
  };
  for (const Case& c : cases) {
    StatusOr<uint64_t> length = CheckSafetensorsHeaderLength(c.file_size, c.length, "m");
    EXPECT_EQ(length.status().code(), Status::Code::kInvalidArgument) << c.message;
    EXPECT_EQ(length.status().message(), c.message);
  }
}

TEST(SafetensorsHeaderTest, BadHeadersNameTheTensorAndTheProblem) {
  struct Case {
    std::string header;
    uint64_t data_size;
    std::string message;
  } cases[] = {
      {"[1]", 0,
       "m: the safetensors header is a JSON array, expected an object; the file is corrupt or not a "
       "safetensors file"},
      // A number JSON cannot hold used to escape as an exception (found by the fuzzer).
      {R"({"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})", 4,
       "m: the safetensors header:1:34: in w.shape[0]: number 1e999 is out of range (a double holds magnitudes up "
       "to about 1.8e308); fix: write a number within that range, or regenerate the file"},
      {R"({"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}})", 4,
       "m: tensor \"w\": unknown dtype \"F12\" (known: BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 "
       "F8_E5M2 C64)"},
      {R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}})", 4,
       "m: tensor \"w\": shape [4294967296, 4294967296] of F32 needs more than 2^64 bytes, but data_offsets [0, 4] "
       "hold 4"},
      {R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
           "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}})",
       6, "m: tensor \"b\": data_offsets [2, 6] overlap those of tensor \"a\" (which end at 4); the file is corrupt"},
      {R"({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}})", 5,
       "m: 1 bytes of data follow the last tensor; the file is corrupt"},
  };
  for (const Case& c : cases) {
    StatusOr<SafetensorsHeader> header = ParseSafetensorsHeader(c.header, c.data_size, "m");
    EXPECT_EQ(header.status().code(), Status::Code::kInvalidArgument) << c.header;
    EXPECT_EQ(header.status().message(), c.message);
  }
}

}  // namespace
}  // namespace tmx::checkpoint
