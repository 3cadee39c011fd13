// Every field of a record through every report: each format's one escaping function must see every field, so
// markup, a table-breaking '|', terminal escapes and line breaks from a merged record reach no published file and
// no terminal (issue 55: the SUPPORT.md field for the peak's dtype was written raw).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>
#include <variant>

#include "matrix/check.h"
#include "matrix/html_report.h"
#include "matrix/junit.h"
#include "matrix/report.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {
namespace {

// A field's hostile text: markup, every Markdown special, a terminal escape (colour, then a title), a line
// break and a bidi override, each tagged with the field's name.
std::string Hostile(const std::string& field) {
  return "<hostile>" + field + "</hostile>|*_`[l](u)~&\\\x1b[31m\x1b]0;t\x07\n|row\xe2\x80\xae";
}

// An entry of `status` whose every text field is hostile and every number set (so every part of the cell text,
// the peak's dtype included, is shown).
SupportEntry HostileEntry(const std::string& status) {
  SupportEntry e;
  for (const SupportField& f : SupportFields()) {
    if (f.text) e.*f.text = Hostile(f.name);
    if (f.number) e.*f.number = 0.5;
  }
  e.status = status;
  e.ops_verified = "yes";  // a proxied cell's measurements are shown
  return e;
}

// A record whose every text field is hostile except those that name its cell.
CellResult HostileRecord() {
  CellResult r;
  for (const JournalField& field : JournalFields()) {
    std::visit(
        [&](const auto& slot) {
          using T = std::decay_t<decltype(slot.get(r))>;
          if constexpr (std::is_same_v<T, std::string>) slot.set(r) = Hostile(field.key);
          if constexpr (std::is_same_v<T, std::vector<std::string>>) slot.set(r) = {Hostile(field.key)};
        },
        field.value);
  }
  r.key = {"tiny/a", "cpu"};
  r.device_type = "cpu";
  r.recipe = "full_finetune_single_device";
  r.status = CellStatus::kFails;
  r.provenance.verified_at = "2026-12-01T10:00:00Z";
  return r;
}

std::vector<ConfigSupport> Configs() {
  ConfigSupport c;
  c.config = "tiny/a";
  c.recipe = "full_finetune_single_device";
  c.entries["cpu"] = HostileEntry("runs");
  c.entries["cuda"] = HostileEntry("too_large");
  c.entries["mps"] = HostileEntry("fails");
  c.entries["xpu"] = HostileEntry(Hostile("status"));
  c.entries["xpu"].repaired_status = "runs";
  c.supported_devices = {"cpu"};
  return {c};
}

// Where `token` stands unescaped in Markdown (not after a backslash), or npos.
size_t RawInMarkdown(const std::string& text, const std::string& token) {
  for (size_t at = text.find(token); at != std::string::npos; at = text.find(token, at + 1)) {
    if (at == 0 || text[at - 1] != '\\') return at;
  }
  return std::string::npos;
}

// The text around `at`, for a failure's message.
std::string Around(const std::string& text, size_t at) {
  return at == std::string::npos ? "" : text.substr(at < 80 ? 0 : at - 80, 160);
}

void ExpectNothingRaw(const std::string& text, const std::string& format) {
  EXPECT_EQ(text.find("<hostile"), std::string::npos) << format << ": markup passed through: "
                                               << Around(text, text.find("<hostile"));
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << format << ": a terminal escape passed through";
  EXPECT_EQ(text.find('\x07'), std::string::npos) << format;
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << format << ": a bidi override passed through";
}

// '|' not preceded by a backslash: the cell boundaries of a Markdown table row.
size_t Pipes(const std::string& line) {
  size_t n = 0;
  for (size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  return n;
}

TEST(EscapeReportsTest, EveryFieldThroughTheMarkdownReportStaysInItsCell) {
  std::ostringstream out;
  MarkdownReporter().Report(Configs(), {}, out);
  const std::string text = out.str();
  EXPECT_EQ(RawInMarkdown(text, "<hostile"), std::string::npos) << Around(text, RawInMarkdown(text, "<hostile"));
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "a terminal escape passed through";
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << "a bidi override passed through";
  std::istringstream lines(text);
  std::string line;
  size_t header_pipes = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') {
      header_pipes = 0;
      continue;
    }
    if (header_pipes == 0) header_pipes = Pipes(line);
    EXPECT_EQ(Pipes(line), header_pipes) << "a row that breaks its table: " << line;
  }
  EXPECT_NE(text.find("\\<hostile\\>peak\\_dtype\\</hostile\\>"), std::string::npos) << "the peak's dtype, escaped";
}

TEST(EscapeReportsTest, EveryFieldThroughTheJsonAndHtmlReportsAndJUnit) {
  History history;
  history[{"tiny/a", "cpu"}] = {HostileRecord()};
  std::ostringstream json, html, junit;
  JsonReporter().Report(Configs(), {}, json);
  HtmlReporter(history).Report(Configs(), {}, html);
  WriteJUnit({HostileRecord()}, junit);
  EXPECT_TRUE(nlohmann::json::accept(json.str()));
  ExpectNothingRaw(html.str(), "index.html");
  EXPECT_EQ(html.str().find("</hostile"), std::string::npos) << "no tag closes early, in the page or its data";
  ExpectNothingRaw(junit.str(), "JUnit");
}

TEST(EscapeReportsTest, EveryFieldACheckPrintsReachesTheTerminalEscaped) {
  CellResult observed = HostileRecord();
  observed.config_hash = "";
  std::vector<ConfigSupport> configs = Configs();
  configs[0].current_hash = "";
  configs[0].entries["cpu"].config_hash = "";
  configs[0].entries["cpu"].verified_at = "2026-11-01T10:00:00Z";
  JournalSet observations;
  observations.paths = {"j.jsonl"};
  observations.records = {observed};
  observations.origins = {"j.jsonl:1"};
  std::vector<CheckProblem> problems = CheckSupport(configs, observations, CheckOptions{});
  ASSERT_FALSE(problems.empty());
  std::ostringstream printed;
  PrintProblems(problems, printed);
  // Markup means nothing to a terminal; escapes, bells, bidi controls and line breaks inside a field do.
  const std::string text = printed.str();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  EXPECT_EQ(text.find("\xe2\x80\xae"), std::string::npos) << text;
  EXPECT_EQ(text.find("\n|row"), std::string::npos) << "a field's line break starts no line of its own: " << text;
  EXPECT_NE(printed.str().find("\\x1b[31m"), std::string::npos) << "shown, escaped: " << printed.str();
}

}  // namespace
}  // namespace tmx::matrix
