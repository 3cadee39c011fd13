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

}  // namespace
}  // namespace tmx
