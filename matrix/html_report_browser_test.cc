// reports/index.html in a real browser. Headless Chromium loads a copy of the page from disk with two
// test-only scripts added: one at the top of <head> that collects errors (uncaught exceptions and
// console.error), and testdata/html_report_selftest.js before </body>, which drives the page (filters, search,
// sorting, opening a cell) and writes what it saw into the DOM. `chromium --headless --dump-dom` prints that
// DOM and --screenshot saves <build>/report.png in the same run (about 2 s). Console messages go to a log
// file, which must hold none. No Python, Node or DevTools client: one child process per page.
//
// Skipped, with the reason, where no Chromium is installed (the Debian package `chromium`, which
// scripts/setup.sh installs when TUNE_MATRIX_BROWSER=1; TUNE_MATRIX_CHROMIUM names another binary).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "base/file_util.h"
#include "base/subprocess.h"
#include "base/text.h"
#include "matrix/html_report.h"
#include "matrix/testdata/report_fixture.h"
#include "tests/scratch_dir.h"

namespace tmx::matrix {
namespace {

// Chromium's binary: $TUNE_MATRIX_CHROMIUM, else the first of the usual names on PATH; "" when none.
std::string FindChromium() {
  const char* given = std::getenv("TUNE_MATRIX_CHROMIUM");
  if (given != nullptr && *given) return given;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : SplitList(path ? path : "", ':')) {
    for (const char* name : {"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"}) {
      std::string candidate = dir + "/" + name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

const char kErrorCollector[] =
    "<script>window.__tmErrors = [];"
    "window.addEventListener('error', (e) => window.__tmErrors.push(e.message + ' at ' + e.lineno));"
    "window.addEventListener('unhandledrejection', (e) => window.__tmErrors.push(String(e.reason)));"
    "const tmConsoleError = console.error;"
    "console.error = (...a) => { window.__tmErrors.push(a.join(' ')); tmConsoleError(...a); };</script>\n";

// What the self-test wrote, and what else the browser said.
struct BrowserResult {
  std::map<std::string, std::string> seen;  // the self-test's key=value lines
  std::string console;                      // the console lines of Chromium's log, "" when none
  std::string failure;                      // why nothing was seen, "" when it was
};

std::string Unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&nbsp;", " "}, {"&amp;", "&"}}) {
    for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
      s.replace(at, from.size(), to);
    }
  }
  return s;
}

// Loads `page` (its text) from disk in headless Chromium with the self-test, saving a screenshot.
BrowserResult LoadInChromium(const std::string& chromium, const std::string& page, const std::string& screenshot) {
  BrowserResult result;
  test::ScratchDir dir("browser");
  StatusOr<std::string> selftest = ReadFile(std::string(TM_SOURCE_DIR) + "/matrix/testdata/html_report_selftest.js");
  if (!selftest.ok()) return {{}, "", selftest.status().ToString()};
  std::string html = page;
  size_t head = html.find("<head>");
  size_t body_end = html.rfind("</body>");
  if (head == std::string::npos || body_end == std::string::npos) return {{}, "", "the page has no <head> or </body>"};
  html.insert(body_end, "<script>\n" + *selftest + "</script>\n");
  html.insert(head + 6, std::string("\n") + kErrorCollector);
  const std::string path = dir.path() + "/index.html";
  const std::string log = dir.path() + "/chrome.log";
  if (!WriteFileAtomically(path, html).ok()) return {{}, "", "cannot write " + path};

  SubprocessSet set;
  SubprocessOptions o;
  o.argv = {chromium,
            "--headless",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--user-data-dir=" + dir.path() + "/profile",
            "--enable-logging",
            "--log-file=" + log,
            "--v=0",
            "--hide-scrollbars",
            "--run-all-compositor-stages-before-draw",
            "--window-size=1400,900",
            "--virtual-time-budget=2000",
            "--screenshot=" + screenshot,
            "--dump-dom",
            "file://" + path};
  // Chromium's sandbox cannot start as root (CI runs as root).
  if (::geteuid() == 0) o.argv.insert(o.argv.begin() + 1, "--no-sandbox");
  o.timeout_s = 120;
  o.tail_bytes = 8 << 20;
  StatusOr<Subprocess*> child = set.Add(o);
  if (!child.ok()) return {{}, "", child.status().ToString()};
  while (set.running() > 0) set.DoWork(1000);
  SubprocessResult r = set.NextFinished()->result();
  if (!r.Succeeded()) return {{}, "", "chromium " + r.Describe() + ":\n" + r.output_tail};

  StatusOr<std::string> log_text = ReadFile(log);
  if (log_text.ok()) {
    std::istringstream in(*log_text);
    for (std::string line; std::getline(in, line);) {
      if (line.find(":CONSOLE") != std::string::npos) result.console += line + "\n";
    }
  }
  const std::string& dom = r.output_tail;
  // The last one: the self-test's own source, also in the DOM, mentions the element in a comment.
  size_t start = dom.rfind("<pre id=\"tm-selftest\"");
  size_t open_end = start == std::string::npos ? start : dom.find('>', start);
  size_t end = open_end == std::string::npos ? open_end : dom.find("</pre>", open_end);
  if (end == std::string::npos) {
    result.failure = "the self-test wrote nothing into the DOM (did the page's script fail?):\n" + dom;
    return result;
  }
  std::istringstream lines(Unescape(dom.substr(open_end + 1, end - open_end - 1)));
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) result.seen[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return result;
}

class HtmlReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    if (chromium_.empty()) {
      GTEST_SKIP() << "no Chromium found (install the Debian package chromium, e.g. TUNE_MATRIX_BROWSER=1 "
                      "scripts/setup.sh, or set TUNE_MATRIX_CHROMIUM to a Chromium or Chrome binary)";
    }
  }

  // The checks every page must pass, whatever its data.
  static void ExpectAWorkingPage(const BrowserResult& r) {
    ASSERT_EQ(r.failure, "");
    EXPECT_EQ(r.console, "") << "the page wrote to the console";
    auto seen = [&](const std::string& key) {
      auto it = r.seen.find(key);
      return it == r.seen.end() ? "(missing " + key + ")" : it->second;
    };
    EXPECT_EQ(seen("exception"), "(missing exception)");
    EXPECT_EQ(seen("errors"), "0");
    EXPECT_EQ(seen("resources"), "0") << "the page fetched something";
    EXPECT_EQ(seen("rows"), seen("data_configs"));
    EXPECT_EQ(seen("cells_per_row"), seen("data_devices"));
    EXPECT_EQ(seen("family_rows"), seen("family_rows_expected"));
    EXPECT_EQ(seen("runs_rows"), seen("runs_rows_expected"));
    EXPECT_EQ(seen("device_cells_per_row"), "1");
    EXPECT_EQ(seen("search_none_rows"), "0");
    EXPECT_EQ(seen("search_none_message"), "true");
    EXPECT_EQ(seen("rows_after_reset"), seen("data_configs"));
    EXPECT_EQ(seen("details_open"), "true");
    EXPECT_EQ(seen("details_points"), seen("details_points_expected"));
    EXPECT_EQ(seen("details_closed_by_escape"), "true");
    EXPECT_EQ(seen("details_opened_by_enter"), "true");
  }

  std::string chromium_;
};

TEST_F(HtmlReportBrowserTest, FiltersSortsAndOpensACellsDetails) {
  testing::ReportFixture f = testing::MakeReportFixture();
  std::ostringstream page;
  HtmlReporter(f.history).Report(f.configs, {}, page);
  const std::string screenshot = std::string(TM_BINARY_DIR) + "/report.png";
  ::unlink(screenshot.c_str());
  BrowserResult r = LoadInChromium(chromium_, page.str(), screenshot);
  ExpectAWorkingPage(r);
  std::map<std::string, std::string> want = {
      {"rows", "6"},
      {"cells_per_row", "3"},
      {"family", "llama3_1"},
      {"family_rows", "1"},
      {"shown_text", "1 of 6 configs"},
      {"runs_rows", "4"},
      {"device_headers", "3"},  // config, recipe and mps
      {"search_rows", "1"},     // the reason "CUDA out of memory"
      {"sort_first", "tiny/lora_single_device"},
      {"sort_desc_first", "odd/<b>\"name\"&"},
      {"sort_aria", "descending"},
      {"details_config", "tiny/lora_single_device"},
      {"details_device", "on cpu"},
      {"details_status", "runs"},
      {"details_charts", "2"},
      {"details_points", "4"},
      {"details_changes", "2"},  // runs -> fails -> runs
      {"details_history_rows", "4"},
      {"details_output", "true"},
      {"details_fields",
       "tokens/s,step time,peak memory,predicted vs measured,loss,cell wall time,ended,device,torch,host,job,commit,"
       "verified,config hash,sample data"},
  };
  for (const auto& [key, value] : want) {
    auto it = r.seen.find(key);
    EXPECT_EQ(it == r.seen.end() ? "(missing)" : it->second, value) << key;
  }
  EXPECT_TRUE(PathExists(screenshot)) << screenshot;
}

TEST_F(HtmlReportBrowserTest, TheCommittedPageWorks) {
  StatusOr<std::string> page = ReadFile(std::string(TM_SOURCE_DIR) + "/reports/index.html");
  ASSERT_TRUE(page.ok()) << page.status().ToString() << " (regenerate it: tune-matrix report)";
  BrowserResult r = LoadInChromium(chromium_, *page, std::string(TM_BINARY_DIR) + "/report-committed.png");
  ExpectAWorkingPage(r);
  EXPECT_NE(r.seen["rows"], "0");
}

}  // namespace
}  // namespace tmx::matrix
