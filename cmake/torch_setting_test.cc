// The torch setting (scripts/torch_version.sh for the scripts, cmake/TorchSetting.cmake for the build) and the
// wheel's library folders (cmake/wheel_library_dirs.py, which cmake/FindLibTorch.cmake gives the linker):
// the two readers of the setting agree on every input, the folders come from the packages' metadata, and this
// program, linked like every other, loads the libraries of the wheel it was built against.
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/text.h"
#include "tests/cli_exec.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

const std::string kRoot = TM_SOURCE_DIR;

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs of white space as one space: CMake wraps its messages.
std::string OneLine(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool space = c == ' ' || c == '\n' || c == '\t';
    if (!space) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  return out;
}

void Write(const std::string& path, const std::string& text) {
  ASSERT_TRUE(MakeDirs(path.substr(0, path.rfind('/'))).ok()) << path;
  Status written = WriteFileAtomically(path, text);
  ASSERT_TRUE(written.ok()) << written.ToString();
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

// ---------------------------------------------------------------------------------------------------------
// One setting, two readers

// A scratch checkout holding the two readers and, unless `file` is null, a torch-version file.
class SettingCheckout {
 public:
  explicit SettingCheckout(const char* file) {
    for (const char* reader : {"scripts/torch_version.sh", "cmake/TorchSetting.cmake"}) {
      StatusOr<std::string> text = ReadFile(kRoot + "/" + reader);
      EXPECT_TRUE(text.ok()) << reader;
      Write(root_ + "/" + reader, text.ok() ? *text : "");
    }
    if (file != nullptr) Write(root_ + "/torch-version", file);
  }

  // What each reader gives: "version=<v>\nvenv=<path>\n", or "error: <its message>" when it refuses.
  std::string Shell(const std::vector<std::pair<std::string, std::string>>& env) const {
    test::Result r = test::Exec({"bash", "-c",
                                 "source '" + root_ + "/scripts/torch_version.sh' && "
                                 "v=$(torch_version) && e=$(torch_venv) && printf 'version=%s\\nvenv=%s\\n' \"$v\" \"$e\""},
                                env, 60);
    return r.code == 0 ? r.output : "error: " + r.output;
  }
  std::string CMake(const std::vector<std::pair<std::string, std::string>>& env) const {
    test::Result r = test::Exec({"cmake", "-DROOT=" + root_, "-P", root_ + "/cmake/TorchSetting.cmake"}, env, 60);
    return r.code == 0 ? r.output : "error: " + r.output;
  }
  const std::string& root() const { return root_; }

 private:
  test::ScratchDir scratch_{"torch_setting_test"};
  std::string root_ = scratch_.path() + "/checkout";
};

struct SettingCase {
  const char* name;
  const char* file;  // the torch-version file, or null for none
  std::vector<std::pair<std::string, std::string>> env;
  std::string want;  // "version=...\nvenv=...\n", or "error: " and a part the message must hold
};

TEST(TorchSetting, TheScriptsAndCMakeReadTheSameVersionAndVenv) {
  const char* kFile = "# the pinned version\n\n  2.11.0  \n2.99.0\n";
  const std::vector<std::pair<std::string, std::string>> kHome = {
      {"HOME", "/home/t"}, {"TUNE_MATRIX_TORCH_VERSION", ""}, {"TUNE_MATRIX_VENV", ""}};
  // kHome with `more` replacing or adding variables (each name once: a child's getenv takes the first).
  auto with = [&](const std::map<std::string, std::string>& more) {
    std::map<std::string, std::string> env(kHome.begin(), kHome.end());
    for (const auto& kv : more) env[kv.first] = kv.second;
    return std::vector<std::pair<std::string, std::string>>(env.begin(), env.end());
  };
  const std::vector<SettingCase> cases = {
      {"the file's first line that is not a comment", kFile, kHome,
       "version=2.11.0\nvenv=/home/t/.cache/tune-matrix/venv-torch-2.11.0\n"},
      {"the environment over the file", kFile, with({{"TUNE_MATRIX_TORCH_VERSION", "2.15.0"}}),
       "version=2.15.0\nvenv=/home/t/.cache/tune-matrix/venv-torch-2.15.0\n"},
      {"TUNE_MATRIX_VENV names the venv", kFile, with({{"TUNE_MATRIX_VENV", "/opt/venv"}}),
       "version=2.11.0\nvenv=/opt/venv\n"},
      {"the environment without a file", nullptr, with({{"TUNE_MATRIX_TORCH_VERSION", "2.13.1"}}),
       "version=2.13.1\nvenv=/home/t/.cache/tune-matrix/venv-torch-2.13.1\n"},
      {"a version that is not a release", kFile, with({{"TUNE_MATRIX_TORCH_VERSION", "2.15"}}),
       "error: TUNE_MATRIX_TORCH_VERSION gives '2.15', not a release"},
      {"no file", nullptr, kHome, "error: torch-version is missing"},
      {"a file of comments only", "# nothing\n", kHome, "error: torch-version gives '', not a release"},
      {"a file naming no release", "latest\n", kHome, "error: torch-version gives 'latest', not a release"},
  };
  for (const SettingCase& c : cases) {
    SettingCheckout checkout(c.file);
    const std::string shell = checkout.Shell(c.env);
    const std::string cmake = checkout.CMake(c.env);
    if (StartsWith(c.want, "error: ")) {
      const std::string part = c.want.substr(7);
      EXPECT_TRUE(StartsWith(shell, "error: ") && Contains(OneLine(shell), part)) << c.name << ": the script gave\n"
                                                                                 << shell;
      EXPECT_TRUE(StartsWith(cmake, "error: ") && Contains(OneLine(cmake), part)) << c.name << ": CMake gave\n"
                                                                                 << cmake;
    } else {
      EXPECT_EQ(shell, c.want) << c.name << " (scripts/torch_version.sh)";
      EXPECT_EQ(cmake, c.want) << c.name << " (cmake/TorchSetting.cmake)";
    }
  }
}

TEST(TorchSetting, TheCheckoutPinsASupportedReleaseAndTheReadmeSaysWhichAre) {
  SettingCheckout checkout(nullptr);
  StatusOr<std::string> pinned = ReadFile(kRoot + "/torch-version");
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  Write(checkout.root() + "/torch-version", *pinned);
  const std::string got = checkout.CMake({{"TUNE_MATRIX_TORCH_VERSION", ""}, {"TUNE_MATRIX_VENV", ""}});
  ASSERT_TRUE(StartsWith(got, "version=")) << got;
  const std::string version = got.substr(8, got.find('\n') - 8);
  const std::string minor = version.substr(0, version.rfind('.'));
  // cmake/FindLibTorch.cmake's range (it warns outside it), compared as numbers.
  auto number = [](const std::string& v) { return std::stoi(v.substr(0, v.find('.'))) * 1000 + std::stoi(v.substr(v.find('.') + 1)); };
  EXPECT_GE(number(minor), number(TM_TORCH_OLDEST)) << version;
  EXPECT_LE(number(minor), number(TM_TORCH_NEWEST)) << version;
  StatusOr<std::string> readme = ReadFile(kRoot + "/README.md");
  ASSERT_TRUE(readme.ok());
  const std::string range = std::string("torch ") + TM_TORCH_OLDEST + " to " + TM_TORCH_NEWEST;
  EXPECT_TRUE(Contains(*readme, range)) << "README.md should state the supported versions: " << range;
}

// ---------------------------------------------------------------------------------------------------------
// The wheel's library folders, from its metadata

// A site-packages folder of made-up distributions: <name>-<v>.dist-info/{METADATA,RECORD} and the files.
class SitePackages {
 public:
  void Add(const std::string& name, const std::vector<std::string>& requires_dist,
           const std::vector<std::string>& files) {
    std::string dist = name;
    for (char& c : dist) {
      if (c == '-') c = '_';
    }
    const std::string info = path_ + "/" + dist + "-1.0.dist-info";
    std::string metadata = "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n";
    for (const std::string& r : requires_dist) metadata += "Requires-Dist: " + r + "\n";
    Write(info + "/METADATA", metadata);
    std::string record;
    for (const std::string& f : files) {
      Write(path_ + "/" + f, "");
      record += f + ",,\n";
    }
    Write(info + "/RECORD", record + dist + "-1.0.dist-info/METADATA,,\n");
  }

  test::Result Folders() const {
    return test::Exec({"python3", kRoot + "/cmake/wheel_library_dirs.py", path_}, {}, 60);
  }
  std::string Real(const std::string& folder) const { return RealPath(path_) + "/" + folder; }

 private:
  test::ScratchDir scratch_{"wheel_library_dirs"};
  std::string path_ = scratch_.path() + "/site-packages";
};

TEST(WheelLibraryDirs, FollowsTorchsRequirementsAndTheExtrasAskedFor) {
  SitePackages site;
  site.Add("torch",
           {"filelock", "cuda-toolkit[cublas]==13.0; platform_system == \"Linux\"", "nvidia-nccl-cu13==2.30",
            "Not_Installed>=1", "optree>=0.13; extra == \"optree\""},
           {"torch/__init__.py", "torch/lib/libtorch_cuda.so", "torch/lib/libc10.so",
            "torch/_C.cpython-311-x86_64-linux-gnu.so"});
  site.Add("filelock", {}, {"filelock/__init__.py"});
  // The metapackage: a library dist per extra, only the asked ones count.
  site.Add("cuda-toolkit", {"nvidia-cublas==13; extra == \"cublas\"", "nvidia-cufft==12; extra == \"cufft\""},
           {"cuda_toolkit/__init__.py"});
  site.Add("nvidia-cublas", {"nvidia-nccl-cu13"}, {"nvidia/cu13/lib/libcublas.so.13", "nvidia/cu13/lib/libcublasLt.so.13"});
  site.Add("nvidia-cufft", {}, {"nvidia/cufft/lib/libcufft.so.12"});
  // Names compare as pip compares them (PEP 503): nvidia-nccl-cu13 is this one.
  site.Add("NVIDIA_nccl.cu13", {"torch"}, {"nvidia/nccl/lib/libnccl.so.2", "nvidia/nccl/include/nccl.h"});
  site.Add("optree", {}, {"optree/lib/liboptree.so"});
  site.Add("triton", {}, {"triton/lib/libtriton.so"});  // installed, but torch does not require it here

  test::Result r = site.Folders();
  ASSERT_EQ(r.code, 0) << r.output;
  // Depth first: what cuda-toolkit brings comes before the next requirement of torch.
  EXPECT_EQ(r.output, site.Real("torch/lib") + "\n" + site.Real("nvidia/cu13/lib") + "\n" +
                          site.Real("nvidia/nccl/lib") + "\n");
}

TEST(WheelLibraryDirs, NamesThePathWhenNoTorchIsInstalled) {
  // An interpreter whose own path has no torch either: the test's environment must not decide.
  test::Result r = test::Exec({"python3", "-S", kRoot + "/cmake/wheel_library_dirs.py", "/nonexistent"}, {}, 60);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "no torch distribution installed in /nonexistent")) << r.output;
}

// ---------------------------------------------------------------------------------------------------------
// This build

// The folders cmake/FindLibTorch.cmake gave the linker ("" when LibTorch came from no wheel).
std::vector<std::string> WheelLibraryDirs() {
  return std::string(TM_WHEEL_LIBRARY_DIRS).empty() ? std::vector<std::string>{} : SplitList(TM_WHEEL_LIBRARY_DIRS, ':');
}

// The path of each shared object this process has mapped whose file name starts with `soname`.
std::vector<std::string> Loaded(const std::string& soname) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> paths;
  std::string line;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string name = path.substr(path.rfind('/') + 1);
    if (StartsWith(name, soname) && (paths.empty() || paths.back() != path)) paths.push_back(path);
  }
  return paths;
}

TEST(ThisBuild, LoadsTheWheelsOwnLibrariesNotTheMachines) {
  std::vector<std::string> dirs = WheelLibraryDirs();
  if (dirs.empty()) GTEST_SKIP() << "LibTorch came from no wheel: the linker was given no folders";
  std::vector<std::string> nccl = Loaded("libnccl.so");
  if (nccl.empty()) GTEST_SKIP() << "this LibTorch loads no NCCL (a CPU-only wheel)";
  for (const std::string& path : nccl) {
    bool from_wheel = false;
    for (const std::string& dir : dirs) from_wheel = from_wheel || StartsWith(RealPath(path), RealPath(dir) + "/");
    EXPECT_TRUE(from_wheel) << path << " is not in the wheel's folders:\n" << JoinStrings(dirs, "\n");
  }
}

}  // namespace
}  // namespace tmx
