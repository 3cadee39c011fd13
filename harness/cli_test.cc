#include "harness/cli.h"

#include <sstream>

#include <gtest/gtest.h>

namespace tmx {
namespace {

std::vector<Subcommand> Table(std::vector<std::string>* seen) {
  return {{"validate", "validate <config>", "Check a config", "Longer help.",
           [seen](const std::vector<std::string>& a, std::ostream&, std::ostream&) {
             *seen = a;
             return 0;
           }},
          {"ls", "ls", "List", "", [](const auto&, auto& out, auto&) {
             out << "listed\n";
             return 0;
           }}};
}

TEST(CliTest, DispatchesWithArguments) {
  std::vector<std::string> seen;
  std::ostringstream out, err;
  EXPECT_EQ(DispatchSubcommand("tune", "d", Table(&seen), {"validate", "x", "a=1"}, out, err), 0);
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "a=1"}));
}

TEST(CliTest, UnknownCommandSuggestsNearest) {
  std::vector<std::string> seen;
  std::ostringstream out, err;
  EXPECT_EQ(DispatchSubcommand("tune", "d", Table(&seen), {"valdiate"}, out, err), kExitUsage);
  EXPECT_EQ(err.str(), "tune: unknown command 'valdiate', did you mean 'validate'?\n"
                       "Run 'tune --help' for the list of commands.\n");
}

TEST(CliTest, HelpListsEveryCommand) {
  std::vector<std::string> seen;
  std::ostringstream out, err;
  EXPECT_EQ(DispatchSubcommand("tune", "desc", Table(&seen), {"--help"}, out, err), 0);
  EXPECT_NE(out.str().find("  validate  Check a config\n"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("  ls        List\n"), std::string::npos) << out.str();
  std::ostringstream out2;
  EXPECT_EQ(DispatchSubcommand("tune", "desc", Table(&seen), {"help", "validate"}, out2, err), 0);
  EXPECT_EQ(out2.str(), "usage: tune validate <config>\n\nCheck a config\n\nLonger help.\n");
  std::ostringstream none_out, none_err;
  EXPECT_EQ(DispatchSubcommand("tune", "desc", Table(&seen), {}, none_out, none_err), kExitUsage);
}

TEST(CliTest, ParseArgsFlagsAndErrors) {
  ParsedArgs p;
  std::string error;
  ASSERT_TRUE(ParseArgs({"--config", "c", "x=1", "--force", "--recipe=r"}, {"force"}, {"config", "recipe"}, &p, &error));
  EXPECT_EQ(p.positional, (std::vector<std::string>{"x=1"}));
  EXPECT_EQ(p.Get("config"), "c");
  EXPECT_EQ(p.Get("recipe"), "r");
  EXPECT_TRUE(p.Has("force"));
  ParsedArgs q;
  EXPECT_FALSE(ParseArgs({"--forse"}, {"force"}, {}, &q, &error));
  EXPECT_EQ(error, "unknown option '--forse', did you mean '--force'?");
  ParsedArgs r;
  EXPECT_FALSE(ParseArgs({"--config"}, {}, {"config"}, &r, &error));
  EXPECT_EQ(error, "--config needs a value");
}

TEST(CliTest, RepeatedAndUnmatchedFlagsAreRefusedNamingThem) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      // The second --journal was silently ignored, the first kept.
      {{"--journal", "a.jsonl", "--journal", "b.jsonl"},
       "--journal is given twice ('a.jsonl' and 'b.jsonl'), and only one would count; fix: give it once"},
      {{"--force", "x", "--force"}, "--force is given twice, and only one would count; fix: give it once"},
      // --fresh was taken as the journal's path.
      {{"--journal", "--fresh"},
       "--journal needs a value, and the next argument is the option '--fresh'; fix: --journal <value> (or "
       "--journal=<value> for a value that starts with --)"},
      {{"--force=yes"}, "--force takes no value (got '--force=yes'); fix: write --force alone"},
      // One dash: it became a positional argument (an override or a journal named "-journal").
      {{"-journal", "a.jsonl"}, "unknown option '-journal', did you mean '--journal'? (options start with '--')"},
  };
  for (const Case& c : cases) {
    ParsedArgs p;
    std::string error;
    EXPECT_FALSE(ParseArgs(c.args, {"force", "fresh"}, {"journal"}, &p, &error)) << c.args[0];
    EXPECT_EQ(error, c.expected);
  }
  ParsedArgs fine;
  std::string error;
  EXPECT_TRUE(ParseArgs({"--journal=--odd", "-1", "--tag", "a", "--tag", "b"}, {}, {"journal", "tag"}, &fine, &error,
                        /*repeatable=*/{"tag"}))
      << error;
  EXPECT_EQ(fine.Get("journal"), "--odd");
  EXPECT_EQ(fine.positional, (std::vector<std::string>{"-1"}));
  EXPECT_EQ(fine.flags.size(), 3u);
}

}  // namespace
}  // namespace tmx
