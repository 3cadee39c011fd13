#include "fuzz/targets.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "base/clock.h"
#include "base/file_util.h"
#include "base/folder.h"
#include "fuzz/mutator.h"
#include "harness/config.h"
#include "harness/yaml_bounds.h"
#include "matrix/journal.h"
#include "matrix/junit.h"
#include "matrix/merge.h"
#include "matrix/support_block.h"
#include "recipes/checkpoint/safetensors_header.h"

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
  (void)matrix::LatestByDeviceType(*cells);
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
      !CheckYamlBoundsAllDocuments(matrix::StripGeneratedBlock(input), where).ok()) {
    return false;
  }
  (void)matrix::ReadConfigSupport(input, "fuzz.yaml");
  StatusOr<std::string> updated = matrix::UpdateSupport(input, {{"cpu", matrix::SupportFromCell(cell)}}, "fuzz.yaml");
  if (!updated.ok()) return false;
  if (matrix::StripGeneratedBlock(*updated) != matrix::StripGeneratedBlock(input)) {
    Broken("write-back changed bytes outside its block");
  }
  StatusOr<matrix::ConfigSupport> claims = matrix::ReadConfigSupport(*updated, "fuzz.yaml");
  if (!claims.ok()) Broken("a written block does not read back: " + claims.status().message());
  StatusOr<std::string> again = matrix::UpdateSupport(*updated, {{"cpu", matrix::SupportFromCell(cell)}}, "f");
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
  };
}

StatusOr<std::vector<std::string>> SeedCorpus(const std::string& target, const std::string& source_dir) {
  std::vector<std::string> seeds;
  if (target == "safetensors") return SafetensorsSeeds();
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
