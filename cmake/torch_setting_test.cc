// The torch setting (scripts/torch_version.sh for the scripts, cmake/TorchSetting.cmake for the build): the two
// readers agree on every input.
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

}  // namespace
}  // namespace tmx
