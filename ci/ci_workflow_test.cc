// Checks what the CI that runs the support matrix does: ci/run-device, and the journal flow from the device
// jobs of .github/workflows into the final job's check and merge. A workflow GitHub accepts can still lose
// evidence (a device job the final job does not wait for, a skipped shard, an upload skipped on failure,
// journals the merge never sees); its layout otherwise (triggers, runner labels, step order) is free to
// change. ci/run-device runs for real, from a copy in a
// scratch checkout whose setup, build and tune-matrix are stand-ins that log their arguments.
#include <dirent.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "base/file_util.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "tests/scratch_dir.h"

namespace tmx {
namespace {

const std::string kRoot = TM_SOURCE_DIR;
const std::string kWorkflowsDir = kRoot + "/.github/workflows";
const std::string kRunDevice = kRoot + "/ci/run-device";

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The file's text, or "" when it cannot be read: the expectation on it then fails, not the test program.
std::string Text(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path);
  return text.ok() ? *text : "";
}

std::vector<std::string> WorkflowFiles() {
  std::vector<std::string> files;
  DIR* dir = ::opendir(kWorkflowsDir.c_str());
  if (dir == nullptr) return files;
  while (const dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (EndsWith(name, ".yml") || EndsWith(name, ".yaml")) files.push_back(kWorkflowsDir + "/" + name);
  }
  ::closedir(dir);
  std::sort(files.begin(), files.end());
  return files;
}

// ---------------------------------------------------------------------------------------------------------
// Shell lines in `run:` steps

// Whitespace separates, quotes group, and `${{ ... }}` stays one piece with whatever touches it
// (`${{ matrix.shard }}/2` is one word).
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (line.compare(i, 3, "${{") == 0) {
      size_t end = line.find("}}", i);
      end = end == std::string::npos ? line.size() : end + 2;
      word += line.substr(i, end - i);
      in_word = true;
      i = end - 1;
    } else if (c == '\'' || c == '"') {
      size_t end = line.find(c, i + 1);
      if (end == std::string::npos) end = line.size();
      word += line.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// `--name value` and `--name=value` options (`switches` take no value), and positional words.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> options;

  bool Has(const std::string& name) const { return options.count(name) > 0; }
  std::string Get(const std::string& name) const {
    auto it = options.find(name);
    return it == options.end() ? "" : it->second;
  }
};

Args ParseArgs(const std::vector<std::string>& words, const std::set<std::string>& switches = {}) {
  Args a;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (!StartsWith(w, "--")) {
      a.positional.push_back(w);
    } else if (Contains(w, "=")) {
      a.options[w.substr(0, w.find('='))] = w.substr(w.find('=') + 1);
    } else if (switches.count(w) == 0 && i + 1 < words.size() && !StartsWith(words[i + 1], "--")) {
      a.options[w] = words[++i];
    } else {
      a.options[w] = "";
    }
  }
  return a;
}

// The words after `program` [`subcommand`] on the first line of `script` that runs them (continuation
// lines joined); false when none does.
bool FindInvocation(const std::string& script, const std::string& program, const std::string& subcommand,
                    std::vector<std::string>* after) {
  std::istringstream lines(std::regex_replace(script, std::regex("\\\\\n"), " "));
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> w = Words(line);
    for (size_t i = 0; i < w.size(); ++i) {
      if (w[i] != program && !EndsWith(w[i], "/" + program)) continue;
      size_t next = i + 1;
      if (!subcommand.empty()) {
        if (next >= w.size() || w[next] != subcommand) continue;
        ++next;
      }
      after->assign(w.begin() + next, w.end());
      return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------
// The workflow

std::string Str(const YAML::Node& n) { return n && n.IsScalar() ? n.as<std::string>() : ""; }

// An undefined node when a key is missing: yaml-cpp throws on indexing a missing key's result, and a broken
// workflow should fail an expectation, not crash the test.
YAML::Node At(const YAML::Node& node, std::initializer_list<std::string> keys) {
  YAML::Node n = node;
  for (const std::string& k : keys) {
    if (!n || !n.IsMap() || !n[k]) return YAML::Node(YAML::NodeType::Undefined);
    n.reset(static_cast<const YAML::Node&>(n)[k]);  // reset, not =: Node::operator= writes into the tree
  }
  return n;
}

std::string Show(const YAML::Node& n) { return n ? YAML::Dump(n) : "(missing)"; }

// `if: always()` in either spelling GitHub accepts.
// Whether a step or job runs after an earlier failure: `always()` or `!cancelled()` (which also skips a
// cancelled run), possibly with further conditions, but not gated on success() or failure().
bool IsAlways(const YAML::Node& condition) {
  std::string s = std::regex_replace(Str(condition), std::regex("\\s+"), "");
  bool after_failure = Contains(s, "always()") || Contains(s, "!cancelled()");
  return after_failure && !Contains(s, "success()") && !Contains(s, "failure()");
}

// A `runs-on` or `needs`: one label or a list.
std::vector<std::string> Labels(const YAML::Node& runs_on) {
  std::vector<std::string> labels;
  if (runs_on && runs_on.IsScalar()) labels.push_back(runs_on.as<std::string>());
  if (runs_on && runs_on.IsSequence()) {
    for (const auto& l : runs_on) labels.push_back(Str(l));
  }
  return labels;
}

// Index of the first step from `from` using `action` (e.g. "actions/checkout"), or -1.
int FindUses(const YAML::Node& job, const std::string& action, int from = 0) {
  const YAML::Node steps = job["steps"];
  for (int i = from; steps && i < static_cast<int>(steps.size()); ++i) {
    if (StartsWith(Str(steps[i]["uses"]), action + "@")) return i;
  }
  return -1;
}

// Index of the first step whose `run` invokes `program` [`subcommand`], or -1.
int FindRun(const YAML::Node& job, const std::string& program, const std::string& subcommand,
            std::vector<std::string>* after) {
  const YAML::Node steps = job["steps"];
  for (int i = 0; steps && i < static_cast<int>(steps.size()); ++i) {
    if (FindInvocation(Str(steps[i]["run"]), program, subcommand, after)) return i;
  }
  return -1;
}

// Every combination of a job's `strategy.matrix` values (one empty one when it has none).
using Combo = std::map<std::string, std::string>;
std::vector<Combo> MatrixCombos(const YAML::Node& job) {
  std::vector<Combo> combos = {{}};
  const YAML::Node matrix = At(job, {"strategy", "matrix"});
  if (!matrix || !matrix.IsMap()) return combos;
  for (const auto& kv : matrix) {
    if (!kv.second.IsSequence()) continue;  // include/exclude would need GitHub's own rules; none are used
    std::vector<Combo> next;
    for (const Combo& c : combos) {
      for (const auto& v : kv.second) {
        Combo more = c;
        more[kv.first.as<std::string>()] = Str(v);
        next.push_back(more);
      }
    }
    combos = next;
  }
  return combos;
}

// Replaces each `${{ matrix.<key> }}` by the combination's value, as GitHub does before running a step.
std::string Expand(const std::string& text, const Combo& combo) {
  std::string out;
  std::regex expr("\\$\\{\\{\\s*matrix\\.([A-Za-z0-9_-]+)\\s*\\}\\}");
  size_t last = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), expr); it != std::sregex_iterator(); ++it) {
    out += text.substr(last, it->position() - last);
    auto v = combo.find((*it)[1].str());
    out += v == combo.end() ? it->str() : v->second;
    last = it->position() + it->length();
  }
  return out + text.substr(last);
}

// The non-empty lines of an upload step's `path:`, trimmed.
std::vector<std::string> PathLines(const YAML::Node& step) {
  std::vector<std::string> lines;
  std::istringstream in(Str(At(step, {"with", "path"})));
  std::string line;
  while (std::getline(in, line)) {
    line = std::regex_replace(line, std::regex("^\\s+|\\s+$"), "");
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// One job that runs ci/run-device.
struct DeviceJob {
  std::string id;
  YAML::Node job;
  int run_step = -1;
  std::vector<std::string> words;  // after ci/run-device
  Args args;
  std::string device;  // the first positional argument
};

// ---------------------------------------------------------------------------------------------------------
// Running ci/run-device

using Result = SubprocessResult;

std::string Describe(const Result& r) { return r.Describe() + "; output:\n" + r.output_tail; }

// One recorded call of a stand-in: its name, then its arguments.
using Call = std::vector<std::string>;

// A scratch checkout with a copy of ci/run-device (same mode bits) and stand-ins for scripts/setup.sh,
// scripts/build.sh and build/bin/tune-matrix that log their calls.
class FakeCheckout {
 public:
  FakeCheckout() {
    for (const char* d : {"/ci", "/scripts", "/build/bin", "/caller"}) {
      Status made = MakeDirs(repo_ + d);
      EXPECT_TRUE(made.ok()) << made.ToString();
    }
    StatusOr<std::string> text = ReadFile(kRunDevice);
    struct stat st {};
    if (!text.ok() || ::stat(kRunDevice.c_str(), &st) != 0) {
      ADD_FAILURE() << kRunDevice << " is missing";
      return;
    }
    Write(script_, *text, st.st_mode & 07777);
    const std::string record = "#!/usr/bin/env bash\nprintf 'CALL %s\\n' \"$(basename \"$0\")\" >>\"$FAKE_LOG\"\n";
    // Setup and build also log the torch version they were asked for, when one was.
    const std::string torch =
        "[ -z \"$TUNE_MATRIX_TORCH_VERSION\" ] || printf 'ARG TUNE_MATRIX_TORCH_VERSION=%s\\n' "
        "\"$TUNE_MATRIX_TORCH_VERSION\" >>\"$FAKE_LOG\"\n";
    Write(repo_ + "/scripts/setup.sh", record + torch, 0755);
    Write(repo_ + "/scripts/build.sh", record + torch, 0755);
    Write(repo_ + "/build/bin/tune-matrix",
          record + "printf 'ARG %s\\n' \"$@\" >>\"$FAKE_LOG\"\n"
                   "case \"$1\" in\n"
                   "  run) exit \"${FAKE_RUN_STATUS:-0}\" ;;\n"
                   "  check) exit \"${FAKE_CHECK_STATUS:-0}\" ;;\n"
                   "esac\n",
          0755);
  }

  const std::string& repo() const { return repo_; }

  // `bash ci/run-device ARGS`, from `cwd` (default: the checkout).
  Result RunDevice(const std::vector<std::string>& args, const Combo& env = {}, const std::string& cwd = "") const {
    return Launch({"/bin/bash", script_}, args, env, cwd.empty() ? repo_ : cwd);
  }

  // `ci/run-device ARGS` as a CI step runs it: as an executable, so its mode bits count.
  Result ExecRunDevice(const std::vector<std::string>& args, const Combo& env) const {
    return Launch({script_}, args, env, repo_);
  }

  std::vector<Call> Calls() const {
    std::vector<Call> calls;
    std::istringstream in(Text(log_));
    std::string line;
    while (std::getline(in, line)) {
      if (StartsWith(line, "CALL ")) calls.push_back({line.substr(5)});
      if (StartsWith(line, "ARG ") && !calls.empty()) calls.back().push_back(line.substr(4));
    }
    return calls;
  }
  void Clear() const { ::unlink(log_.c_str()); }

  // The arguments of the logged `tune-matrix <subcommand>` call; fails the test when there is none.
  Call TuneMatrixCall(const std::string& subcommand) const {
    for (const Call& c : Calls()) {
      if (c.size() >= 2 && c[0] == "tune-matrix" && c[1] == subcommand) return Call(c.begin() + 1, c.end());
    }
    ADD_FAILURE() << "ci/run-device never called tune-matrix " << subcommand;
    return {};
  }

 private:
  static void Write(const std::string& path, const std::string& text, mode_t mode) {
    Status written = WriteFileAtomically(path, text);
    ASSERT_TRUE(written.ok()) << written.ToString();
    ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
  }

  Result Launch(std::vector<std::string> argv, const std::vector<std::string>& args, const Combo& env,
                const std::string& cwd) const {
    // Inherited values would change ci/run-device's and the stand-ins' defaults; both read "" as unset.
    Combo vars = {{"TUNE_MATRIX_CONFIGS", ""}, {"GITHUB_JOB", ""}, {"BUILD_DIR", ""}, {"FAKE_RUN_STATUS", ""},
                  {"TUNE_MATRIX_TORCH_VERSION", ""},
                  {"FAKE_CHECK_STATUS", ""}, {"PWD", cwd}, {"FAKE_LOG", log_}};
    for (const auto& kv : env) vars[kv.first] = kv.second;
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.working_dir = cwd;
    o.env.assign(vars.begin(), vars.end());
    o.timeout_s = 60;
    o.tail_bytes = 1 << 20;
    SubprocessSet set;
    StatusOr<Subprocess*> child = set.Add(o);
    if (!child.ok()) {
      ADD_FAILURE() << child.status().ToString();
      return {};
    }
    while (set.running() > 0) set.DoWork(1000);
    return set.NextFinished()->result();
  }

  test::ScratchDir scratch_{"ci_workflow_test"};
  const std::string repo_ = scratch_.path() + "/repo";
  const std::string script_ = repo_ + "/ci/run-device";
  const std::string log_ = scratch_.path() + "/calls.log";
};

std::string Show(const std::vector<Call>& calls) {
  std::string s;
  for (const Call& c : calls) s += JoinStrings(c, " ") + "\n";
  return s.empty() ? "(no calls)\n" : s;
}

// ---------------------------------------------------------------------------------------------------------
// Tests of the workflow file

class WorkflowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    error_.clear();
    std::vector<std::string> matches;
    for (const std::string& f : WorkflowFiles()) {
      if (Contains(Text(f), "ci/run-device")) matches.push_back(f);
    }
    if (matches.size() != 1) {
      error_ = "expected exactly one workflow in " + kWorkflowsDir + " that runs ci/run-device, found " +
               std::to_string(matches.size());
      return;
    }
    path_ = matches[0];
    try {
      workflow_ = YAML::LoadFile(path_);
    } catch (const YAML::Exception& e) {
      error_ = path_ + " is not valid YAML: " + e.what();
      return;
    }
    const YAML::Node jobs = workflow_["jobs"];
    if (!jobs || !jobs.IsMap()) {
      error_ = path_ + " has no `jobs:` map";
      return;
    }
    devices_.clear();
    final_id_.clear();
    for (const auto& kv : jobs) {
      DeviceJob d;
      d.id = kv.first.as<std::string>();
      d.job = kv.second;
      d.run_step = FindRun(d.job, "ci/run-device", "", &d.words);
      std::vector<std::string> merge_words;
      if (FindRun(d.job, "tune-matrix", "merge", &merge_words) >= 0) {
        if (!final_id_.empty()) error_ = "two jobs run `tune-matrix merge`: " + final_id_ + " and " + d.id;
        final_id_ = d.id;
      }
      if (d.run_step < 0) continue;
      d.args = ParseArgs(d.words);
      if (!d.args.positional.empty()) d.device = d.args.positional[0];
      devices_.push_back(d);
    }
    if (final_id_.empty()) error_ = path_ + ": no job runs `tune-matrix merge` (the final job)";
  }

  void SetUp() override { ASSERT_TRUE(error_.empty()) << error_; }

  static YAML::Node FinalJob() { return At(workflow_, {"jobs", final_id_}); }

  static std::set<std::string> DeviceIds() {
    std::set<std::string> ids;
    for (const auto& d : devices_) ids.insert(d.id);
    return ids;
  }

  static inline std::string error_;
  static inline std::string path_;
  static inline YAML::Node workflow_;
  static inline std::vector<DeviceJob> devices_;
  static inline std::string final_id_;
};

TEST(WorkflowFiles, EveryWorkflowParsesAndCiShowsThem) {
  std::vector<std::string> files = WorkflowFiles();
  ASSERT_FALSE(files.empty()) << "no *.yml in " << kWorkflowsDir << " (GitHub reads workflows only from there)";
  for (const std::string& f : files) {
    EXPECT_NO_THROW(YAML::LoadFile(f)) << f << " is not valid YAML";
  }

  // ci/workflows is a relative link, so it stays right in every clone, wherever it lives.
  const std::string link = kRoot + "/ci/workflows";
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0) << link << " is missing";
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << link << " should be a symlink to ../.github/workflows";
  char target[PATH_MAX] = {};
  ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  EXPECT_EQ(std::string(target, n > 0 ? n : 0), "../.github/workflows") << link << " should be relative";
  char a[PATH_MAX], b[PATH_MAX];
  ASSERT_NE(::realpath(link.c_str(), a), nullptr) << link << " is dangling";
  ASSERT_NE(::realpath(kWorkflowsDir.c_str(), b), nullptr);
  EXPECT_STREQ(a, b) << link << " does not lead to " << kWorkflowsDir;
}

TEST_F(WorkflowTest, DeviceJobsUploadTheirJournalEvenWhenTheyFail) {
  for (const DeviceJob& d : devices_) {
    int upload = FindUses(d.job, "actions/upload-artifact");
    ASSERT_GE(upload, 0) << "job " << d.id << " uploads no artifact: the final job would have no journal";
    const YAML::Node step = d.job["steps"][upload];
    EXPECT_GT(upload, d.run_step) << "job " << d.id << " uploads before ci/run-device ran";
    EXPECT_TRUE(IsAlways(step["if"])) << "job " << d.id << ": the upload needs `if: always()`; a failed check "
                                      << "is exactly when the journal is wanted";
    std::string paths = Str(At(step, {"with", "path"}));
    EXPECT_TRUE(Contains(paths, "journal")) << "job " << d.id << ": upload path has no journal:\n" << paths;
    EXPECT_TRUE(Contains(paths, "junit")) << "job " << d.id << ": upload path has no JUnit file:\n" << paths;
  }
}

TEST_F(WorkflowTest, ShardedJobsListEveryShardOnce) {
  bool cpu_sharded = false;
  for (const DeviceJob& d : devices_) {
    if (!d.args.Has("--shard")) continue;
    cpu_sharded |= d.device == "cpu";
    std::smatch m;
    std::string shard = d.args.Get("--shard");
    ASSERT_TRUE(std::regex_match(shard, m, std::regex("\\$\\{\\{\\s*matrix\\.([A-Za-z0-9_-]+)\\s*\\}\\}/([0-9]+)")))
        << "job " << d.id << ": --shard '" << shard << "' should be ${{ matrix.<key> }}/<n>";
    std::string key = m[1];
    int n = std::stoi(m[2]);
    const YAML::Node list = At(d.job, {"strategy", "matrix", key});
    ASSERT_TRUE(list && list.IsSequence()) << "job " << d.id << ": --shard uses matrix." << key
                                           << " but strategy.matrix." << key << " is not a list";
    std::vector<int> got, want;
    for (const auto& v : list) got.push_back(v.as<int>());
    for (int i = 1; i <= n; ++i) want.push_back(i);
    EXPECT_EQ(got, want) << "job " << d.id << ": strategy.matrix." << key << " must be exactly 1.." << n
                         << " to cover every shard of --shard .../" << n << " once";
    EXPECT_FALSE(At(d.job, {"strategy", "fail-fast"}) && At(d.job, {"strategy", "fail-fast"}).as<bool>())
        << "job " << d.id << ": set fail-fast: false, or one failing shard cancels the others' journals";
    if (d.args.Has("--job")) {
      EXPECT_TRUE(Contains(d.args.Get("--job"), "matrix." + key))
          << "job " << d.id << ": --job '" << d.args.Get("--job") << "' names every shard the same";
    }
  }
  EXPECT_TRUE(cpu_sharded) << "the cpu job should be sharded (--shard ${{ matrix.shard }}/n)";
}

TEST_F(WorkflowTest, FinalJobWaitsForEveryDeviceJobAndRunsWhateverHappened) {
  const YAML::Node job = FinalJob();
  std::set<std::string> needs;
  for (const auto& n : Labels(job["needs"])) needs.insert(n);
  for (const std::string& id : DeviceIds()) {
    EXPECT_TRUE(needs.count(id)) << "final job " << final_id_ << " does not `needs` device job " << id
                                 << ": it could merge before that journal exists";
  }
  EXPECT_TRUE(IsAlways(job["if"])) << "final job " << final_id_ << " needs `if: always()` so the reports are "
                                   << "made even when a device job failed";
  std::vector<std::string> unused;
  EXPECT_EQ(FindRun(job, "ci/run-device", "", &unused), -1) << "the final job should merge, not run cells";
}

// The torch version a device job's combination builds against: its --torch, else the checkout's pin (the file
// torch-version; scripts/torch_version.sh reads it the same way).
std::string PinnedTorch() {
  std::istringstream in(Text(kRoot + "/torch-version"));
  std::string line;
  while (std::getline(in, line)) {
    line = std::regex_replace(line, std::regex("^\\s+|\\s+$"), "");
    if (!line.empty() && line[0] != '#') return line;
  }
  return "";
}

// "2.15.0" -> 2015, so that minors count up.
int Minor(const std::string& version) {
  std::smatch m;
  if (!std::regex_search(version, m, std::regex("^([0-9]+)\\.([0-9]+)"))) return -1;
  return std::stoi(m[1]) * 1000 + std::stoi(m[2]);
}

TEST_F(WorkflowTest, TheCpuJobsCoverEverySupportedTorchMinorOnceAndTestIt) {
  std::map<int, std::set<std::string>> versions;  // minor -> the releases cpu jobs build against
  for (const DeviceJob& d : devices_) {
    if (d.device != "cpu") continue;
    for (const Combo& combo : MatrixCombos(d.job)) {
      std::vector<std::string> words;
      ASSERT_TRUE(FindInvocation(Expand(Str(d.job["steps"][d.run_step]["run"]), combo), "ci/run-device", "", &words));
      Args args = ParseArgs(words);
      const std::string torch = args.Has("--torch") ? args.Get("--torch") : PinnedTorch();
      versions[Minor(torch)].insert(torch);
      if (!args.Has("--torch")) continue;
      // Its tests and its cells build against the same torch: the job's environment names it for every step.
      std::string where = "job " + d.id + " torch=" + torch;
      EXPECT_EQ(Expand(Str(At(d.job, {"env", "TUNE_MATRIX_TORCH_VERSION"})), combo), torch)
          << where << ": set `env: TUNE_MATRIX_TORCH_VERSION` to the --torch version, or its tests use the pin";
      std::vector<std::string> unused;
      EXPECT_GE(FindRun(d.job, "scripts/test.sh", "", &unused), 0) << where << " runs no tests";
    }
  }
  std::set<int> want;
  for (int minor = Minor(TM_TORCH_OLDEST); minor <= Minor(TM_TORCH_NEWEST); ++minor) want.insert(minor);
  std::set<int> got;
  for (const auto& kv : versions) {
    got.insert(kv.first);
    EXPECT_EQ(kv.second.size(), 1u) << "cpu jobs build against " << kv.second.size() << " releases of one minor";
  }
  EXPECT_EQ(got, want) << "the cpu jobs should build against one release of each supported minor, "
                       << TM_TORCH_OLDEST << " to " << TM_TORCH_NEWEST << " (cmake/FindLibTorch.cmake)";
}

// ---------------------------------------------------------------------------------------------------------

TEST(RunDevice, HelpPrintsUsageAndDoesNothing) {
  FakeCheckout repo;
  for (const char* flag : {"--help", "-h"}) {
    Result o = repo.RunDevice({flag});
    EXPECT_EQ(o.exit_code, 0) << flag << ": " << Describe(o);
    EXPECT_TRUE(StartsWith(o.output_tail, "usage: ci/run-device <device>")) << Describe(o);
    EXPECT_TRUE(repo.Calls().empty()) << flag << " ran:\n" << Show(repo.Calls());
  }
}

TEST(RunDevice, RejectsBadArgumentsBeforeSettingAnythingUp) {
  struct Case {
    std::vector<std::string> args;
    std::string named;  // what the one-line error must mention
  };
  const std::vector<Case> cases = {
      {{}, "<device>"},
      {{"--shard", "1/2"}, "<device>"},
      {{"cpu", "--shard", "3/2"}, "--shard"},
      {{"cpu", "--shard", "0/2"}, "--shard"},
      {{"cpu", "--shard", "1/0"}, "--shard"},
      {{"cpu", "--shard", "2"}, "--shard"},
      {{"cpu", "--shard", "01/2"}, "--shard"},
      {{"cpu", "--shard=a/b"}, "--shard"},
      {{"cpu", "--shard"}, "--shard"},
      {{"cpu", "--configs"}, "--configs"},
      {{"cpu", "--out", ""}, "--out"},
      {{"cpu", "--bogus"}, "--bogus"},
      {{"cpu", "cuda"}, "cuda"},
      {{"cuda/0"}, "cuda/0"},
      {{"cpu", "--torch", "2.15"}, "--torch"},
      {{"cpu", "--torch=latest"}, "--torch"},
  };
  FakeCheckout repo;
  for (const Case& c : cases) {
    std::string argv = "ci/run-device";
    for (const auto& a : c.args) argv += " '" + a + "'";
    Result o = repo.RunDevice(c.args);
    EXPECT_EQ(o.exit_code, 2) << argv << ": bad arguments must exit 2; " << Describe(o);
    const std::string& out = o.output_tail;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << argv << ": want one error line; " << Describe(o);
    EXPECT_TRUE(Contains(out, c.named)) << argv << ": the error should name " << c.named << "; " << Describe(o);
    EXPECT_TRUE(repo.Calls().empty()) << argv << ": validation must come before setup, but ran:\n"
                                      << Show(repo.Calls());
    repo.Clear();
  }
}

TEST(RunDevice, SetsUpBuildsRunsAndChecksWithTheGivenOptions) {
  FakeCheckout repo;
  const std::string out = repo.repo() + "/../out";
  Result o = repo.RunDevice({"cuda:0", "--shard", "2/3", "--configs", "tiny/*", "--out", out, "--job", "nightly"});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  std::vector<Call> calls = repo.Calls();
  ASSERT_EQ(calls.size(), 4u) << "want setup, build, run, check; got:\n" << Show(calls);
  EXPECT_EQ(calls[0], Call{"setup.sh"});
  EXPECT_EQ(calls[1], Call{"build.sh"});
  // ':' would make awkward file and artifact names.
  const std::string journal = out + "/journal-cuda-0-shard-2-of-3.jsonl";
  EXPECT_EQ(repo.TuneMatrixCall("run"),
            (Call{"run", "--devices", "cuda:0", "--configs", "tiny/*", "--shard", "2/3", "--journal", journal,
                  "--junit", out + "/junit-cuda-0-shard-2-of-3.xml", "--job", "nightly", "--work-dir", out + "/runs",
                  "--no-write-back"}))
      << Show(calls);
  EXPECT_EQ(repo.TuneMatrixCall("check"), (Call{"check", journal, "--expect-devices", "cuda:0"})) << Show(calls);
  EXPECT_TRUE(IsDirectory(out)) << "the --out folder was not made";
}

TEST(RunDevice, PassesADevicePluginToRunAndCheck) {
  FakeCheckout repo;
  const std::string plugin = "build/plugins/sim/libtm_sim.so";
  Result o = repo.RunDevice({"sim", "--device-plugin", plugin, "--configs", "tiny/*"});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  Args run = ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"});
  EXPECT_EQ(run.Get("--device-plugin"), plugin);
  EXPECT_EQ(run.Get("--devices"), "sim");
  Args check = ParseArgs(repo.TuneMatrixCall("check"));
  EXPECT_EQ(check.Get("--device-plugin"), plugin);
  EXPECT_EQ(check.Get("--expect-devices"), "sim");

  repo.Clear();
  o = repo.RunDevice({"cpu"});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  EXPECT_FALSE(ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"}).Has("--device-plugin"));
}

TEST(RunDevice, DefaultsToEveryConfigALocalJobNameAndCiOutBesideTheCaller) {
  FakeCheckout repo;
  const std::string caller = repo.repo() + "/caller";
  Result o = repo.RunDevice({"cpu"}, {}, caller);
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  Args run = ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"});
  EXPECT_EQ(run.Get("--configs"), "*");
  EXPECT_EQ(run.Get("--job"), "local-cpu");
  EXPECT_FALSE(run.Has("--shard"));
  EXPECT_EQ(run.Get("--journal"), caller + "/ci-out/journal-cpu.jsonl") << "--out is relative to the caller";
  EXPECT_EQ(run.Get("--junit"), caller + "/ci-out/junit-cpu.xml");
}

TEST(RunDevice, TakesTheConfigsFromTheEnvironmentAndTheJobFromGithub) {
  FakeCheckout repo;
  Result o = repo.RunDevice({"cpu"}, {{"TUNE_MATRIX_CONFIGS", "tiny/*"}, {"GITHUB_JOB", "nightly"}});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  Args run = ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"});
  EXPECT_EQ(run.Get("--configs"), "tiny/*");
  EXPECT_EQ(run.Get("--job"), "nightly-cpu");

  repo.Clear();
  o = repo.RunDevice({"cpu", "--configs", "llama3_2/*"}, {{"TUNE_MATRIX_CONFIGS", "tiny/*"}});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  EXPECT_EQ(ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"}).Get("--configs"), "llama3_2/*")
      << "--configs should win over TUNE_MATRIX_CONFIGS";
}

TEST(RunDevice, BuildsAgainstTheTorchAskedForAndNamesItsFilesAndJobAfterIt) {
  FakeCheckout repo;
  const std::string out = repo.repo() + "/out";
  Result o = repo.RunDevice({"cpu", "--torch", "2.15.0", "--shard", "1/2", "--out", out});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  std::vector<Call> calls = repo.Calls();
  ASSERT_GE(calls.size(), 2u) << Show(calls);
  EXPECT_EQ(calls[0], (Call{"setup.sh", "TUNE_MATRIX_TORCH_VERSION=2.15.0"})) << Show(calls);
  EXPECT_EQ(calls[1], (Call{"build.sh", "TUNE_MATRIX_TORCH_VERSION=2.15.0"})) << Show(calls);
  Args run = ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"});
  EXPECT_EQ(run.Get("--journal"), out + "/journal-cpu-torch-2.15.0-shard-1-of-2.jsonl");
  EXPECT_EQ(run.Get("--junit"), out + "/junit-cpu-torch-2.15.0-shard-1-of-2.xml");
  EXPECT_EQ(run.Get("--job"), "local-cpu-torch-2.15.0");

  // Without --torch the checkout's own setting decides: nothing is set for setup and build.
  repo.Clear();
  o = repo.RunDevice({"cpu"});
  ASSERT_EQ(o.exit_code, 0) << Describe(o);
  EXPECT_EQ(repo.Calls()[0], Call{"setup.sh"}) << Show(repo.Calls());
}

TEST(RunDevice, ChecksEvenWhenTheRunFailsAndFailsWhenEitherFailed) {
  struct Case {
    std::string run_status, check_status;
    int want;
  };
  for (const Case& c : std::vector<Case>{{"0", "0", 0}, {"1", "0", 1}, {"0", "3", 3}, {"130", "3", 130}}) {
    FakeCheckout repo;
    Result o = repo.RunDevice({"cpu"}, {{"FAKE_RUN_STATUS", c.run_status}, {"FAKE_CHECK_STATUS", c.check_status}});
    EXPECT_EQ(o.exit_code, c.want) << "run exits " << c.run_status << ", check exits " << c.check_status << "; "
                                   << Describe(o);
    EXPECT_FALSE(repo.TuneMatrixCall("check").empty()) << "check must run even after run exits " << c.run_status;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The workflow and ci/run-device together

// Runs each device job's ci/run-device line (per matrix combination, with the stand-ins) and follows the
// files it writes: into that job's upload, through the final job's download folder, into check and merge.
TEST_F(WorkflowTest, EveryDeviceJobsJournalReachesTheFinalJobsCheckAndMerge) {
  const YAML::Node final_job = FinalJob();
  int download = FindUses(final_job, "actions/download-artifact");
  ASSERT_GE(download, 0) << "final job " << final_id_ << " downloads no artifacts";
  std::string pattern = Str(At(final_job["steps"][download], {"with", "pattern"}));
  std::string folder =
      std::regex_replace(Str(At(final_job["steps"][download], {"with", "path"})), std::regex("/+$"), "");
  std::vector<std::string> check_words, merge_words;
  FindRun(final_job, "tune-matrix", "check", &check_words);
  FindRun(final_job, "tune-matrix", "merge", &merge_words);
  Args check = ParseArgs(check_words), merge = ParseArgs(merge_words);

  std::set<std::string> artifacts, journals;
  for (const DeviceJob& d : devices_) {
    int upload = FindUses(d.job, "actions/upload-artifact");
    ASSERT_GE(upload, 0) << "job " << d.id << " uploads nothing";
    const YAML::Node upload_step = d.job["steps"][upload];
    for (const Combo& combo : MatrixCombos(d.job)) {
      std::string where = "job " + d.id;
      for (const auto& kv : combo) where += " " + kv.first + "=" + kv.second;

      std::string artifact = Expand(Str(At(upload_step, {"with", "name"})), combo);
      EXPECT_TRUE(artifacts.insert(artifact).second)
          << where << ": artifact name '" << artifact << "' is used twice (uploads would clash)";
      EXPECT_EQ(::fnmatch(pattern.c_str(), artifact.c_str(), 0), 0)
          << where << ": artifact '" << artifact << "' does not match the final job's download pattern '" << pattern
          << "'";

      std::vector<std::string> words;
      ASSERT_TRUE(FindInvocation(Expand(Str(d.job["steps"][d.run_step]["run"]), combo), "ci/run-device", "", &words));
      FakeCheckout repo;
      Result o = repo.ExecRunDevice(words, {{"TUNE_MATRIX_CONFIGS", "*"}, {"GITHUB_JOB", d.id}});
      ASSERT_EQ(o.exit_code, 0) << where << ": its ci/run-device line does not run; " << Describe(o);
      Args run = ParseArgs(repo.TuneMatrixCall("run"), {"--no-write-back"});
      EXPECT_EQ(run.Get("--devices"), d.device) << where;

      for (const char* file : {"--journal", "--junit"}) {
        std::string path = run.Get(file);
        ASSERT_TRUE(StartsWith(path, repo.repo() + "/")) << where << ": " << file << " " << path
                                                         << " is outside the checkout, where uploads look";
        std::string relative = path.substr(repo.repo().size() + 1);
        bool uploaded = false;
        for (const auto& p : PathLines(upload_step)) uploaded |= ::fnmatch(p.c_str(), relative.c_str(), 0) == 0;
        EXPECT_TRUE(uploaded) << where << ": " << relative << " is not in the upload's path:\n"
                              << Str(At(upload_step, {"with", "path"}));
      }

      // merge-multiple puts every artifact's files in one folder: a name used twice would overwrite.
      std::string journal = run.Get("--journal");
      std::string base = journal.substr(journal.rfind('/') + 1);
      EXPECT_TRUE(journals.insert(base).second) << where << ": journal " << base << " also comes from another job";
      std::string downloaded = folder + "/" + base;
      for (const auto* cmd : {&check, &merge}) {
        bool read = false;
        for (const auto& g : cmd->positional) read |= ::fnmatch(g.c_str(), downloaded.c_str(), 0) == 0;
        EXPECT_TRUE(read) << where << ": the final job's " << (cmd == &check ? "check" : "merge") << " never reads "
                          << downloaded;
      }
    }
  }
}

}  // namespace
}  // namespace tmx
