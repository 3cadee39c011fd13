#include "recipes/data/alpaca.h"

#include <stdlib.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "harness/file_util.h"
#include "tests/scratch_dir.h"

namespace tmx::data {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const char kNoInputPrompt[] =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request."
    "\n\n### Instruction:\nSay hi.\n\n### Response:\n";
const char kInputPrompt[] =
    "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
    "response that appropriately completes the request.\n\n### Instruction:\nReverse the text.\n\n### Input:\n"
    "abc\n\n### Response:\n";

class AlpacaTest : public ::testing::Test {
 protected:
  // Writes `contents` to <dir>/<name> and returns the path.
  std::string Write(const std::string& name, const std::string& contents) {
    std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, contents).ok());
    return path;
  }

  StatusOr<AlpacaDataset> Load(const std::string& path, int64_t max_seq_len = 512, bool train_on_input = false) {
    AlpacaOptions options;
    options.path = path;
    options.max_seq_len = max_seq_len;
    options.train_on_input = train_on_input;
    return LoadAlpaca(options, tok_);
  }

  // The message of a load that must fail with InvalidArgument.
  std::string LoadError(const std::string& path) {
    StatusOr<AlpacaDataset> ds = Load(path);
    EXPECT_FALSE(ds.ok());
    EXPECT_EQ(ds.status().code(), Status::Code::kInvalidArgument);
    return ds.status().message();
  }

  test::ScratchDir scratch_{"alpaca_test"};
  const std::string dir_ = scratch_.path();
  ByteTokenizer tok_;
};

TEST_F(AlpacaTest, PromptTemplateWithAndWithoutInput) {
  EXPECT_EQ(FormatAlpacaPrompt("Say hi.", ""), kNoInputPrompt);
  EXPECT_EQ(FormatAlpacaPrompt("Reverse the text.", "abc"), kInputPrompt);
}

TEST_F(AlpacaTest, SampleMasksThePromptByDefault) {
  AlpacaRecord record{"Reverse the text.", "abc", "cba"};
  AlpacaOptions options;
  Sample s = MakeAlpacaSample(record, options, tok_);
  std::vector<int64_t> expected = tok_.Encode(std::string(kInputPrompt) + "cba", true, true);
  EXPECT_EQ(s.tokens, expected);
  ASSERT_EQ(s.labels.size(), s.tokens.size());
  size_t prompt_len = 1 + std::string(kInputPrompt).size();  // BOS + prompt
  for (size_t i = 0; i < prompt_len; ++i) ASSERT_EQ(s.labels[i], kIgnoreIndex) << "position " << i;
  EXPECT_EQ(std::vector<int64_t>(s.labels.begin() + static_cast<std::ptrdiff_t>(prompt_len), s.labels.end()),
            (std::vector<int64_t>{'c', 'b', 'a', ByteTokenizer::kEos}));
}

TEST_F(AlpacaTest, TrainOnInputLabelsEveryPosition) {
  AlpacaOptions options;
  options.train_on_input = true;
  Sample s = MakeAlpacaSample({"Say hi.", "", "hi"}, options, tok_);
  EXPECT_EQ(s.tokens, tok_.Encode(std::string(kNoInputPrompt) + "hi", true, true));
  EXPECT_EQ(s.labels, s.tokens);
}

TEST_F(AlpacaTest, TruncationKeepsLabelsAligned) {
  size_t prompt_len = 1 + std::string(kNoInputPrompt).size();
  AlpacaOptions options;
  options.max_seq_len = static_cast<int64_t>(prompt_len) + 2;
  Sample s = MakeAlpacaSample({"Say hi.", "", "hello"}, options, tok_);
  ASSERT_EQ(s.tokens.size(), prompt_len + 2);
  ASSERT_EQ(s.labels.size(), prompt_len + 2);
  EXPECT_EQ(s.tokens[prompt_len], 'h');
  EXPECT_EQ(s.tokens[prompt_len + 1], 'e');
  EXPECT_EQ(s.labels[prompt_len - 1], kIgnoreIndex);
  EXPECT_EQ(s.labels[prompt_len], 'h');
  EXPECT_EQ(s.labels[prompt_len + 1], 'e');

  // A cut inside the prompt leaves nothing to learn from (all labels ignored) but the lengths agree.
  options.max_seq_len = 5;
  s = MakeAlpacaSample({"Say hi.", "", "hello"}, options, tok_);
  EXPECT_EQ(s.tokens, (std::vector<int64_t>{256, 'B', 'e', 'l', 'o'}));
  EXPECT_EQ(s.labels, std::vector<int64_t>(5, kIgnoreIndex));
}

TEST_F(AlpacaTest, LoadsJsonlAndJsonAlike) {
  std::string jsonl = Write("d.jsonl",
                            "{\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"hi\"}\n"
                            "\n"
                            "{\"instruction\": \"Reverse the text.\", \"input\": \"abc\", \"output\": \"cba\", "
                            "\"extra\": 1}\r\n"
                            "{\"instruction\": \"No input field.\", \"output\": \"ok\"}\n"
                            "{\"instruction\": \"Null input.\", \"input\": null, \"output\": \"ok\"}");
  std::string json = Write("d.json",
                           "[\n"
                           "  {\"instruction\": \"Say hi.\", \"input\": \"\", \"output\": \"hi\"},\n"
                           "  {\"instruction\": \"Reverse the text.\", \"input\": \"abc\", \"output\": \"cba\",\n"
                           "   \"extra\": [1, {\"a\": \"]}\"}]},\n"
                           "  {\"instruction\": \"No input field.\", \"output\": \"ok\"},\n"
                           "  {\"instruction\": \"Null input.\", \"input\": null, \"output\": \"ok\"}\n"
                           "]\n");
  for (const std::string& path : {jsonl, json}) {
    SCOPED_TRACE(path);
    StatusOr<AlpacaDataset> ds = Load(path);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    ASSERT_EQ(ds->size(), 4);
    EXPECT_EQ(ds->record(0).instruction, "Say hi.");
    EXPECT_EQ(ds->record(1).input, "abc");
    EXPECT_EQ(ds->record(1).output, "cba");
    EXPECT_EQ(ds->record(2).input, "");
    EXPECT_EQ(ds->record(3).input, "");
    EXPECT_EQ(ds->sample(1).tokens, tok_.Encode(std::string(kInputPrompt) + "cba", true, true));
    EXPECT_EQ(ds->num_truncated(), 0);
  }
}

TEST_F(AlpacaTest, CountsTruncatedSamples) {
  std::string path = Write("t.jsonl",
                           "{\"instruction\": \"Say hi.\", \"output\": \"hi\"}\n"
                           "{\"instruction\": \"Say hi.\", \"output\": \"a much longer answer\"}\n");
  size_t short_len = 1 + std::string(kNoInputPrompt).size() + 2 + 1;
  StatusOr<AlpacaDataset> ds = Load(path, static_cast<int64_t>(short_len));
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->num_truncated(), 1);
  EXPECT_EQ(ds->sample(0).tokens.size(), short_len);
  EXPECT_EQ(ds->sample(1).tokens.size(), short_len);
}

TEST_F(AlpacaTest, JsonlErrorsNameFileLineAndField) {
  struct Case {
    std::string line2;
    std::string expected;  // after "<path>:2: "
  };
  const std::vector<Case> cases = {
      {"[1, 2]", "record is an array, expected an object with string fields \"instruction\" and \"output\" (and "
                 "optionally \"input\")"},
      {"\"text\"", "record is a string, expected an object with string fields \"instruction\" and \"output\" (and "
                   "optionally \"input\")"},
      {"{\"instruction\": \"x\"}", "record has no \"output\" field; fix: give every record string fields "
                                   "\"instruction\" and \"output\" (and optionally \"input\")"},
      {"{\"output\": \"x\"}", "record has no \"instruction\" field; fix: give every record string fields "
                              "\"instruction\" and \"output\" (and optionally \"input\")"},
      {"{\"instruction\": 5, \"output\": \"x\"}", "field \"instruction\" is a number, expected a string"},
      {"{\"instruction\": \"x\", \"input\": [\"a\"], \"output\": \"x\"}",
       "field \"input\" is an array, expected a string"},
      {"{\"instruction\": \"x\", \"output\": null}", "field \"output\" is null, expected a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line2);
    std::string path = Write("bad.jsonl", "{\"instruction\": \"ok\", \"output\": \"ok\"}\n" + c.line2 + "\n");
    EXPECT_EQ(LoadError(path), path + ":2: " + c.expected);
  }
  // The parser's own words follow the position (they depend on the nlohmann_json version).
  std::string path = Write("bad.jsonl", "{\"instruction\": \"ok\", \"output\": \"ok\"}\n\n{\"instruction\": tru}\n");
  EXPECT_THAT(LoadError(path), AllOf(StartsWith(path + ":3: invalid JSON (syntax error while parsing value"),
                                     HasSubstr("tru}'"), EndsWith("); fix: repair the file or regenerate it")));
}

TEST_F(AlpacaTest, JsonArrayErrorsNameTheLineWhereTheElementStarts) {
  // The bad element is the third; it starts on line 7. Strings hold brackets, commas and escaped quotes
  // that must not confuse the element scanner.
  std::string path = Write("bad.json",
                           "[\n"
                           "  {\"instruction\": \"a [tricky], {one}\", \"output\": \"\\\"quoted\\\", \\\\\"},\n"
                           "  {\n"
                           "    \"instruction\": \"b\",\n"
                           "    \"output\": \"c\"\n"
                           "  }\n"
                           "  ,  {\"instruction\": \"no output\",\n"
                           "      \"input\": \"x\"}\n"
                           "]\n");
  EXPECT_EQ(LoadError(path), path + ":7: record has no \"output\" field; fix: give every record string fields "
                                    "\"instruction\" and \"output\" (and optionally \"input\")");

  path = Write("nonobject.json", "[{\"instruction\": \"a\", \"output\": \"b\"},\n\n 42]");
  EXPECT_EQ(LoadError(path), path + ":3: record is a number, expected an object with string fields "
                                    "\"instruction\" and \"output\" (and optionally \"input\")");
}

TEST_F(AlpacaTest, JsonSyntaxAndShapeErrors) {
  std::string path = Write("syntax.json",
                           "[\n"
                           "  {\"instruction\": \"a\", \"output\": \"b\"},\n"
                           "  {\"instruction\": \"a\" \"output\": \"b\"}\n"
                           "]\n");
  EXPECT_THAT(LoadError(path), AllOf(StartsWith(path + ":3: invalid JSON (syntax error while parsing object"),
                                     EndsWith("); fix: repair the file or regenerate it")));

  path = Write("object.json", "{\"instruction\": \"a\", \"output\": \"b\"}");
  EXPECT_EQ(LoadError(path), path + ": the top-level value is an object, expected an array of records; fix: wrap "
                                    "the records in [...], or write one record per line to a .jsonl file");

  path = Write("empty.json", "[ ]");
  EXPECT_EQ(LoadError(path), path + ": contains no records; fix: add at least one record with string fields "
                                    "\"instruction\" and \"output\" (and optionally \"input\")");
  path = Write("empty.jsonl", "\n  \n");
  EXPECT_EQ(LoadError(path), path + ": contains no records; fix: add at least one record with string fields "
                                    "\"instruction\" and \"output\" (and optionally \"input\")");
}

TEST_F(AlpacaTest, BadOptionsAndMissingFile) {
  std::string txt = Write("data.txt", "");
  EXPECT_EQ(LoadError(txt), txt + ": unknown file type; fix: use a .json file (an array of records) or a .jsonl "
                                  "file (one record per line)");
  EXPECT_EQ(LoadError(""), "alpaca dataset: path is empty; fix: set it to a local .json or .jsonl file");

  std::string ok = Write("ok.jsonl", "{\"instruction\": \"a\", \"output\": \"b\"}\n");
  StatusOr<AlpacaDataset> ds = Load(ok, 0);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "alpaca dataset " + ok + ": max_seq_len is 0; fix: set it to at least 1");

  ds = Load(Write("UPPER.JSONL", "{\"instruction\": \"a\", \"output\": \"b\"}\n"));
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();  // the extension is matched without regard to case

  ds = Load(dir_ + "/missing.jsonl");
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(ds.status().message(), dir_ + "/missing.jsonl: no such file");
}

TEST(ShippedDatasetTest, TinyInstructLoads) {
  AlpacaOptions options;
  options.path = std::string(TM_SOURCE_DIR) + "/recipes/data/datasets/tiny_instruct.jsonl";
  options.max_seq_len = 512;
  ByteTokenizer tok;
  StatusOr<AlpacaDataset> ds = LoadAlpaca(options, tok);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(ds->size(), 4000);
  EXPECT_EQ(ds->num_truncated(), 0);
  size_t longest = 0;
  for (const Sample& s : ds->samples()) longest = std::max(longest, s.tokens.size());
  EXPECT_LE(longest, 256u);
  for (const AlpacaRecord& r : ds->records()) {
    ASSERT_FALSE(r.instruction.empty());
    ASSERT_FALSE(r.output.empty());
  }
}

}  // namespace
}  // namespace tmx::data
