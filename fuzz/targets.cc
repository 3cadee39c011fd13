#include "fuzz/targets.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/folder.h"
#include "base/json_io.h"
#include "fuzz/hub_listing_target.h"
#include "fuzz/mutator.h"
#include "harness/config.h"
#include "harness/yaml_bounds.h"
#include "matrix/journal.h"
#include "matrix/junit.h"
#include "matrix/merge.h"
#include "matrix/support_block.h"
#include "recipes/checkpoint/safetensors_header.h"
#include "recipes/data/records.h"
#include "recipes/data/tokenizers/byte_bpe.h"
#include "recipes/data/tokenizers/hf_tokenizer.h"
#include "recipes/data/tokenizers/sentencepiece.h"

namespace tmx::fuzz {
namespace {

// A broken invariant: print what broke and abort, so the fuzzer reports the input.
[[noreturn]] void Broken(const std::string& what) {
  std::fprintf(stderr, "fuzz: invariant broken: %s\n", what.c_str());
  std::abort();
}

// A fixed clock, so that a seed reads the same way on every run (every seed record is older).
const int64_t kNow = *ParseUtc("2030-01-01T00:00:00Z");

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Everything a recipe and `tune cat` do with a loaded config.
void Exercise(Config config) {
  (void)config.ResolveInterpolations();
  (void)config.ToYaml();
  for (const char* key : {"batch_size", "model.lora_rank", "optimizer.lr", "output_dir", "device", "a.b"}) {
    (void)config.GetInt(key, 0);
    (void)config.GetDouble(key, 0);
    (void)config.GetString(key, "");
    (void)config.GetBool(key, false);
    (void)config.OriginOf(key).ToString();
    (void)config.KeyOriginOf(key).ToString();
  }
}

bool RunConfig(const std::string& input) {
  StatusOr<Config> config = Config::FromString(input, "fuzz.yaml");
  if (!config.ok()) return false;
  Config copy = *config;
  (void)copy.ApplyOverrides({"batch_size=2", "model.lora_rank=${batch_size}", "~device"});
  Exercise(copy);
  Exercise(*config);
  return true;
}

const char kOverrideBase[] =
    "output_dir: /tmp/run\n"
    "model:\n  _component_: m.lora\n  lora_attn_modules: [q_proj, v_proj]\n  lora_rank: 8\n"
    "metric_logger:\n  log_dir: ${output_dir}/logs\n"
    "optimizer: {_component_: torch.optim.AdamW, lr: 3e-4}\n"
    "batch_size: 4\ndevice: cpu\n";

bool RunOverrides(const std::string& input) {
  static const Config base = Config::FromString(kOverrideBase, "base.yaml").value();
  Config config = base;
  std::string before = config.ToYaml();
  Status s = config.ApplyOverrides(Lines(input));
  if (!s.ok() && config.ToYaml() != before) Broken("a failed ApplyOverrides changed the config");
  Exercise(config);
  return s.ok();
}

bool RunJournal(const std::string& input) {
  std::vector<std::string> warnings, origins;
  StatusOr<std::vector<matrix::CellResult>> cells =
      matrix::ParseJournalText(input, "fuzz.jsonl", &warnings, &origins, kNow);
  if (!cells.ok()) return false;
  if (origins.size() != cells->size()) Broken("one origin per record");
  // What was read must write and read back the same: the journal is rewritten by merge.
  for (const matrix::CellResult& c : *cells) {
    std::string line = matrix::JournalLine(c);
    StatusOr<std::vector<matrix::CellResult>> back =
        matrix::ParseJournalText(line + "\n", "back", nullptr, nullptr, kNow);
    if (!back.ok()) Broken("a record read does not read back: " + back.status().message());
    if (back->size() != 1 || matrix::JournalLine((*back)[0]) != line) Broken("a record changed on its way back");
  }
  std::string combined = matrix::CombinedJournalText(*cells);
  StatusOr<std::vector<matrix::CellResult>> merged = matrix::ParseJournalText(combined, "c", nullptr, nullptr, kNow);
  if (!merged.ok() || merged->size() != matrix::LatestByCell(*cells).size()) Broken("the combined journal");
  (void)matrix::LatestByColumn(*cells);
  std::ostringstream junit;
  matrix::WriteJUnit(*cells, junit);
  return true;
}

// Write-back edits the configs users wrote: the layout contract of matrix/support_block.h must hold for any text.
bool RunWriteBack(const std::string& input) {
  matrix::CellResult cell;
  cell.key = {"tiny/lora_single_device", "cpu"};
  cell.recipe = "lora_finetune_single_device";
  cell.device_type = "cpu";
  cell.status = matrix::CellStatus::kFails;
  cell.reason = "line one\nline \"two\"";
  cell.tokens_per_second = 812.4;
  cell.provenance.verified_at = "2026-12-02T11:30:00Z";
  // yaml-cpp's LoadAll never returns on some texts (a ',' where a document starts), and write-back reads
  // configs with it. Until write-back checks them with CheckYamlBoundsAllDocuments first (phase 2 of issue
  // #13), the fuzzer feeds it only the texts that check accepts.
  auto where = [](const YAML::Mark&) { return std::string("fuzz.yaml"); };
  if (!CheckYamlBoundsAllDocuments(input, where).ok() ||
      !CheckYamlBoundsAllDocuments(StripGeneratedBlock(input), where).ok()) {
    return false;
  }
  (void)matrix::ReadConfigSupport(input, "fuzz.yaml");
  const std::string column = matrix::ColumnOf(cell);
  StatusOr<std::string> updated = matrix::UpdateSupport(input, {{column, matrix::SupportFromCell(cell)}}, "fuzz.yaml");
  if (!updated.ok()) return false;
  if (StripGeneratedBlock(*updated) != StripGeneratedBlock(input)) {
    Broken("write-back changed bytes outside its block");
  }
  StatusOr<matrix::ConfigSupport> claims = matrix::ReadConfigSupport(*updated, "fuzz.yaml");
  if (!claims.ok()) Broken("a written block does not read back: " + claims.status().message());
  StatusOr<std::string> again = matrix::UpdateSupport(*updated, {{column, matrix::SupportFromCell(cell)}}, "f");
  if (!again.ok() || *again != *updated) Broken("writing the same support twice changed the file");
  return true;
}

// A safetensors file in memory, read the way LoadSafetensors reads one from disk: the header length, then the
// header. What the reader then relies on must hold for whatever was accepted.
bool RunSafetensors(const std::string& input) {
  const std::string path = "fuzz.safetensors";
  uint64_t length_field = 0;
  if (input.size() >= 8) std::memcpy(&length_field, input.data(), 8);
  StatusOr<uint64_t> length = checkpoint::CheckSafetensorsHeaderLength(input.size(), length_field, path);
  if (!length.ok()) return false;
  const uint64_t data_size = input.size() - 8 - *length;
  StatusOr<checkpoint::SafetensorsHeader> header =
      checkpoint::ParseSafetensorsHeader(input.substr(8, *length), data_size, path);
  if (!header.ok()) return false;
  uint64_t expected = 0;
  for (const checkpoint::SafetensorsEntry& e : header->entries) {
    if (e.begin != expected || e.end < e.begin || e.end > data_size) Broken("safetensors entries do not tile the data");
    uint64_t bytes = 0;
    for (const checkpoint::SafetensorsDtype& d : checkpoint::SafetensorsDtypes()) {
      if (e.dtype == d.name) bytes = d.bytes;
    }
    if (bytes == 0) Broken("a safetensors entry with an unknown dtype was accepted: " + e.dtype);
    for (int64_t dim : e.shape) {
      if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes)) {
        Broken("a safetensors shape that overflows was accepted");
      }
    }
    if (bytes != e.end - e.begin) Broken("a safetensors tensor's bytes differ from its shape");
    expected = e.end;
  }
  if (expected != data_size) Broken("safetensors data left after the last tensor was accepted");
  return true;
}

// A safetensors file: the 8-byte little-endian header length, the header, the data.
std::string SafetensorsBytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::vector<std::string> SafetensorsSeeds() {
  return {
      SafetensorsBytes(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})",
                       std::string(16, '\1')),
      SafetensorsBytes(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},)"
                       R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                       R"("c":{"dtype":"BOOL","shape":[0,5],"data_offsets":[14,14]}})",
                       std::string(14, '\0')),
      SafetensorsBytes("{}      ", ""),
      // Hostile: a length past the file, a shape whose size overflows, overlapping and negative offsets, deep JSON.
      std::string(8, '\x7f') + "{}",
      SafetensorsBytes(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}})", "x"),
      SafetensorsBytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                       "xyz"),
      SafetensorsBytes(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[-1,0]}})", ""),
      SafetensorsBytes(std::string(64, '[') + std::string(64, ']'), ""),
  };
}

std::vector<std::string> SafetensorsDictionary() {
  std::vector<std::string> words = JsonDictionary();
  for (const char* w : {"\"dtype\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "18446744073709551615"}) {
    words.push_back(w);
  }
  for (const checkpoint::SafetensorsDtype& d : checkpoint::SafetensorsDtypes()) {
    words.push_back("\"" + std::string(d.name) + "\"");
  }
  return words;
}

// The number of lines of `text` as an editor counts them: '\n', "\r\n" and a lone '\r' each end one.
int64_t LineCount(const std::string& text) {
  int64_t lines = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) ++lines;
  }
  return lines;
}

// What every record parser promises: each record names the file and a line of the text, in the order of the text
// (strictly increasing where a line holds at most one record), and a message can show its value.
void CheckRecords(const std::vector<data::Record>& records, const std::string& path, int64_t lines, bool one_per_line,
                  const std::string& parser) {
  int64_t last = 0;
  for (const data::Record& r : records) {
    if (r.path != path) Broken(parser + ": a record names another file: " + r.path);
    if (r.line < 1 || r.line > lines) {
      Broken(parser + ": a record at line " + std::to_string(r.line) + " of a text of " + std::to_string(lines) +
             " lines");
    }
    if (r.line < last || (one_per_line && r.line == last)) Broken(parser + ": records out of the text's order");
    if (r.where() != path + ":" + std::to_string(r.line) + ": ") Broken(parser + ": where() is " + r.where());
    (void)JsonForMessage(r.value);
    (void)data::DescribeJson(r.value);
    last = r.line;
  }
}

// An error names the file, and is never Internal (Internal is what ParseJsonArray returns when its own count of
// the array's elements disagrees with the JSON parser's).
void CheckError(const Status& status, const std::string& path, const std::string& parser) {
  if (status.code() == Status::Code::kInternal) Broken(parser + " returned an internal error: " + status.message());
  if (status.message().find(path) == std::string::npos) Broken(parser + ": an error without the file's name");
}

// A local data file (recipes/data/records.h) as each of the four formats reads it. Accepted: JSON (an array or
// JSON Lines) with at least one record.
bool RunDataset(const std::string& input) {
  const std::string path = "fuzz.data";
  const int64_t lines = LineCount(input);
  StatusOr<std::vector<data::Record>> jsonl = data::ParseJsonLines(path, input);
  if (jsonl.ok()) {
    CheckRecords(*jsonl, path, lines, true, "ParseJsonLines");
  } else {
    CheckError(jsonl.status(), path, "ParseJsonLines");
  }
  StatusOr<std::vector<data::Record>> json = data::ParseJson(path, input);
  if (json.ok()) {
    CheckRecords(*json, path, lines, false, "ParseJson");
  } else {
    CheckError(json.status(), path, "ParseJson");
  }
  StatusOr<std::vector<data::Record>> csv = data::ParseCsv(path, input);
  if (csv.ok()) {
    CheckRecords(*csv, path, lines, true, "ParseCsv");
    for (const data::Record& r : *csv) {
      if (!r.value.is_object()) Broken("ParseCsv: a record that is not an object");
      for (const auto& item : r.value.items()) {
        if (!item.value().is_string()) Broken("ParseCsv: a value that is not a string");
      }
    }
  } else {
    CheckError(csv.status(), path, "ParseCsv");
  }
  std::vector<data::Record> text = data::ParseTextLines(path, input);
  CheckRecords(text, path, lines, true, "ParseTextLines");
  for (const data::Record& r : text) {
    if (!r.value.is_object() || r.value.size() != 1 || !r.value.contains("text") || !r.value["text"].is_string()) {
      Broken("ParseTextLines: a record that is not {\"text\": string}");
    }
    const std::string& line = r.value["text"].get_ref<const std::string&>();
    if (line.empty() || line.find('\n') != std::string::npos || line.back() == '\r') {
      Broken("ParseTextLines: an empty line, or one with its line break, was kept");
    }
  }
  return json.ok() && !json->empty();
}

std::vector<std::string> DatasetDictionary() {
  std::vector<std::string> words = JsonDictionary();
  for (const char* w : {"\r\n", "\r", "\"\"", ",\"", "\",", "\n\n", "\"instruction\"", "\"messages\"", "\"text\""}) {
    words.push_back(w);
  }
  return words;
}

const char* kHostileDatasets[] = {
    "[1, \"a,b\", {\"x\": [1, 2]}, \"\\\"]\", [], {}]",
    "[\n{\"a\": \"[\"},\n\n  {\"b\": \"\\\\\"}\n,{\"c\": 3}]\n",
    "{\"a\": 1}\n\n{\"b\": 2}\r\n  \n{\"c\": \"\xff\"}\n",
    "a,b\r\n1,2\r3,\"4\n5\"\n\"x\"\"y\",\n,,\n",
    "h\n\"never closed\n",
    "a,a,b\n1,2,3\n",
    "\r\r\n\rline\r\n\n",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    "  [ ]  ",
    "[1,]",
};

// Tokenizer files: the tokenizer readers take paths, so each input is written to files in a scratch folder of
// this process (the same paths every time), removed at exit. Its name is a plain array, still there when the exit
// handler runs (a static std::string constructed after the handler was registered is destroyed before it runs).
char g_scratch_dir[] = "/tmp/tm_fuzz_tokenizer.XXXXXX";

void RemoveScratchDir() {
  for (const char* file : {"tokenizer.json", "generation_config.json", "vocab.json", "merges.txt"}) {
    ::unlink((std::string(g_scratch_dir) + "/" + file).c_str());
  }
  ::rmdir(g_scratch_dir);
}

const std::string& ScratchDir() {
  static const std::string dir = [] {
    if (::mkdtemp(g_scratch_dir) == nullptr) {
      std::fprintf(stderr, "fuzz: cannot make a scratch folder under /tmp: %s\n", std::strerror(errno));
      std::abort();
    }
    std::atexit(RemoveScratchDir);
    return std::string(g_scratch_dir);
  }();
  return dir;
}

std::string ScratchFile(const std::string& name, const std::string& contents) {
  std::string path = ScratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// A loaded tokenizer must encode a short text (with its added tokens in it) to ids of its vocabulary, and decode
// them and any id without crashing.
void ExerciseTokenizer(const data::Tokenizer& tok) {
  std::string text = "Hello, world! 123 h\xc3\xa9llo \xe2\x96\x81x\n\t  \xf0\x9f\x98\x80 <s></s>";
  int added = 0;
  for (const auto& [token, id] : tok.special_tokens()) {
    if (++added > 4) break;
    text += token.substr(0, 64) + " a";
  }
  std::vector<int64_t> ids, with_ends;
  try {
    ids = tok.Encode(text, false, false);
    with_ends = tok.Encode(text, true, true);
  } catch (const data::TokenizeError&) {
    return;  // the tokenizer's own pattern hit PCRE2's match limit: the contract's one exception
  }
  const int64_t n = tok.vocab_size();
  for (int64_t id : ids) {
    if (id < 0 || id >= n) {
      Broken("Encode gave id " + std::to_string(id) + " of a vocabulary of " + std::to_string(n));
    }
  }
  for (int64_t id : with_ends) {
    if ((id < 0 || id >= n) && id != tok.bos_id() && id != tok.eos_id()) {
      Broken("Encode(add_bos, add_eos) gave id " + std::to_string(id) + " of a vocabulary of " + std::to_string(n));
    }
  }
  (void)tok.Decode(ids, true);
  (void)tok.Decode(with_ends, false);
  (void)tok.Decode({-5, n, n + 7, 0}, false);
  for (size_t i = 0; i < ids.size() && i < 16; ++i) (void)tok.Piece(ids[i]);
  (void)tok.Piece(-1);
  (void)tok.Piece(n);
}

// Between vocab.json and merges.txt in one input of the tokenizer_json target.
const char kMergesSeparator[] = "\n#merges.txt\n";

// A Hugging Face tokenizer.json (recipes/data/tokenizers/hf_tokenizer.h) with a fixed generation_config.json, or,
// when the input holds kMergesSeparator, a byte-level BPE vocab.json and merges.txt (byte_bpe.h).
bool RunTokenizerJson(const std::string& input) {
  size_t separator = input.find(kMergesSeparator);
  if (separator != std::string::npos) {
    std::string vocab = ScratchFile("vocab.json", input.substr(0, separator));
    std::string merges = ScratchFile("merges.txt", input.substr(separator + std::strlen(kMergesSeparator)));
    StatusOr<data::ByteBpeModel> model = data::LoadByteBpeFiles(vocab, merges);
    if (!model.ok()) return false;
    data::ByteBpeOptions options;
    options.model = std::move(model).value();
    options.source = vocab;
    options.special_tokens = {{"<|endoftext|>", 1000000}, {"<|im_start|>", 1000001}};
    StatusOr<std::unique_ptr<data::ByteBpeTokenizer>> tok = data::ByteBpeTokenizer::Create(std::move(options));
    if (!tok.ok()) return false;
    ExerciseTokenizer(**tok);
    return true;
  }
  static const std::string generation_config =
      ScratchFile("generation_config.json", "{\"bos_token_id\": 0, \"eos_token_id\": 1}");
  data::HfTokenizerOptions options;
  options.path = ScratchFile("tokenizer.json", input);
  options.generation_config_path = generation_config;
  StatusOr<std::unique_ptr<data::HfTokenizer>> tok = data::HfTokenizer::Load(options);
  if (!tok.ok()) return false;
  ExerciseTokenizer(**tok);
  (void)data::ReadHfAddedTokens(options.path);
  return true;
}

// A SentencePiece tokenizer.model: the library's own protobuf parse, then tune-matrix's reading of the pieces
// (sentencepiece_model.h) and, for unigram models, its segmentation of the library's normalized text.
bool RunSentencePieceModel(const std::string& input) {
  data::SentencePieceOptions options;
  options.path = ScratchFile("tokenizer.model", input);
  StatusOr<std::unique_ptr<data::SentencePieceTokenizer>> tok = data::SentencePieceTokenizer::Load(options);
  if (!tok.ok()) return false;
  ExerciseTokenizer(**tok);
  return true;
}

std::vector<std::string> SentencePieceSeeds(const std::string& source_dir) {
  std::vector<std::string> seeds;
  for (const char* file : {"recipes/data/samples/tokenizers/m.model", "recipes/data/testdata/sp_unigram_byte_fallback.model",
                           "recipes/data/testdata/sp_bpe_byte_fallback.model"}) {
    StatusOr<std::string> bytes = ReadFile(source_dir + "/" + file);
    if (bytes.ok()) seeds.push_back(*bytes);
  }
  return seeds;
}

std::vector<std::string> TokenizerDictionary() {
  std::vector<std::string> words = JsonDictionary();
  for (const char* w : {"\"type\"", "\"BPE\"", "\"ByteLevel\"", "\"Split\"", "\"Sequence\"", "\"Regex\"",
                        "\"String\"", "\"NFC\"", "\"Replace\"", "\"Prepend\"", "\"ByteFallback\"", "\"Fuse\"",
                        "\"Strip\"", "\"TemplateProcessing\"", "\"Isolated\"", "\"MergedWithPrevious\"",
                        "\"vocab\"", "\"merges\"", "\"added_tokens\"", "\"byte_fallback\"", "\"ignore_merges\"",
                        "\"unk_token\"", "\"<0x41>\"", "\"\\u0120\"", "\xc4\xa0", "\xe2\x96\x81", "(?:", ")*", "\\p{L}+",
                        "9223372036854775807", "-1", kMergesSeparator}) {
    words.push_back(w);
  }
  return words;
}

// vocab.json and merges.txt of a byte-level BPE: every printable ASCII byte, the space's symbol and a few merges.
std::string SmallByteBpeFiles() {
  std::string vocab = "{";
  int id = 0;
  const std::vector<std::string>& alphabet = data::ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    if (b != ' ' && (b < '!' || b > '~') && b != '\n') continue;
    std::string symbol = alphabet[static_cast<size_t>(b)];
    std::string escaped = symbol == "\"" ? "\\\"" : symbol == "\\" ? "\\\\" : symbol;
    vocab += (id ? ", \"" : "\"") + escaped + "\": " + std::to_string(id++);
  }
  vocab += ", \"he\": " + std::to_string(id++) + ", \"ll\": " + std::to_string(id++) +
           ", \"hell\": " + std::to_string(id++) + ", \"\xc4\xa0w\": " + std::to_string(id++) + "}";
  return vocab + kMergesSeparator + "#version: 0.2\nh e\nl l\nhe ll\n\xc4\xa0 w\n";
}

std::vector<std::string> TokenizerSeeds(const std::string& source_dir) {
  std::vector<std::string> seeds;
  for (const char* file : {"recipes/data/samples/tokenizers/tiny_bpe_tokenizer.json",
                           "recipes/data/samples/tokenizers/tokenizer_gemma_cropped.json",
                           "recipes/data/samples/tokenizers/tokenizer.json",
                           "recipes/data/testdata/tokenizer_byte_fallback.json"}) {
    StatusOr<std::string> text = ReadFile(source_dir + "/" + file);
    if (text.ok()) seeds.push_back(*text);
  }
  StatusOr<std::string> vocab = ReadFile(source_dir + "/recipes/data/samples/tokenizers/tiny_bpe_vocab.json");
  StatusOr<std::string> merges = ReadFile(source_dir + "/recipes/data/samples/tokenizers/tiny_bpe_merges.txt");
  if (vocab.ok() && merges.ok()) seeds.push_back(*vocab + kMergesSeparator + *merges);
  seeds.push_back(SmallByteBpeFiles());
  // Hostile: ids past int64, negative and huge added-token ids, a pattern that backtracks, empty parts.
  seeds.push_back(R"({"model": {"type": "BPE", "vocab": {"a": 9223372036854775807, "b": 0}, "merges": ["a b"]},)"
                  R"( "pre_tokenizer": null, "added_tokens": [{"id": -3, "content": "Hello", "special": true}]})");
  seeds.push_back(R"({"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1}, "merges": [["a", "a"]],)"
                  R"( "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true}, "pre_tokenizer": {"type": "Split",)"
                  R"( "pattern": {"String": ""}, "behavior": "MergedWithPrevious"}, "decoder": {"type": "Sequence",)"
                  R"( "decoders": [{"type": "Replace", "pattern": {"String": ""}, "content": "x"}, {"type": "ByteFallback"},)"
                  R"( {"type": "Fuse"}, {"type": "Strip", "content": "", "start": 99999, "stop": 0}]}})");
  seeds.push_back(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Split",)"
                  R"( "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated"}, "added_tokens": []})");
  seeds.push_back(std::string("{}") + kMergesSeparator);
  return seeds;
}

const char* kHostileYaml[] = {
    "a: &x [*x]\n",
    "a: &x\n  b: *x\n",
    "l0: &a0 [lol, lol]\nl1: &a1 [*a0, *a0, *a0]\nl2: &a2 [*a1, *a1, *a1]\n",
    "a: xx\nb: ${a}${a}${a}\nc: ${b}${b}${b}\nd: ${c}\n",
    "a: {x: '${a}'}\nb: ${a}\n",
    "m: &m {k: v}\nn: *m\no: {<<: *m}\n",
    "a: [[[[[[[[1]]]]]]]]\n",
};

const char* kHostileOverrides[] = {
    "batch_size=&x [*x]",         "model.lora_rank=${batch_size}\noutput_dir=${model}",
    "~model\nmodel=other\n~nope", "a.b.c.d.e.f=1\na.b=2\n~a.b.c",
    "x=[&a [1,2], *a, *a]",       "optimizer.lr=1e999\nbatch_size=-1\ndevice=",
};

}  // namespace

std::vector<FuzzTarget> AllTargets() {
  return {
      {"config", RunConfig, YamlDictionary(), 16 * 1024},
      {"override", RunOverrides, YamlDictionary(), 4 * 1024},
      {"journal", RunJournal, JsonDictionary(), 32 * 1024},
      {"writeback", RunWriteBack, YamlDictionary(), 16 * 1024},
      {"safetensors", RunSafetensors, SafetensorsDictionary(), 4 * 1024},
      {"dataset", RunDataset, DatasetDictionary(), 32 * 1024},
      // The largest seed (recipes/data/samples/tokenizers/tokenizer.json) is 155 KiB.
      {"tokenizer_json", RunTokenizerJson, TokenizerDictionary(), 192 * 1024},
      // m.model is 264 KiB; the trained byte-fallback models about 10 KiB.
      // A page of the Hub's tree listing (the Hub's are about 1,000 entries, 300 KiB; 64 KiB reaches every shape).
      {"hub_listing", RunHubListing, HubListingDictionary(), 64 * 1024},
      {"sentencepiece_model",
       RunSentencePieceModel,
       {"\x0a", "\x12", "\x18\x04", "\x18\x06", "\x15", "<0x41>", "\xe2\x96\x81"},
       288 * 1024},
  };
}

StatusOr<std::vector<std::string>> SeedCorpus(const std::string& target, const std::string& source_dir) {
  std::vector<std::string> seeds;
  if (target == "safetensors") return SafetensorsSeeds();
  if (target == "hub_listing") return HubListingSeeds();
  if (target == "tokenizer_json") return TokenizerSeeds(source_dir);
  if (target == "sentencepiece_model") return SentencePieceSeeds(source_dir);
  if (target == "dataset") {
    StatusOr<std::vector<std::string>> files =
        ListRegularFiles(source_dir + "/recipes/data/samples/datasets", "", nullptr);
    if (!files.ok()) return files.status();
    for (const std::string& path : *files) {
      StatusOr<std::string> text = ReadFile(path);
      if (!text.ok()) return text.status();
      seeds.push_back(*text);
    }
    seeds.insert(seeds.end(), std::begin(kHostileDatasets), std::end(kHostileDatasets));
    return seeds;
  }
  if (target == "journal") {
    StatusOr<std::string> journal = ReadFile(source_dir + "/reports/journal.jsonl");
    if (!journal.ok()) return journal.status();
    seeds.push_back(*journal);
    for (const std::string& line : Lines(*journal)) seeds.push_back(line + "\n");
    return seeds;
  }
  StatusOr<std::vector<std::string>> configs = ListRegularFiles(source_dir + "/configs", ".yaml", nullptr);
  if (!configs.ok()) return configs.status();
  for (const std::string& path : *configs) {
    StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    if (target != "override") {
      seeds.push_back(*text);
    } else {
      // An override per top-level scalar line: "key: value" becomes "key=value".
      std::string args;
      for (const std::string& line : Lines(*text)) {
        size_t colon = line.find(": ");
        if (colon != std::string::npos && !line.empty() && line[0] != ' ' && line[0] != '#') {
          args += line.substr(0, colon) + "=" + line.substr(colon + 2) + "\n";
        }
      }
      seeds.push_back(args);
    }
  }
  if (target != "override") seeds.insert(seeds.end(), std::begin(kHostileYaml), std::end(kHostileYaml));
  if (target == "override") seeds.insert(seeds.end(), std::begin(kHostileOverrides), std::end(kHostileOverrides));
  return seeds;
}

}  // namespace tmx::fuzz
