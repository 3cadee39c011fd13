#include "matrix/machine.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "base/cpu_class.h"
#include "base/file_util.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "harness/config_store.h"
#include "harness/device_hooks.h"

namespace tmx::matrix {
namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool IsCommit(const std::string& s) {
  return s.size() == 40 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The git directory of the work tree at `repo_dir`: `.git` itself, or where a `.git` file points.
std::string GitDir(const std::string& repo_dir) {
  std::string dot_git = repo_dir + "/.git";
  if (IsDirectory(dot_git)) return dot_git;
  StatusOr<std::string> link = ReadFile(dot_git);
  if (!link.ok() || link->rfind("gitdir: ", 0) != 0) return "";
  std::string dir = Trimmed(link->substr(8));
  return dir.rfind('/', 0) == 0 ? dir : repo_dir + "/" + dir;
}

std::string RefCommit(const std::string& git_dir, const std::string& ref) {
  StatusOr<std::string> loose = ReadFile(git_dir + "/" + ref);
  if (loose.ok()) return Trimmed(*loose);
  StatusOr<std::string> packed = ReadFile(git_dir + "/packed-refs");
  if (!packed.ok()) return "";
  std::istringstream in(*packed);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > 41 && line[40] == ' ' && Trimmed(line.substr(41)) == ref) return line.substr(0, 40);
  }
  return "";
}

}  // namespace

std::string GitCommit(const std::string& repo_dir) {
  std::string git_dir = GitDir(repo_dir);
  if (git_dir.empty()) return "";
  StatusOr<std::string> head = ReadFile(git_dir + "/HEAD");
  if (!head.ok()) return "";
  std::string h = Trimmed(*head);
  if (h.rfind("ref: ", 0) != 0) return IsCommit(h) ? h : "";
  std::string ref = h.substr(5);
  std::string commit = RefCommit(git_dir, ref);
  // A linked work tree keeps its branches in the main repository's git directory.
  if (commit.empty()) {
    StatusOr<std::string> common = ReadFile(git_dir + "/commondir");
    if (common.ok()) {
      std::string dir = Trimmed(*common);
      commit = RefCommit(dir.rfind('/', 0) == 0 ? dir : git_dir + "/" + dir, ref);
    }
  }
  return IsCommit(commit) ? commit : "";
}

std::string Hostname() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

Provenance LocalProvenance(const std::string& job) {
  Provenance p;
  p.host = Hostname();
  p.job = job;
  p.commit = GitCommit(CheckoutConfigDir() + "/..");
  p.torch_version = TorchVersion();
  return p;
}

Status ChooseRunColumn(const std::string& requested, MatrixOptions* options) {
  StatusOr<CpuClassChoice> choice = ChooseCpuClass(requested, MachineCpuFlags(), ReadCpuClassEnvironment());
  if (!choice.ok()) {
    return choice.status().WithContext(requested.empty() ? "this machine's CPU class" : "--cpu-class " + requested);
  }
  options->cpu_class = choice->cpu_class;
  options->child_env = choice->env;
  options->torch_version = TorchVersion();
  return Status::OK();
}

StatusOr<std::vector<DeviceInfo>> ParseDeviceList(const std::string& output) {
  // stdout and stderr arrive merged, and torch may log lines such as "[W foo.cpp:1] ..." around the list:
  // try each line that starts with '[', last first, as the start of the list, up to a line that ends it.
  nlohmann::json j;
  for (size_t start = output.rfind('['); start != std::string::npos && !j.is_array();
       start = start == 0 ? std::string::npos : output.rfind('[', start - 1)) {
    if (start != 0 && output[start - 1] != '\n') continue;
    for (size_t end = output.find("]", start); end != std::string::npos && !j.is_array();
         end = output.find("]", end + 1)) {
      if (end + 1 < output.size() && output[end + 1] != '\n') continue;
      j = nlohmann::json::parse(output.substr(start, end + 1 - start), nullptr, false);
    }
  }
  if (!j.is_array()) return Status::Internal("`tune devices --json` printed no device list");
  std::vector<DeviceInfo> devices;
  for (const auto& d : j) {
    StatusOr<DeviceInfo> info = DeviceInfoFromJson(d);
    if (!info.ok()) return info.status().WithContext("`tune devices --json`");
    devices.push_back(*info);
  }
  return devices;
}

std::string DescribeMatmulPeak(const DeviceInfo& device) {
  if (device.matmul_peak_flops.empty()) return "";
  std::vector<std::string> peaks;
  for (const auto& [dtype, flops] : device.matmul_peak_flops) peaks.push_back(dtype + " " + FormatFlops(flops));
  std::vector<std::string> bandwidth;
  for (const auto& [kernel, rate] : device.memory_bandwidth) bandwidth.push_back(kernel + " " + FormatBandwidth(rate));
  return device.id + ": matmul peak " + JoinStrings(peaks, ", ") + " at " + std::to_string(device.matmul_peak_threads) +
         (device.matmul_peak_threads == 1 ? " thread" : " threads") +
         (bandwidth.empty() ? "" : "; memory bandwidth " + JoinStrings(bandwidth, ", "));
}

StatusOr<std::vector<DeviceInfo>> DiscoverDevices(const std::string& tune, const std::string& only, bool matmul_peak,
                                                  const std::vector<int>& cpus,
                                                  const std::vector<std::pair<std::string, std::string>>& env) {
  SubprocessSet set;
  SubprocessOptions o;
  o.argv = {tune, "devices", "--json"};
  if (!only.empty()) o.argv.insert(o.argv.end(), {"--device", only});
  if (matmul_peak) o.argv.push_back("--matmul-peak");
  o.cpus = cpus;
  o.env = env;
  o.timeout_s = 300;
  o.tail_bytes = 1 << 20;
  StatusOr<Subprocess*> child = set.Add(o);
  if (!child.ok()) return child.status();
  while (set.running() > 0) {
    if (set.DoWork(1000)) return Status::Internal("interrupted while probing devices");
  }
  std::unique_ptr<Subprocess> done = set.NextFinished();
  const SubprocessResult& r = done->result();
  if (!r.Succeeded()) {
    return Status::Internal("probing devices with `" + tune + " devices --json` failed: " + r.Describe());
  }
  return ParseDeviceList(r.output_tail);
}

}  // namespace tmx::matrix
