#include "recipes/data/inspect.h"

#include <gtest/gtest.h>

#include "recipes/data/samples.h"
#include "recipes/data/tokenizer_builders.h"

namespace tmx::data {
namespace {

TEST(InspectTest, ShowsIdsPiecesAndMask) {
  auto tok = BuildTokenizer("llama3_tokenizer", *SampleTokenizerOptions("llama3_tokenizer", {}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int64_t> ids = {128006, 477, 273, 128007, 10, 10};  // <|start_header_id|>user<|end_header_id|>\n\n
  EXPECT_EQ(DescribeTokens((*tok)->base(), ids, {true, true, true, true, false, false}),
            "0\t128006\t<|start_header_id|>\tmasked\n"
            "1\t477\tus\tmasked\n"
            "2\t273\ter\tmasked\n"
            "3\t128007\t<|end_header_id|>\tmasked\n"
            "4\t10\t\\n\n"
            "5\t10\t\\n\n");
}

TEST(InspectTest, SentencePiecePiecesAndUnknownIds) {
  auto tok = BuildTokenizer("gemma_tokenizer", *SampleTokenizerOptions("gemma_tokenizer", {}));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int64_t> ids = (*tok)->Encode("Hi", true, false);
  std::string shown = DescribeTokens((*tok)->base(), {ids[0], 999999});
  EXPECT_EQ(shown, "0\t1\t<s>\n1\t999999\t<|unk:999999|>\n");
}

}  // namespace
}  // namespace tmx::data
