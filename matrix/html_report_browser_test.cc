// reports/index.html in a real browser. Headless Chromium loads a copy of the page from disk with two
// test-only scripts added: one at the top of <head> that collects errors (uncaught exceptions and
// console.error), and testdata/html_report_selftest.js before </body>, which drives the page (filters, search
// over names, statuses and notes, sorting and the sort in the URL, opening a cell, the change summary's order,
// fold and links, back and forward, contrast, the page scroll with its header row stuck to the window and its
// first column to <main>) and writes what it saw into the DOM; a cell's details (what ran, its output, its
// commit's link) are read where a view is restored. The page is also opened with a view in its URL's fragment (the
// self-test then reports what was restored) and in a 390 px frame (a phone). `chromium --headless
// --dump-dom` prints that DOM and --screenshot saves <build>/report.png in the same run (about 2 s). Console
// messages go to a log file, which must hold none. No Python, Node or DevTools client: one child process per page.
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

// How the page is opened: the URL's fragment ("" none: the self-test drives the page; else it reports what
// the page restored from it), and the width of a frame to open it in (0: the window). Headless Chromium
// makes no window narrower than 500 px, so a phone's width is an <iframe> of that width around the page; the
// parent copies the self-test's output out of it (--allow-file-access-from-files lets it read the frame; a
// srcdoc frame would be readable without it, but refuses the page's history.pushState).
struct Opening {
  std::string fragment;
  int frame_width = 0;
};

// A page that shows `src` in a frame `width` px wide and copies the frame's self-test output into itself.
std::string InFrame(const std::string& src, int width) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\">"
         "<iframe id=\"frame\" style=\"border:0\" width=\"" + std::to_string(width) + "\" height=\"844\" src=\"" +
         src + "\"></iframe>\n<script>(function poll() {"
         "const d = document.getElementById('frame').contentDocument;"
         "const out = d && d.getElementById('tm-selftest');"
         "if (!out) { setTimeout(poll, 50); return; }"
         "const copy = document.createElement('pre'); copy.id = 'tm-selftest'; copy.hidden = true;"
         "copy.textContent = out.textContent; document.body.append(copy);"
         "})();</script>\n</body></html>\n";
}

// Loads `page` (its text) from disk in headless Chromium with the self-test, saving a screenshot.
BrowserResult LoadInChromium(const std::string& chromium, const std::string& page, const std::string& screenshot,
                             const Opening& opening = {}) {
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
  if (opening.frame_width > 0) {
    const std::string framed = dir.path() + "/framed.html";
    if (!WriteFileAtomically(framed, html).ok()) return {{}, "", "cannot write " + framed};
    html = InFrame("framed.html" + opening.fragment, opening.frame_width);
  }
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
            "file://" + path + (opening.frame_width > 0 ? "" : opening.fragment)};
  if (opening.frame_width > 0) o.argv.insert(o.argv.end() - 1, "--allow-file-access-from-files");
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

  // The self-test's value for `key`, "(missing)" when it wrote none.
  static std::string Seen(const BrowserResult& r, const std::string& key) {
    auto it = r.seen.find(key);
    return it == r.seen.end() ? "(missing)" : it->second;
  }

  // The checks of what the page added after the committed one was made: no part of the self-test threw, the
  // search took words, the view went into the URL, the change summary's links, back and forward worked, every
  // text has WCAG AA contrast, and the table scrolls inside its container with its header and first column
  // stuck.
  static void ExpectTheNewerFeatures(const BrowserResult& r) {
    for (const char* part : {"exception_words", "exception_url", "exception_changes", "exception_contrast",
                             "exception_layout"}) {
      EXPECT_EQ(Seen(r, part), "(missing)") << part;
    }
    EXPECT_EQ(Seen(r, "words_rows"), Seen(r, "words_rows_expected"));
    EXPECT_EQ(Seen(r, "words_rows"), "1");  // tiny/lora_single_device: "LORA tiny" in another order and case
    EXPECT_EQ(Seen(r, "words_reversed_rows"), "1");
    EXPECT_EQ(Seen(r, "words_none_rows"), "0");
    EXPECT_EQ(Seen(r, "url_hash"), "#q=tiny+lora&status=runs");
    EXPECT_EQ(Seen(r, "url_permalink"), "#q=tiny+lora&status=runs");
    EXPECT_EQ(Seen(r, "url_hash_reset"), "");
    // The search reads statuses and notes: the disturbed cell's config, the one with sample data.
    EXPECT_EQ(Seen(r, "search_disturbed_rows"), Seen(r, "search_disturbed_rows_expected"));
    EXPECT_EQ(Seen(r, "search_disturbed_rows"), "1");  // llama3_1/8B_lora_single_device on cuda
    EXPECT_EQ(Seen(r, "search_sample_data_rows"), "1");  // tiny/lora_single_device on cpu
    EXPECT_EQ(Seen(r, "search_repaired_rows"), Seen(r, "search_repaired_rows_expected"));
    // The sort is in the URL, and back restores the one before.
    EXPECT_EQ(Seen(r, "sort_url"), "#sort=recipe");
    EXPECT_EQ(Seen(r, "sort_url_desc"), "#sort=-recipe");
    EXPECT_EQ(Seen(r, "sort_url_first"), "tiny/lora_single_device");  // lora_finetune_single_device, first by name
    EXPECT_EQ(Seen(r, "sort_back"), "#sort=recipe ascending");
    EXPECT_EQ(Seen(r, "sort_url_reset"), "");
    // Newest first (two changes of 2026-12-04, then one of 12-02), the disturbed line folded under its count.
    EXPECT_EQ(Seen(r, "changes_kinds"), "newly broken,newly fixed,slower,disturbed");
    EXPECT_EQ(Seen(r, "changes_leading"), "newly broken,newly fixed,slower");
    EXPECT_EQ(Seen(r, "changes_disturbed_folded"), "true");
    EXPECT_EQ(Seen(r, "changes_disturbed_summary"),
              "1 cell measured beside other work (status recorded, speed not published)");
    EXPECT_EQ(Seen(r, "changes_before_table"), "true");
    EXPECT_EQ(Seen(r, "change_link_opens"), "true");
    EXPECT_EQ(Seen(r, "change_closed"), "true");
    EXPECT_EQ(Seen(r, "back_reopens"), "true");
    EXPECT_EQ(Seen(r, "forward_closes"), "true");
    EXPECT_NE(Seen(r, "contrast_measured"), "0");
    EXPECT_EQ(Seen(r, "contrast_failures"), "") << "worst: " << Seen(r, "contrast_worst");
    EXPECT_EQ(Seen(r, "page_scrolls_sideways"), "false");
    EXPECT_EQ(Seen(r, "first_status_on_screen"), "true");
    EXPECT_EQ(Seen(r, "scrolled"), "true");
    // One page scroll: the window scrolled past the table's top, nothing inside the page scrolls down, and the
    // header row sits at the window's top.
    EXPECT_EQ(Seen(r, "page_scrolled"), "true");
    EXPECT_EQ(Seen(r, "main_scrolls_down"), "false");
    EXPECT_EQ(Seen(r, "main_top_above_window"), "true");
    EXPECT_EQ(Seen(r, "header_sticks"), "true");
    EXPECT_EQ(Seen(r, "first_column_sticks"), "true");
  }

  // `f`'s page opened with `fragment` in its URL (a view to restore), its screenshot saved as <build>/<png>.
  BrowserResult OpenView(const testing::ReportFixture& f, const std::string& png, const std::string& fragment,
                         const HtmlReportOptions& options = {}) const {
    std::ostringstream page;
    HtmlReporter(f.history, options).Report(f.configs, {}, page);
    return LoadInChromium(chromium_, page.str(), std::string(TM_BINARY_DIR) + "/" + png, {fragment});
  }

  // What every page opened with a view shows: no error, and the view restored without an exception.
  static void ExpectARestoredView(const BrowserResult& r) {
    ASSERT_EQ(r.failure, "");
    EXPECT_EQ(r.console, "");
    EXPECT_EQ(Seen(r, "errors"), "0");
    EXPECT_EQ(Seen(r, "exception_restore"), "(missing)");
    EXPECT_EQ(Seen(r, "mode"), "restore");
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
      {"details_device", "on cpu (avx512_bf16, torch 2.11.0)"},
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
  ExpectTheNewerFeatures(r);
  EXPECT_TRUE(PathExists(screenshot)) << screenshot;
}

// A link to a view (filters and an open cell in the fragment) opens that view.
TEST_F(HtmlReportBrowserTest, AViewIsRestoredFromTheUrl) {
  BrowserResult r = OpenView(testing::MakeReportFixture(), "report-restored.png",
                             "#q=LORA+tiny&status=runs&open=tiny%2Flora_single_device%40cpu+%28avx512_bf16%2C+torch+"
                             "2.11.0%29");
  ExpectARestoredView(r);
  EXPECT_EQ(Seen(r, "restored_search"), "LORA tiny");
  EXPECT_EQ(Seen(r, "restored_status"), "runs");
  EXPECT_EQ(Seen(r, "restored_family"), "");
  EXPECT_EQ(Seen(r, "restored_rows"), "tiny/lora_single_device");
  EXPECT_EQ(Seen(r, "restored_open"), "tiny/lora_single_device on cpu (avx512_bf16, torch 2.11.0)");
  EXPECT_EQ(Seen(r, "restored_selected"), "1");
  EXPECT_EQ(Seen(r, "restored_permalink"),
            "#q=LORA+tiny&status=runs&open=tiny%2Flora_single_device%40cpu+%28avx512_bf16%2C+torch+2.11.0%29");
}

// A generation cell's details name its speed decode and show its time to first token and prefill speed, with
// a trend of the time to first token; it has no loss to show.
TEST_F(HtmlReportBrowserTest, AGenerationCellsDetailsShowItsPrefill) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddGenerationCell(&f);
  BrowserResult r =
      OpenView(f, "report-generation.png", "#open=tiny%2Fgeneration%40cpu+%28avx512_bf16%2C+torch+2.11.0%29");
  ExpectARestoredView(r);
  EXPECT_EQ(Seen(r, "restored_open"), "tiny/generation on cpu (avx512_bf16, torch 2.11.0)");
  const std::string fields = Seen(r, "restored_fields");
  for (const char* shown : {"decode tokens/s: 812.4 | time to first token: 52.3 ms | prefill tokens/s: 4,100.2 | "
                            "step time: ",
                            "ended: exit code 0"}) {
    EXPECT_NE(fields.find(shown), std::string::npos) << shown << " in " << fields;
  }
  EXPECT_EQ(fields.find("loss"), std::string::npos) << fields;
  EXPECT_EQ(Seen(r, "restored_charts"), "decode tokens/s,time to first token (ms),peak memory (GiB)");
}

// A proxied cell's details say that its proxies ran in its place, with their depths and numbers and the real
// depth's extrapolation, and show their output; never "not started" or "no output".
TEST_F(HtmlReportBrowserTest, AProxiedCellsDetailsSayWhatRan) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddProxiedAndRepairedCells(&f);
  BrowserResult r = OpenView(f, "report-proxied.png", "#open=llama3_3%2F70B_lora%40cpu+%28avx512_bf16%2C+torch+2.11.0%29");
  ExpectARestoredView(r);
  EXPECT_EQ(Seen(r, "restored_open"), "llama3_3/70B_lora on cpu (avx512_bf16, torch 2.11.0)");
  const std::string fields = Seen(r, "restored_fields");
  EXPECT_NE(fields.find("ended: the config as written did not start (too_large); its proxies ran"), std::string::npos)
      << fields;
  EXPECT_EQ(Seen(r, "restored_ran"),
            "Proxies of 1 and 4 of 80 layers (model.num_layers 4 of 80) ran in its place; every operation of the "
            "config ran.");
  EXPECT_EQ(Seen(r, "restored_proxy_rows"), "3");  // 1 and 4 layers, and ≈ 80 extrapolated
  EXPECT_EQ(Seen(r, "restored_output_title"), "Last lines of output (its proxies')");
  EXPECT_EQ(Seen(r, "restored_output"), "Training llama3_3/70B_lora (4 of 80 layers) on cpu Finished: 3 steps");
  EXPECT_EQ(fields.find("not started"), std::string::npos) << fields;
}

// A repaired cell's details: how it ended is the repaired config's run, what ran says the repair and the
// float32 reference, the output is the repaired run's; its commit links to the repository the page names. A
// search for "repaired" and a descending sort come back from the URL.
TEST_F(HtmlReportBrowserTest, ARepairedCellsDetailsSayWhatRanAndLinkItsCommit) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddProxiedAndRepairedCells(&f);
  BrowserResult r = OpenView(f, "report-repaired.png",
                             "#q=repaired&sort=-recipe&open=tiny%2Fqlora_single_device%40cpu+%28avx512_bf16%2C+torch+"
                             "2.11.0%29",
                             HtmlReportOptions{"https://github.com/owner/tune-matrix"});
  ExpectARestoredView(r);
  EXPECT_EQ(Seen(r, "restored_rows"), "tiny/qlora_single_device");
  EXPECT_EQ(Seen(r, "restored_sort"), "recipe descending");
  const std::string fields = Seen(r, "restored_fields");
  EXPECT_NE(fields.find("ended: exit code 0 (the repaired config's run)"), std::string::npos) << fields;
  EXPECT_EQ(fields.find("not started"), std::string::npos) << fields;
  EXPECT_EQ(Seen(r, "restored_ran"),
            "As written: invalid here. Repaired with optimizer=torch.optim.AdamW: runs. | Float32 reference run "
            "(12.5 s): bf16 on cpu against float32 on cpu: first loss off by 0.12% (tolerance 2%).");
  EXPECT_EQ(Seen(r, "restored_output_title"), "Last lines of output (the repaired config's run)");
  EXPECT_EQ(Seen(r, "restored_commit_href"),
            "https://github.com/owner/tune-matrix/commit/8888888888888888888888888888888888888888");
  EXPECT_EQ(Seen(r, "restored_permalink").find("sort=-recipe"), std::string("#q=repaired&").size());
}

// A phone's width (390 px): the same checks, and the status column stays on screen.
TEST_F(HtmlReportBrowserTest, WorksOnAPhone) {
  testing::ReportFixture f = testing::MakeReportFixture();
  std::ostringstream page;
  HtmlReporter(f.history).Report(f.configs, {}, page);
  BrowserResult r = LoadInChromium(chromium_, page.str(), std::string(TM_BINARY_DIR) + "/report-phone.png",
                                   {"", 390});
  ExpectAWorkingPage(r);
  EXPECT_EQ(Seen(r, "window_width"), "390");
  EXPECT_EQ(Seen(r, "table_wider_than_main"), "true");  // it scrolls inside <main>, not the page
  ExpectTheNewerFeatures(r);
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
