#include "tests/cli_exec.h"

#include <gtest/gtest.h>

#include <memory>

#include "base/cpu_class.h"
#include "base/subprocess.h"

namespace tmx::test {

Result Exec(std::vector<std::string> argv, std::vector<std::pair<std::string, std::string>> env, double timeout_s) {
  SubprocessSet set;
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.timeout_s = timeout_s;
  o.env = std::move(env);
  o.env.emplace_back("OMP_NUM_THREADS", "1");
  o.tail_bytes = 1 << 20;  // whole listings (`tune ls --verbose` is tens of KB), not the runner's 16 KB tail
  StatusOr<Subprocess*> child = set.Add(o);
  EXPECT_TRUE(child.ok()) << child.status().ToString();
  while (set.running() > 0) set.DoWork(1000);
  std::unique_ptr<Subprocess> done = set.NextFinished();
  Result r;
  r.code = done->result().exit_code.value_or(-1);
  r.output = done->result().output_tail;
  return r;
}

std::string CpuColumn::Entry(const std::string& status, const std::string& fields) const {
  return "    \"" + Key() + "\":\n      status: " + status + "\n" + fields + "      cpu_class: \"" + cpu_class +
         "\"\n      torch_version: \"" + torch + "\"\n";
}

CpuColumn RunningCpuColumn() {
  CpuColumn c;
  c.cpu_class = DetectCpuClass().value();
  const std::string devices = Exec({kTune, "devices"}).output;
  const size_t at = devices.find("LibTorch ");
  EXPECT_NE(at, std::string::npos) << devices;
  if (at != std::string::npos) c.torch = devices.substr(at + 9, devices.find('\n', at) - at - 9);
  EXPECT_NE(devices.find("  class " + c.cpu_class + "  "), std::string::npos) << devices;
  return c;
}

}  // namespace tmx::test
