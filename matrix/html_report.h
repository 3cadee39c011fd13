// reports/index.html: the support matrix as one self-contained page that opens from disk (no network, no
// server: the data is inline JSON, the script and stylesheet are inline). The matrix of configs x device
// types is static HTML coloured by status, so it reads without script too; the script adds filters (family,
// recipe, status, device), a search box, sortable columns, and per cell a details panel: status and reason
// with the last lines of output, speed, memory predicted vs measured, where and when it was measured, and
// the cell's trends over its history (tokens/s and peak memory per measurement as inline SVG, status
// changes marked). A generation cell (one with a time to first token) shows its speed as decode tokens/s with
// its time to first token and prefill tokens/s, in the matrix and the details, and a trend of its time to
// first token; the data of other cells holds no prefill keys, so their page is as before.
//
// The page leads with what changed at each cell's newest measurement (ChangesSincePrevious), newest first, each
// line a link that opens its cell; the cells measured beside other work (whose speed is not compared) are folded
// into one count that opens to their lines. A cell that does not run shows its reason, shortened, in the
// matrix, and a cell measured beside other work is marked. The search matches names, recipes, statuses and
// notes (disturbed, repaired, sample data, proxies, reasons). Filters, the search, the sort and the open cell
// live in the URL's fragment (#q=qwen3+lora&status=fails&sort=-recipe&open=<config>@<column>), so a view can be
// linked to and back/forward restores it. The page scrolls as one: the matrix's header row sticks to the top
// of the window (the script moves it, as the table scrolls sideways inside <main>), its config names to the
// left of <main>. A cell's details say what ran for it (the cell, its proxies with their depths and results,
// its repair, its float32 reference) and show the output recorded.
//
// The stylesheet and script are matrix/html_report.css and matrix/html_report.js, compiled in as strings. The
// legend's items carry each status's rank and whether it started (CellStatuses()), which the script reads
// instead of knowing statuses itself.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "matrix/compare.h"
#include "matrix/history.h"
#include "matrix/report.h"

namespace tmx::matrix {

// What the page is rendered with besides the configs and history.
struct HtmlReportOptions {
  // The repository's web address ("https://github.com/owner/tune-matrix"): each commit the page shows links to
  // <repository_url>/commit/<id>, and the page names it (<meta name="tm-repository">, PageRepositoryUrl), so a
  // check renders it again with the same one. Empty (the default): commits are plain text.
  std::string repository_url;
};

class HtmlReporter final : public SupportReporter {
 public:
  // `history` (which must outlive the reporter) gives each cell's trend and what an entry does not keep: the
  // output tail, predicted and device memory, losses and exit of the measurement the entry was made from, and
  // what ran for it (its proxies' depths and results, its repair, its float32 reference run).
  explicit HtmlReporter(const History& history, HtmlReportOptions options = {})
      : history_(history), options_(std::move(options)) {}

  // The page, deterministic like every reporter: the same configs and history give the same bytes.
  void Report(const std::vector<ConfigSupport>& configs, const std::vector<std::string>& device_types,
              std::ostream& out) override;

 private:
  const History& history_;
  HtmlReportOptions options_;
};

// The repository address a page was rendered with (HtmlReportOptions::repository_url), "" when it names none.
std::string PageRepositoryUrl(const std::string& page);

// What the page leads with. Per (config, column) shown, its newest measurement in history against the one
// before it, classified by CompareRecords (compare.h) with the default SpeedNoise, so the page, `tune-matrix
// compare` and `check` call the same things newly broken, fixed, slower or faster; cells measured once are
// left out. `disturbed` lists the newest measurements made beside other work (CellResult::disturbed), whose
// speed is not compared.
struct PageChanges {
  Comparison comparison;
  std::vector<CellResult> disturbed;  // by config, then column
  std::string since;                  // the earliest compared previous measurement's day, "" when none
};
PageChanges ChangesSincePrevious(const History& history, const std::vector<const ConfigSupport*>& configs,
                                 const std::vector<std::string>& columns);

// `text` on one line, cut to at most `max_bytes` bytes (at a whole UTF-8 character) with "…" when cut.
std::string Shortened(const std::string& text, size_t max_bytes);

// `j` as the text of a <script type="application/json"> element: compact JSON with '<', '>', '&', U+2028 and
// U+2029 written as \u escapes, so no string in it can end the element or start a comment; invalid UTF-8
// replaced by U+FFFD.
std::string InlineJson(const nlohmann::ordered_json& j);

// The family of a config outside any folder (torchtune's `generation`), in the page's family filter, whose ""
// means every family.
inline constexpr const char* kTopLevelFamily = "(top level)";
// The family of a config: its folder ("llama3_2" for "llama3_2/1B_lora_single_device"), kTopLevelFamily for none.
std::string ConfigFamily(const std::string& config);

}  // namespace tmx::matrix
