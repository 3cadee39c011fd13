#include "tests/cli_exec.h"

#include <gtest/gtest.h>

#include <memory>

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

}  // namespace tmx::test
