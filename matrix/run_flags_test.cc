#include "matrix/run_flags.h"

#include <gtest/gtest.h>

#include <set>

namespace tmx::matrix {
namespace {

Status Parse(const std::vector<std::string>& args, MatrixOptions* options, bool* write_back = nullptr) {
  static const Registry registry;
  bool ignored = true;
  std::vector<std::string> warnings;
  return ParseRunFlags(registry, args, options, write_back != nullptr ? write_back : &ignored, &warnings);
}

TEST(RunFlagsTest, TheHelpListsEveryFlagOnceWithItsDefaultTakenFromTheOptions) {
  MatrixOptions defaults;
  const std::string help = RunFlagsHelp();
  std::set<std::string> names;
  for (const RunFlag& f : RunFlags()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name << " is listed twice";
    const std::string head = "\n  --" + f.name + (f.value.empty() ? "" : " " + f.value) + " ";
    EXPECT_NE(("\n" + help).find(head), std::string::npos) << head;
  }
  EXPECT_EQ(help.find("{default}"), std::string::npos);
  EXPECT_NE(help.find("per cell, the first excluded from timings (default " + std::to_string(defaults.max_steps) +
                      ")"),
            std::string::npos);
  EXPECT_NE(help.find("wall-clock limit per cell in seconds (default 900)"), std::string::npos);
  EXPECT_NE(help.find("(default 0.85); on cpu"), std::string::npos);
  EXPECT_NE(help.find("journal file (default " + defaults.journal_path + ")"), std::string::npos);
  EXPECT_NE(help.find("per-cell output folders (default " + defaults.work_dir + ")"), std::string::npos);
  // Every help line but the first of a flag continues under the help column.
  for (size_t pos = help.find('\n'); pos + 1 < help.size(); pos = help.find('\n', pos + 1)) {
    const std::string line = help.substr(pos + 1, help.find('\n', pos + 1) - pos - 1);
    EXPECT_TRUE(line.rfind("  --", 0) == 0 || line.rfind(std::string(27, ' '), 0) == 0) << line;
  }
}

TEST(RunFlagsTest, EveryFlagSetsItsOption) {
  MatrixOptions o;
  bool write_back = true;
  ASSERT_TRUE(Parse({"--devices", "cpu,cuda:0", "--recipes", "a,b", "--steps", "5", "--startup-share", "0",
                     "--timeout", "60", "--budget", "0", "--time-limit", "3600", "--memory-fraction", "0.5",
                     "--lanes", "2", "--no-proxies", "--calibrate", "--no-repairs", "--no-numeric-check", "--journal",
                     "j.jsonl", "--resume", "--job", "ci", "--shard", "2/3", "--junit", "r.xml", "--no-write-back",
                     "--verbose", "--work-dir", "w", "--reports-dir", "r", "--tune", "/bin/tune", "--configs",
                     "tiny/*"},
                    &o, &write_back)
                  .ok());
  EXPECT_EQ(o.devices, (std::vector<std::string>{"cpu", "cuda:0"}));
  EXPECT_EQ(o.recipes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.config_globs, (std::vector<std::string>{"tiny/*"}));
  EXPECT_EQ(o.max_steps, 5);
  EXPECT_EQ(o.startup_share, 0);
  EXPECT_EQ(o.cell_timeout_s, 60);
  EXPECT_EQ(o.cell_budget_s, 0);
  EXPECT_EQ(o.time_limit_s, 3600);
  EXPECT_EQ(o.memory_fraction, 0.5);
  EXPECT_EQ(o.cpu_lanes, 2);
  EXPECT_FALSE(o.proxies);
  EXPECT_TRUE(o.calibrate);
  EXPECT_FALSE(o.repairs);
  EXPECT_FALSE(o.numeric_check);
  EXPECT_EQ(o.journal_path, "j.jsonl");
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.job, "ci");
  EXPECT_EQ(o.shard_index, 2);
  EXPECT_EQ(o.shard_count, 3);
  EXPECT_EQ(o.junit_path, "r.xml");
  EXPECT_FALSE(write_back);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.work_dir, "w");
  EXPECT_EQ(o.reports_dir, "r");
  EXPECT_EQ(o.tune_path, "/bin/tune");
  EXPECT_FALSE(o.cpu_class.empty()) << "the column is this machine's class";
}

TEST(RunFlagsTest, LeftOutTheDefaultsStandAndTheLanesAreTheMachines) {
  MatrixOptions o, defaults;
  bool write_back = false;
  ASSERT_TRUE(Parse({}, &o, &write_back).ok());
  EXPECT_TRUE(write_back);
  EXPECT_EQ(o.max_steps, defaults.max_steps);
  EXPECT_EQ(o.cell_budget_s, defaults.cell_budget_s);
  EXPECT_EQ(o.journal_path, defaults.journal_path);
  EXPECT_EQ(o.cpu_lanes, 0) << "0: run chooses from the machine";
  EXPECT_NE(o.tune_path.find("/tune"), std::string::npos);
}

TEST(RunFlagsTest, BadValuesNameTheFlagAndTheFix) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--steps", "1"}, "--steps must be at least 2 (one warm-up step is excluded from timings)"},
      {{"--steps", "2.5"}, "--steps takes a whole number, not '2.5'"},
      {{"--timeout", "0"}, "--timeout must be above 0 seconds"},
      {{"--timeout", "1e999"}, "--timeout takes a finite number, not '1e999'"},
      {{"--budget", "-1"}, "--budget must be 0 (no budget) or a number of seconds"},
      {{"--memory-fraction", "1.5"}, "--memory-fraction must be in (0, 1]"},
      {{"--startup-share", "1"}, "--startup-share must be 0 (every cell trains --steps) or a share below 1, e.g. 0.15"},
      {{"--time-limit", "30m"}, "--time-limit takes a finite number, not '30m'"},
      {{"--lanes", "0"}, "--lanes must be at least 1"},
      {{"--resume", "--fresh"}, "--resume keeps the journal and --fresh sets it aside: give one"},
      {{"stray"}, "unexpected argument 'stray'"},
  };
  for (const auto& [args, message] : cases) {
    MatrixOptions o;
    Status s = Parse(args, &o);
    EXPECT_FALSE(s.ok()) << args.front();
    EXPECT_EQ(s.message(), message);
  }
  MatrixOptions o;
  Status unknown = Parse({"--cell-budget", "100"}, &o);
  EXPECT_NE(unknown.message().find("unknown option '--cell-budget'"), std::string::npos) << unknown.message();
}

}  // namespace
}  // namespace tmx::matrix
