#include "recipes/checkpoint/safetensors.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "base/file_util.h"
#include "base/process_info.h"
#include "base/text.h"
#include "recipes/checkpoint/safetensors_header.h"
#include "tests/scratch_dir.h"

namespace tmx::checkpoint {
namespace {

using ::testing::HasSubstr;

// The bytes of a CPU tensor, for byte-exact comparisons.
std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

// Header length (8 bytes, little-endian) + header + data, as the format specifies.
std::string SafetensorsFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

const at::Tensor* Find(const NamedTensors& tensors, const std::string& name) {
  for (const auto& [n, t] : tensors) {
    if (n == name) return &t;
  }
  return nullptr;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string WriteRaw(const std::string& name, const std::string& bytes) {
    std::string path = Path(name);
    EXPECT_TRUE(WriteFileAtomically(path, bytes).ok());
    return path;
  }

  // The message of a load that must fail with InvalidArgument.
  std::string LoadError(const std::string& path) {
    StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
    EXPECT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().code(), Status::Code::kInvalidArgument);
    return loaded.status().message();
  }

  test::ScratchDir scratch_{"safetensors_test"};
  const std::string dir_ = scratch_.path();
};

TEST_F(SafetensorsTest, RoundTripIsByteExact) {
  torch::manual_seed(0);
  NamedTensors tensors = {
      {"f32", torch::randn({2, 3})},
      {"bf16", torch::randn({5}).to(torch::kBFloat16)},
      {"f16", torch::randn({2, 2}).to(torch::kHalf)},
      {"i64", torch::tensor({int64_t{1} << 40, int64_t{-7}, int64_t{0}}, torch::kLong)},
      {"scalar", torch::tensor(3.25)},
      {"empty", torch::zeros({0, 4})},
      {"mask", torch::tensor({true, false, true})},
      {"strided", torch::arange(12, torch::kFloat).view({3, 4}).t()},  // non-contiguous
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "100"}};
  std::string path = Path("model.safetensors");
  ASSERT_TRUE(SaveSafetensors(path, tensors, metadata).ok());

  StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->metadata, metadata);
  ASSERT_EQ(loaded->tensors.size(), tensors.size());
  for (const auto& [name, original] : tensors) {
    SCOPED_TRACE(name);
    const at::Tensor* t = Find(loaded->tensors, name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->scalar_type(), original.scalar_type());
    EXPECT_EQ(t->sizes(), original.sizes());
    EXPECT_TRUE(t->device().is_cpu());
    EXPECT_EQ(Bytes(*t), Bytes(original));
  }
  // Larger elements first, the caller's order otherwise; so the 8-byte tensors lead.
  EXPECT_EQ(loaded->tensors[0].first, "i64");
  EXPECT_EQ(loaded->tensors.back().first, "mask");
}

TEST_F(SafetensorsTest, HeaderIsPaddedWithSpacesAndDataIsAligned) {
  std::string path = Path("padded.safetensors");
  ASSERT_TRUE(SaveSafetensors(path, {{"a", torch::ones({3}, torch::kHalf)}, {"b", torch::ones({1}, torch::kDouble)}})
                  .ok());
  StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes->size(), 8 + n + 8 + 6);
  std::string header = bytes->substr(8, n);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"b":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
            R"("a":{"dtype":"F16","shape":[3],"data_offsets":[8,14]}})");
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);  // only written when there is metadata
}

TEST_F(SafetensorsTest, LoadsAFileWrittenByHand) {
  float f[2] = {1.5f, -2.0f};
  int64_t i = 7;
  uint16_t bf16 = 0x3FC0;  // 1.5 in bfloat16
  std::string data(reinterpret_cast<const char*>(f), 8);
  data += std::string(reinterpret_cast<const char*>(&i), 8);
  data += std::string(reinterpret_cast<const char*>(&bf16), 2);
  std::string header =
      R"({"__metadata__": {"author": "test"}, "w": {"dtype": "F32", "shape": [2, 1], "data_offsets": [0, 8]},)"
      R"( "n": {"dtype": "I64", "shape": [], "data_offsets": [8, 16]},)"
      R"( "h": {"dtype": "BF16", "shape": [1], "data_offsets": [16, 18]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string path = WriteRaw("hand.safetensors", SafetensorsFile(header, data));

  StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->metadata, (std::map<std::string, std::string>{{"author", "test"}}));
  ASSERT_EQ(loaded->tensors.size(), 3u);
  EXPECT_EQ(loaded->tensors[0].first, "w");  // file order
  EXPECT_EQ(loaded->tensors[1].first, "n");
  EXPECT_EQ(loaded->tensors[2].first, "h");
  EXPECT_TRUE(torch::equal(loaded->tensors[0].second, torch::tensor({1.5f, -2.0f}).view({2, 1})));
  EXPECT_EQ(loaded->tensors[1].second.dim(), 0);
  EXPECT_EQ(loaded->tensors[1].second.item<int64_t>(), 7);
  EXPECT_EQ(loaded->tensors[2].second.scalar_type(), torch::kBFloat16);
  EXPECT_EQ(loaded->tensors[2].second.item<float>(), 1.5f);
}

TEST_F(SafetensorsTest, BadFilesGiveClearErrors) {
  const std::string f32x2 = R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])";
  struct Case {
    std::string what;
    std::string header;
    size_t data_bytes;
    std::string expected;  // after "<path>: "
  };
  const std::vector<Case> cases = {
      {"not JSON", "{\"a\": ", 8, ""},
      {"number out of range", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 1e999]}})", 8,
       "the safetensors header:1:58: in w.data_offsets[1]: number 1e999 is out of range (a double holds magnitudes "
       "up to about 1.8e308); fix: write a number within that range, or regenerate the file"},
      {"not an object", "[1, 2]", 0,
       "the safetensors header is a JSON array, expected an object; the file is corrupt or not a safetensors file"},
      {"unknown dtype", R"({"w": {"dtype": "F7", "shape": [2], "data_offsets": [0, 8]}})", 8,
       "tensor \"w\": unknown dtype \"F7\" (known: BOOL U8 I8 I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 "
       "F8_E5M2 C64)"},
      {"missing dtype", R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8,
       "tensor \"w\": \"dtype\" is missing or not a string"},
      {"negative dim", R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
       "tensor \"w\": \"shape\" [-2] holds a value that is not a non-negative integer"},
      {"bad offsets", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8,
       "tensor \"w\": \"data_offsets\" must be [begin, end] with 0 <= begin <= end, got [8,0]"},
      {"size mismatch", R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8,
       "tensor \"w\": shape [3] of F32 needs 12 bytes, but data_offsets [0, 8] hold 8"},
      {"entry not an object", R"({"w": 5})", 0,
       "tensor \"w\": header entry is not an object with \"dtype\", \"shape\" and \"data_offsets\"; the file is "
       "not a valid safetensors file"},
      {"past the end", "{\"w\": {" + f32x2 + "}}", 6,
       "tensor \"w\": data_offsets [0, 8] run past the end of the data (6 bytes); the file is truncated or corrupt"},
      {"overlap", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                  R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
       12, "tensor \"b\": data_offsets [4, 12] overlap those of tensor \"a\" (which end at 8); the file is corrupt"},
      {"gap", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
              R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
       12, "tensor \"b\": data_offsets begin at 8, leaving a gap after byte 4; the file is corrupt"},
      {"trailing bytes", "{\"w\": {" + f32x2 + "}}", 11, "3 bytes of data follow the last tensor; the file is corrupt"},
      {"metadata not strings", "{\"__metadata__\": {\"step\": 3}, \"w\": {" + f32x2 + "}}", 8,
       "\"__metadata__\" value \"step\" is a JSON number, expected a string"},
      {"bool not 0/1", R"({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}})", 2,
       "tensor \"m\": BOOL data holds bytes other than 0 and 1; the file is corrupt"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string header = c.header;
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string path = WriteRaw("bad.safetensors", SafetensorsFile(header, std::string(c.data_bytes, '\x02')));
    std::string message = LoadError(path);
    if (c.expected.empty()) {
      EXPECT_THAT(message, HasSubstr(path + ": the safetensors header:1:9: invalid JSON (syntax error"));
    } else {
      EXPECT_EQ(message, path + ": " + c.expected);
    }
  }
}

TEST_F(SafetensorsTest, TruncatedAndTinyFiles) {
  std::string path = Path("t.safetensors");
  ASSERT_TRUE(SaveSafetensors(path, {{"layers.0.w", torch::ones({4, 4})}}).ok());
  StatusOr<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);

  // Cut inside the data: the tensor that no longer fits is named.
  std::string cut = WriteRaw("cut.safetensors", bytes->substr(0, bytes->size() - 10));
  EXPECT_EQ(LoadError(cut), cut + ": tensor \"layers.0.w\": data_offsets [0, 64] run past the end of the data (54 "
                                  "bytes); the file is truncated or corrupt");

  // Cut inside the header.
  std::string in_header = WriteRaw("h.safetensors", bytes->substr(0, 20));
  EXPECT_EQ(LoadError(in_header), in_header + ": header length " + std::to_string(n) +
                                      " is larger than the 12 bytes that follow it; the file is truncated or not "
                                      "a safetensors file");

  std::string tiny = WriteRaw("tiny.safetensors", "abc");
  EXPECT_EQ(LoadError(tiny), tiny + ": only 3 bytes, too short for a safetensors file (it starts with an 8-byte "
                                    "header length); the file is truncated or not a safetensors file");

  std::string huge = WriteRaw("huge.safetensors", std::string(8, '\x7f') + "{}      ");
  EXPECT_THAT(LoadError(huge), HasSubstr(": header length 9187201950435737471 is larger than the 8 bytes"));

  StatusOr<LoadedSafetensors> missing = LoadSafetensors(Path("nope.safetensors"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(missing.status().message(), Path("nope.safetensors") + ": no such file");
}

// A FIFO with no writer named model.safetensors used to block the reader in open() forever; it is refused
// from its kind, at once.
TEST_F(SafetensorsTest, AFifoOrAFolderIsRefusedNotWaitedOn) {
  const std::string fifo = Path("model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(LoadError(fifo), fifo + ": is a FIFO, not a regular file; fix: pass a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  ASSERT_EQ(::mkdir(Path("folder.safetensors").c_str(), 0755), 0);
  EXPECT_EQ(LoadError(Path("folder.safetensors")),
            Path("folder.safetensors") + ": is a folder, not a regular file; fix: pass a regular file");
}

// A valid header over a sparse file twice the machine's memory: refused from its size before any allocation
// (it used to allocate the tensor and meet the OOM killer), naming the file and both sizes.
TEST_F(SafetensorsTest, TensorsLargerThanTheMachinesMemoryAreRefusedBeforeAllocating) {
  const int64_t memory = MachineMemoryBytes();
  ASSERT_GT(memory, 0);
  const uint64_t bytes = 2 * static_cast<uint64_t>(memory);
  std::string header = R"({"w": {"dtype": "U8", "shape": [)" + std::to_string(bytes) + R"(], "data_offsets": [0, )" +
                       std::to_string(bytes) + "]}}";
  std::string path = WriteRaw("huge.safetensors", SafetensorsFile(header, ""));
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(8 + header.size() + bytes)), 0);  // sparse: no blocks
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(LoadError(path), path + ": its tensors hold " + FormatBytes(static_cast<int64_t>(bytes)) +
                                 ", more than this machine's " + FormatBytes(memory) +
                                 " of memory, so they cannot be loaded here; fix: check the file (a sparse or damaged "
                                 "file declares tensors it does not hold) or load the model on a machine with more "
                                 "memory");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(CheckTensorsFitInMemory(path, 100, 100).ok());
  EXPECT_FALSE(CheckTensorsFitInMemory(path, 101, 100).ok());
  EXPECT_TRUE(CheckTensorsFitInMemory(path, 1ull << 62, 0).ok());  // memory unknown: nothing refused
}

// The torch-free header checks (safetensors_header.h) and this reader's LibTorch types agree on every dtype's
// element size: a tensor of each loads with the size the header was checked with.
TEST_F(SafetensorsTest, EveryDtypeOfTheHeaderLoadsWithItsElementSize) {
  for (const SafetensorsDtype& d : SafetensorsDtypes()) {
    std::string header = std::string(R"({"x": {"dtype": ")") + d.name + R"(", "shape": [3], "data_offsets": [0, )" +
                         std::to_string(3 * d.bytes) + "]}}";
    std::string path =
        WriteRaw(std::string(d.name) + ".safetensors", SafetensorsFile(header, std::string(3 * d.bytes, '\0')));
    StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded->tensors.at(0).second.element_size(), static_cast<int64_t>(d.bytes)) << d.name;
  }
}

TEST_F(SafetensorsTest, EmptyFileOfTensorsRoundTrips) {
  std::string path = Path("none.safetensors");
  ASSERT_TRUE(SaveSafetensors(path, {}, {{"note", "nothing"}}).ok());
  StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->tensors.empty());
  EXPECT_EQ(loaded->metadata.at("note"), "nothing");
}

TEST_F(SafetensorsTest, SaveRejectsWhatTheFormatCannotHold) {
  std::string path = Path("x.safetensors");
  struct Case {
    NamedTensors tensors;
    std::string expected;  // after "<path>: "
  };
  const std::vector<Case> cases = {
      {{{"a", torch::ones({1})}, {"a", torch::ones({1})}}, "tensor \"a\" is given twice; fix: name each tensor once"},
      {{{"", torch::ones({1})}},
       "tensor name \"\" is not allowed; fix: give every tensor a non-empty name other than \"__metadata__\""},
      {{{"__metadata__", torch::ones({1})}},
       "tensor name \"__metadata__\" is not allowed; fix: give every tensor a non-empty name other than "
       "\"__metadata__\""},
      {{{"u", at::Tensor()}}, "tensor \"u\" is undefined; fix: leave it out"},
      {{{"c", torch::ones({1}, torch::kComplexDouble)}},
       "tensor \"c\" has dtype ComplexDouble, which safetensors cannot store; fix: convert it to one of BOOL U8 I8 "
       "I16 U16 I32 U32 I64 U64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 C64"},
      {{{"s", torch::eye(2).to_sparse()}}, "tensor \"s\" is not dense; fix: convert it with to_dense() before saving"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    Status s = SaveSafetensors(path, c.tensors);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message(), path + ": " + c.expected);
  }
  Status s = SaveSafetensors(Path("no/such/dir.safetensors"), {{"a", torch::ones({1})}});
  EXPECT_EQ(s.code(), Status::Code::kIoError);
}

// ---- LoadIntoModule ------------------------------------------------------------------------------------

struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    scale = register_parameter("scale", torch::ones({3}));
    running = register_buffer("running", torch::zeros({3}));
  }
  torch::Tensor scale, running;
};
TORCH_MODULE(Block);

struct NetImpl : torch::nn::Module {
  NetImpl() {
    proj = register_module("proj", torch::nn::Linear(4, 3));
    layers = register_module("layers", torch::nn::ModuleList(Block(), Block()));
  }
  torch::nn::Linear proj{nullptr};
  torch::nn::ModuleList layers{nullptr};
};
TORCH_MODULE(Net);

// A checkpoint for Net with every value distinct from a fresh Net's, in double precision.
NamedTensors Checkpoint() {
  return {
      {"layers.1.running", torch::full({3}, 7.0, torch::kDouble)},
      {"proj.weight", torch::arange(12, torch::kDouble).view({3, 4})},
      {"proj.bias", torch::full({3}, -1.0, torch::kDouble)},
      {"layers.0.scale", torch::full({3}, 2.0, torch::kDouble)},
      {"layers.0.running", torch::full({3}, 5.0, torch::kDouble)},
      {"layers.1.scale", torch::full({3}, 3.0, torch::kDouble)},
  };
}

NamedTensors Without(NamedTensors tensors, const std::string& name) {
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& p) { return p.first == name; }),
                tensors.end());
  return tensors;
}

TEST(LoadIntoModuleTest, ModuleTensorsNamesParametersThenBuffers) {
  Net net;
  std::vector<std::string> names;
  for (const auto& [name, t] : ModuleTensors(*net)) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"proj.weight", "proj.bias", "layers.0.scale", "layers.1.scale",
                                             "layers.0.running", "layers.1.running"}));
}

TEST(LoadIntoModuleTest, CopiesValuesConvertingDtype) {
  Net net;
  ASSERT_TRUE(LoadIntoModule(*net, Checkpoint()).ok());
  EXPECT_EQ(net->proj->weight.scalar_type(), torch::kFloat);
  EXPECT_TRUE(net->proj->weight.requires_grad());
  EXPECT_TRUE(torch::equal(net->proj->weight, torch::arange(12, torch::kFloat).view({3, 4})));
  EXPECT_TRUE(torch::equal(net->proj->bias, torch::full({3}, -1.0f)));
  auto block1 = net->layers[1]->as<BlockImpl>();
  EXPECT_TRUE(torch::equal(block1->scale, torch::full({3}, 3.0f)));
  EXPECT_TRUE(torch::equal(block1->running, torch::full({3}, 7.0f)));
}

TEST(LoadIntoModuleTest, SaveLoadRoundTripThroughAFile) {
  char tmpl[] = "/tmp/safetensors_module.XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::string path = tmpl;
  torch::manual_seed(1);
  Net a;
  torch::manual_seed(2);
  Net b;
  ASSERT_FALSE(torch::equal(a->proj->weight, b->proj->weight));
  ASSERT_TRUE(SaveSafetensors(path, ModuleTensors(*a)).ok());
  StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_TRUE(LoadIntoModule(*b, loaded->tensors).ok());
  NamedTensors ta = ModuleTensors(*a), tb = ModuleTensors(*b);
  for (size_t i = 0; i < ta.size(); ++i) EXPECT_TRUE(torch::equal(ta[i].second, tb[i].second)) << ta[i].first;
}

TEST(LoadIntoModuleTest, MismatchesNameTheFirstBadTensorAndLeaveTheModuleUnchanged) {
  const std::string fix_strict = "; fix: load a checkpoint of this model, or load with strict=false to ";
  NamedTensors bad_shape = Checkpoint();
  bad_shape[1].second = torch::zeros({3, 5}, torch::kDouble);  // proj.weight
  bad_shape[3].second = torch::zeros({4}, torch::kDouble);     // layers.0.scale: later, not reported
  NamedTensors extra = Checkpoint();
  extra.emplace_back("layers.2.scale", torch::ones({3}));
  extra.emplace_back("head.weight", torch::ones({3}));
  NamedTensors twice = Checkpoint();
  twice.emplace_back("proj.bias", torch::ones({3}));

  struct Case {
    std::string what;
    NamedTensors tensors;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"shape", bad_shape,
       "proj.weight: shape [3, 5] in the checkpoint, [3, 4] in the model; fix: build the model with the "
       "configuration the checkpoint was saved from"},
      {"missing", Without(Without(Checkpoint(), "layers.1.running"), "layers.0.scale"),
       "layers.0.scale: in the model but not in the checkpoint" + fix_strict + "keep the model's value"},
      {"unexpected", extra, "layers.2.scale: in the checkpoint but not in the model" + fix_strict + "ignore it"},
      {"twice", twice, "proj.bias: the checkpoint holds this tensor twice; fix: name each tensor once"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Net net;
    at::Tensor before = net->proj->weight.clone();
    Status s = LoadIntoModule(*net, c.tensors);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message(), c.expected);
    EXPECT_TRUE(torch::equal(net->proj->weight, before));
  }
}

TEST(LoadIntoModuleTest, AnIntegerTensorIntoAFloatWeightIsRefusedNamingIt) {
  // An I32 tensor of the right shape was converted into the float32 weight without a word.
  NamedTensors ints = Checkpoint();
  ints[1].second = torch::arange(12, torch::kInt).view({3, 4});  // proj.weight
  Net net;
  at::Tensor before = net->proj->weight.clone();
  Status s = LoadIntoModule(*net, ints);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("proj.weight: Int values in the checkpoint, a Float tensor in the model"));
  EXPECT_THAT(s.message(), HasSubstr("fix: load a checkpoint saved from this model"));
  EXPECT_TRUE(torch::equal(net->proj->weight, before)) << "nothing copied";
}

TEST(LoadIntoModuleTest, NonStrictSkipsMissingAndUnexpectedButNotShapes) {
  Net net;
  at::Tensor scale_before = net->layers[0]->as<BlockImpl>()->scale.clone();
  NamedTensors tensors = Without(Checkpoint(), "layers.0.scale");
  tensors.emplace_back("head.weight", torch::ones({3}));
  ASSERT_TRUE(LoadIntoModule(*net, tensors, /*strict=*/false).ok());
  EXPECT_TRUE(torch::equal(net->layers[0]->as<BlockImpl>()->scale, scale_before));
  EXPECT_TRUE(torch::equal(net->proj->bias, torch::full({3}, -1.0f)));

  tensors[0].second = torch::zeros({2});  // layers.1.running
  Status s = LoadIntoModule(*net, tensors, /*strict=*/false);
  EXPECT_THAT(s.message(), HasSubstr("layers.1.running: shape [2] in the checkpoint, [3] in the model"));

  NamedTensors prefixed;
  for (const auto& [name, t] : Checkpoint()) prefixed.emplace_back("model." + name, t);
  s = LoadIntoModule(*net, prefixed, /*strict=*/false);
  EXPECT_EQ(s.message(), "none of the 6 checkpoint tensors matches a model tensor (checkpoint names look like "
                         "\"model.layers.1.running\", model names like \"proj.weight\"); fix: save and load with "
                         "the same names");
}

TEST(LoadIntoModuleTest, CudaTensorsSaveAndLoad) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device on this machine";
  char tmpl[] = "/tmp/safetensors_cuda.XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::string path = tmpl;
  Net net;
  net->to(torch::kCUDA);
  ASSERT_TRUE(LoadIntoModule(*net, Checkpoint()).ok());
  EXPECT_TRUE(net->proj->weight.is_cuda());
  ASSERT_TRUE(SaveSafetensors(path, ModuleTensors(*net)).ok());
  StatusOr<LoadedSafetensors> loaded = LoadSafetensors(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const at::Tensor* w = Find(loaded->tensors, "proj.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(torch::equal(*w, torch::arange(12, torch::kFloat).view({3, 4})));
}

}  // namespace
}  // namespace tmx::checkpoint
