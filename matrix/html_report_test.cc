#include "matrix/html_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "matrix/testdata/report_fixture.h"

namespace tmx::matrix {
namespace {

std::string Render(const testing::ReportFixture& f, const std::vector<std::string>& devices = {}) {
  std::ostringstream out;
  HtmlReporter(f.history).Report(f.configs, devices, out);
  return out.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The page's inline data, parsed back.
nlohmann::json Data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"tm-data\">";
  size_t start = page.find(open);
  EXPECT_NE(start, std::string::npos);
  start += open.size();
  return nlohmann::json::parse(page.substr(start, page.find("</script>", start) - start));
}

TEST(HtmlReporterTest, IsOneSelfContainedDeterministicPage) {
  testing::ReportFixture f = testing::MakeReportFixture();
  std::string page = Render(f);
  EXPECT_EQ(page, Render(f));
  EXPECT_EQ(page.substr(0, 16), "<!DOCTYPE html>\n");
  EXPECT_EQ(page.substr(page.size() - 8), "</html>\n");
  // Nothing is fetched: no external script, stylesheet, image or link (links stay in the page: "#...").
  for (const char* external : {"src=\"", "<link", "@import", "url(", "https:"}) {
    EXPECT_EQ(page.find(external), std::string::npos) << external;
  }
  EXPECT_EQ(Count(page, "href=\""), Count(page, "href=\"#"));
  // Exactly the data and the script; no string in the data ends its element.
  EXPECT_EQ(Count(page, "<script"), 2u);
  EXPECT_EQ(Count(page, "</script>"), 2u);
  EXPECT_NE(page.find("\\u003c/script\\u003e"), std::string::npos);
}

TEST(HtmlReporterTest, TheMatrixHasARowPerConfigAndACellPerDeviceType) {
  std::string page = Render(testing::MakeReportFixture());
  EXPECT_EQ(Count(page, "<tr data-config="), 6u);
  EXPECT_EQ(Count(page, "<td class=\"cell "), 18u);
  EXPECT_NE(page.find("<th data-sort=\"device\" data-device=\"cpu (avx512_bf16, torch 2.11.0)\"><button "
                      "type=\"button\">cpu (avx512_bf16, torch 2.11.0)</button></th>"
                      "<th data-sort=\"device\" data-device=\"cuda (torch 2.11.0)\"><button type=\"button\">cuda "
                      "(torch 2.11.0)</button></th>"
                      "<th data-sort=\"device\" data-device=\"mps (torch 2.11.0)\"><button type=\"button\">mps (torch "
                      "2.11.0)</button></th>"),
            std::string::npos);
  // Rows in config order, each with its family and recipe for the filters.
  EXPECT_LT(page.find("data-config=\"llama3_1/8B_lora_single_device\""),
            page.find("data-config=\"tiny/full_single_device\""));
  EXPECT_NE(
      page.find(
          "<tr data-config=\"tiny/full_single_device\" data-family=\"tiny\" "
          "data-recipe=\"full_finetune_single_device\"><th scope=\"row\">tiny/full_single_device</th>"
          "<td class=\"recipe\">full_finetune_single_device</td>"
          "<td class=\"cell st-runs\" data-device=\"cpu (avx512_bf16, torch 2.11.0)\" data-status=\"runs\" "
          "data-tps=\"26000.0\" "
          "tabindex=\"0\" role=\"button\" title=\"open tiny/full_single_device on cpu (avx512_bf16, torch 2.11.0)\">"
          "<span class=\"status\">runs</span><span class=\"measured\">26000 tok/s · 0.53 GiB</span>"
          "</td><td class=\"cell st-none\" data-device=\"cuda (torch 2.11.0)\" data-status=\"none\">"
          "<span class=\"status\">—</span></td><td class=\"cell st-invalid\" data-device=\"mps (torch 2.11.0)\" "
          "data-status=\"invalid\" tabindex=\"0\" role=\"button\" title=\"open tiny/full_single_device "
          "on mps (torch 2.11.0): invalid: invalid: not started\"><span class=\"status\">invalid</span>"
          "<span class=\"reason\">invalid: not started</span></td></tr>"),
      std::string::npos)
      << page;
  // A shipped sample that stood in for the data is marked; no other cell is.
  EXPECT_EQ(Count(page, "<span class=\"stand-in\">sample data</span>"), 1u);
  // Filters offer every family, recipe and device type.
  EXPECT_NE(page.find("<select id=\"f-family\"><option value=\"\">all</option><option value=\"llama3_1\">llama3_1"
                      "</option><option value=\"llama3_2\">llama3_2</option><option value=\"odd\">odd</option>"
                      "<option value=\"tiny\">tiny</option></select>"),
            std::string::npos);
  EXPECT_NE(page.find("6 configs × 3 device columns · verified between 2026-12-02 and 2026-12-04 (UTC) · "
                      "16 measurements in history"),
            std::string::npos);
}

TEST(HtmlReporterTest, EscapesNamesAndReasons) {
  std::string page = Render(testing::MakeReportFixture());
  EXPECT_EQ(page.find("<b>\"name\""), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("<th scope=\"row\">odd/&lt;b&gt;&quot;name&quot;&amp;</th>"), std::string::npos);
  EXPECT_NE(page.find("&lt;img src=x onerror=alert(1)&gt; &amp;"), std::string::npos);
  // U+2028 would end a line inside a JavaScript string in older engines; the data spells it as an escape.
  size_t data = page.find("id=\"tm-data\"");
  EXPECT_EQ(page.find("\u2028", data), std::string::npos);
  EXPECT_NE(page.find("\\u2028", data), std::string::npos);
  EXPECT_EQ(InlineJson(nlohmann::ordered_json("a\u2028b\u2029<&>")), "\"a\\u2028b\\u2029\\u003c\\u0026\\u003e\"");
}

TEST(HtmlReporterTest, TheDataHoldsEachCellsEntryRecordAndHistory) {
  testing::ReportFixture f = testing::MakeReportFixture();
  nlohmann::json data = Data(Render(f));
  EXPECT_EQ(data["devices"],
            nlohmann::json::array({testing::kFixtureCpu, testing::kFixtureCuda, testing::kFixtureMps}));
  ASSERT_EQ(data["configs"].size(), 6u);
  const nlohmann::json& tiny = data["configs"][5];
  EXPECT_EQ(tiny["config"], "tiny/lora_single_device");
  EXPECT_EQ(tiny["family"], "tiny");
  EXPECT_EQ(tiny["recipe"], "lora_finetune_single_device");
  const nlohmann::json& cpu = tiny["cells"][testing::kFixtureCpu];
  EXPECT_EQ(cpu["entry"]["status"], "runs");
  EXPECT_EQ(cpu["entry"]["stand_in"], "the shipped alpaca sample (alpaca_data.json not found)");
  // The record the entry was made from: what the entry does not keep.
  EXPECT_EQ(cpu["record"]["device"], "cpu");
  EXPECT_EQ(cpu["record"]["predicted_memory_bytes"],
            f.history.at({"tiny/lora_single_device", testing::kFixtureCpu})[3].predicted_memory_bytes);
  EXPECT_EQ(cpu["record"]["device_memory_bytes"], int64_t{80} << 30);
  EXPECT_EQ(cpu["record"]["exit_code"], 0);
  EXPECT_EQ(cpu["record"]["output_tail"],
            "Training tiny/lora_single_device on cpu\nepoch 1 step 3 | loss 10.25 | tok/s 38000\nFinished: 3 steps\n");
  // Every measurement, oldest first, rounded for the page.
  ASSERT_EQ(cpu["history"].size(), 4u);
  EXPECT_EQ(cpu["history"][0]["verified_at"], "2026-12-01T10:00:00Z");
  EXPECT_EQ(cpu["history"][0]["tokens_per_second"], 40000.0);
  EXPECT_EQ(cpu["history"][1]["peak_memory_gib"], 0.61);
  EXPECT_EQ(cpu["history"][2]["status"], "fails");
  EXPECT_EQ(cpu["history"][2]["tokens_per_second"], nullptr);
  EXPECT_EQ(cpu["history"][3]["commit"], "4444444444444444444444444444444444444444");
  EXPECT_EQ(cpu["record"]["disturbed"], "");
  const nlohmann::json& busy = data["configs"][0]["cells"][testing::kFixtureCuda];  // llama3_1/8B_lora_single_device
  EXPECT_EQ(busy["record"]["disturbed"], "other processes used 40% of the machine's CPU while it ran (more than 25%)");
  EXPECT_EQ(busy["record"]["others_cpu_share"], 0.4);
  EXPECT_EQ(busy["record"]["steal_share"], 0.0);
  EXPECT_EQ(data["peak_memory"][testing::kFixtureCpu], PeakMemoryMeaning("cpu"));
  EXPECT_EQ(data["peak_memory"][testing::kFixtureCuda], PeakMemoryMeaning("cuda"));
  // An entry whose measurement is not in history has no record and no trend.
  const nlohmann::json& odd = data["configs"][3]["cells"][testing::kFixtureCuda];
  EXPECT_EQ(odd["record"], nullptr);
  EXPECT_EQ(odd["history"], nlohmann::json::array());
}

// A generation cell shows its decode speed, time to first token and prefill speed in the matrix, and its
// entry and trend points carry them for the details; it has no loss. Training cells' data is as before.
TEST(HtmlReporterTest, AGenerationCellShowsItsDecodeSpeedAndPrefill) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddGenerationCell(&f);
  std::string page = Render(f);
  EXPECT_NE(page.find("<td class=\"cell st-runs\" data-device=\"cpu (avx512_bf16, torch 2.11.0)\" data-status=\"runs\" "
                      "data-tps=\"812.4\" "
                      "tabindex=\"0\" role=\"button\" title=\"open tiny/generation on cpu (avx512_bf16, torch "
                      "2.11.0)\"><span class=\"status\">"
                      "runs</span><span class=\"measured\">812 decode tok/s · 52.3 ms to first token · 4100 prefill "
                      "tok/s · 0.25 GiB</span></td>"),
            std::string::npos)
      << page;
  const std::string footer_note = " A generation cell&apos;s tok/s is its decode speed";
  size_t footer = page.find("<footer>");
  ASSERT_NE(footer, std::string::npos);
  std::string footer_text = page.substr(footer, page.find("</footer>", footer) - footer);
  EXPECT_NE(footer_text.find("." + footer_note), std::string::npos) << footer_text;
  EXPECT_EQ(Render(testing::MakeReportFixture()).find(footer_note), std::string::npos);

  nlohmann::json data = Data(page);
  const nlohmann::json* generation = nullptr;
  for (const nlohmann::json& c : data["configs"]) {
    if (c["config"] == "tiny/generation") generation = &c;
  }
  ASSERT_NE(generation, nullptr);
  const nlohmann::json& cell = (*generation)["cells"][testing::kFixtureCpu];
  EXPECT_EQ(cell["entry"]["tokens_per_second"], 812.4);
  EXPECT_EQ(cell["entry"]["time_to_first_token_s"], 0.0523);
  EXPECT_EQ(cell["entry"]["prefill_tokens_per_second"], 4100.2);
  EXPECT_EQ(cell["record"]["first_loss"], nullptr);
  EXPECT_EQ(cell["record"]["last_loss"], nullptr);
  ASSERT_EQ(cell["history"].size(), 2u);
  EXPECT_EQ(cell["history"][0]["time_to_first_token_s"], 0.0581);
  EXPECT_EQ(cell["history"][0]["prefill_tokens_per_second"], 3900.5);
  EXPECT_EQ(cell["history"][1]["tokens_per_second"], 812.4);
  // A training cell's entry and points have no prefill keys (the committed page keeps its bytes).
  ASSERT_EQ(data["configs"][6]["config"], "tiny/lora_single_device");
  const nlohmann::json& training = data["configs"][6]["cells"][testing::kFixtureCpu];
  EXPECT_FALSE(training["entry"].contains("time_to_first_token_s"));
  EXPECT_FALSE(training["history"][0].contains("time_to_first_token_s"));
  EXPECT_FALSE(training["history"][0].contains("prefill_tokens_per_second"));
}

// A repaired cell carries a badge naming its overrides, and what its repair got; a wrong cell its status's class.
TEST(HtmlReporterTest, RepairedAndWrongCellsAreMarked) {
  testing::ReportFixture f = testing::MakeReportFixture();
  SupportEntry repaired;
  repaired.status = "invalid";
  repaired.reason = "a paged optimizer needs a cuda device";
  repaired.repair = "optimizer._component_=torch.optim.AdamW optimizer.fused=True";
  repaired.repaired_status = "runs";
  repaired.tokens_per_second = 44.3;
  SupportEntry wrong;
  wrong.status = "wrong";
  wrong.reason = "its numbers disagree with the reference";
  wrong.numeric =
      "bf16 on cpu against float32 on cpu (avx512_bf16, torch 2.11.0): first loss off by 2.83% (tolerance 1.00%)";
  wrong.loss_delta = 0.0283;
  f.configs.push_back(
      {"qwen2/1.5B_full_single_device", "full_finetune_single_device", {{testing::kFixtureCpu, repaired}}});
  f.configs.push_back(
      {"tiny/llama3_1_full_single_device", "full_finetune_single_device", {{testing::kFixtureCpu, wrong}}});
  std::string page = Render(f);
  EXPECT_NE(page.find("<span class=\"measured\">runs with 2 overrides · 44 tok/s</span>"), std::string::npos) << page;
  EXPECT_NE(page.find("<span class=\"repair-mark\" title=\"repaired with optimizer._component_=torch.optim.AdamW "
                      "optimizer.fused=True\">repaired</span>"),
            std::string::npos)
      << page;
  EXPECT_NE(
      page.find("<td class=\"cell st-wrong\" data-device=\"cpu (avx512_bf16, torch 2.11.0)\" data-status=\"wrong\""),
      std::string::npos);
  EXPECT_NE(page.find("A cell invalid as written whose every problem has a known override"), std::string::npos);
  // The details panel reads the check's note and the repair from the page's data.
  nlohmann::json data = Data(page);
  bool found = false;
  for (const nlohmann::json& c : data["configs"]) {
    if (c["config"] != "tiny/llama3_1_full_single_device") continue;
    found = true;
    EXPECT_EQ(c["cells"][testing::kFixtureCpu]["entry"]["numeric"], wrong.numeric);
    EXPECT_DOUBLE_EQ(c["cells"][testing::kFixtureCpu]["entry"]["loss_delta"].get<double>(), 0.0283);
  }
  EXPECT_TRUE(found);
}

TEST(HtmlReporterTest, GivenDeviceTypesAreTheColumns) {
  std::string page = Render(testing::MakeReportFixture(), {testing::kFixtureCuda});
  EXPECT_EQ(Count(page, "<td class=\"cell "), 6u);
  EXPECT_EQ(page.find("data-device=\"cpu (avx512_bf16, torch 2.11.0)\""), std::string::npos);
  EXPECT_EQ(Data(page)["devices"], nlohmann::json::array({testing::kFixtureCuda}));
}

TEST(HtmlReporterTest, AnEmptyMatrix) {
  testing::ReportFixture none;
  std::string page = Render(none);
  EXPECT_NE(page.find("0 configs × 0 device columns · no cell verified yet · 0 measurements in history"),
            std::string::npos);
  EXPECT_EQ(Count(page, "<tr data-config="), 0u);
  EXPECT_EQ(Data(page), nlohmann::json::parse(R"({"devices":[],"peak_memory":{},"configs":[]})"));
}

// The script knows statuses only from the legend: each status once, in the table's listing order, with its
// rank and whether it started as CellStatuses() has them.
TEST(HtmlReporterTest, TheLegendCarriesTheStatusTable) {
  std::string page = Render(testing::MakeReportFixture());
  std::vector<const CellStatusInfo*> listed;
  for (const CellStatusInfo& info : CellStatuses()) listed.push_back(&info);
  std::sort(listed.begin(), listed.end(),
            [](const CellStatusInfo* a, const CellStatusInfo* b) { return a->listed < b->listed; });
  size_t previous = 0;
  for (const CellStatusInfo* info : listed) {
    SCOPED_TRACE(info->name);
    std::string item = std::string("<li class=\"st-") + info->name + "\" data-status=\"" + info->name +
                       "\" data-rank=\"" + std::to_string(info->rank) + "\" data-started=\"" +
                       (info->started ? "true" : "false") + "\" title=\"" + info->description + "\">";
    EXPECT_EQ(Count(page, item), 1u) << item;
    size_t at = page.find(item);
    EXPECT_GT(at, previous);
    previous = at;
  }
  EXPECT_EQ(Count(page, "data-rank=\""), CellStatuses().size());
}

// The page leads with each cell's newest measurement against the one before, classified as `compare` does.
TEST(HtmlReporterTest, ChangesSincePreviousClassifiesEachCellsNewestMeasurement) {
  testing::ReportFixture f = testing::MakeReportFixture();
  std::vector<const ConfigSupport*> configs = SortedByConfig(f.configs);
  PageChanges changes = ChangesSincePrevious(f.history, configs, ReportColumns(f.configs, {}));
  std::vector<std::string> seen;
  for (const CellChange& c : changes.comparison.changes) {
    seen.push_back(std::string(ChangeKindTitle(c.kind)) + " " + c.config + " " + c.column);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"newly broken llama3_2/1B_lora_single_device cuda (torch 2.11.0)",
                                            "newly fixed tiny/lora_single_device cpu (avx512_bf16, torch 2.11.0)",
                                            "slower llama3_2/1B_full_single_device cpu (avx512_bf16, torch 2.11.0)"}));
  EXPECT_EQ(changes.comparison.speed_too_short, 0);
  EXPECT_EQ(changes.since, "2026-12-01");
  ASSERT_EQ(changes.disturbed.size(), 1u);
  EXPECT_EQ(changes.disturbed[0].key.config, "llama3_1/8B_lora_single_device");
  // Only the columns shown are compared.
  PageChanges cpu_only = ChangesSincePrevious(f.history, configs, {testing::kFixtureCuda});
  ASSERT_EQ(cpu_only.comparison.changes.size(), 1u);
  EXPECT_EQ(cpu_only.comparison.changes[0].kind, ChangeKind::kNewlyBroken);
}

TEST(HtmlReporterTest, TheSummaryLinksEachChangeToItsCell) {
  std::string page = Render(testing::MakeReportFixture());
  size_t summary = page.find("<section id=\"changes\"");
  ASSERT_NE(summary, std::string::npos);
  EXPECT_LT(summary, page.find("<table id=\"matrix\">"));  // it leads
  std::string section = page.substr(summary, page.find("</section>", summary) - summary);
  EXPECT_EQ(Count(section, "<li "), 4u) << section;
  EXPECT_NE(
      section.find("<li class=\"ch-newly-broken\" data-kind=\"newly broken\" "
                   "data-config=\"llama3_2/1B_lora_single_device\" data-device=\"cuda (torch 2.11.0)\"><a "
                   "href=\"#open=llama3_2%2F1B_lora_single_device%40cuda%20%28torch%202.11.0%29\"><b>newly broken</b> "
                   "llama3_2/1B_lora_single_device on cuda (torch 2.11.0)</a> runs → fails: exited with code 1: "
                   "RuntimeError: CUDA out of memory &lt;tried 2 GiB&gt; &amp; &quot;more&quot; · "
                   "2026-12-02 → 2026-12-04</li>"),
      std::string::npos)
      << section;
  EXPECT_NE(
      section.find(
          "<b>slower</b> llama3_2/1B_full_single_device on cpu (avx512_bf16, torch 2.11.0)</a> 40 → 28 tok/s, -30.0% "
          "(allowed ±10.0%) · 2026-12-01 → 2026-12-02</li>"),
      std::string::npos)
      << section;
  EXPECT_NE(
      section.find("<b>disturbed</b> llama3_1/8B_lora_single_device on cuda (torch 2.11.0)</a> measured beside other "
                   "work on 2026-12-02"),
      std::string::npos)
      << section;
  // Newly broken first, disturbed last.
  EXPECT_LT(section.find("ch-newly-broken"), section.find("ch-newly-fixed"));
  EXPECT_LT(section.find("ch-slower"), section.find("ch-disturbed"));
}

// The summary leads with the newest run's changes (the repaired cell's, 2026-12-05), then older ones; the cells
// measured beside other work are folded into one count that opens to their lines.
TEST(HtmlReporterTest, TheSummaryLeadsWithTheNewestRunAndFoldsTheDisturbed) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddProxiedAndRepairedCells(&f);
  const std::string page = Render(f);
  const size_t summary = page.find("<section id=\"changes\"");
  const std::string section = page.substr(summary, page.find("</section>", summary) - summary);
  std::vector<std::string> order;
  for (size_t at = section.find("data-config=\""); at != std::string::npos; at = section.find("data-config=\"", at + 1)) {
    order.push_back(section.substr(at + 13, section.find('"', at + 13) - at - 13));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"tiny/qlora_single_device", "llama3_2/1B_lora_single_device",
                                             "tiny/lora_single_device", "llama3_2/1B_full_single_device",
                                             "llama3_1/8B_lora_single_device"}))
      << section;
  EXPECT_NE(section.find("newest first"), std::string::npos);
  const size_t fold = section.find("<details class=\"disturbed\"><summary>1 cell measured beside other work (status "
                                   "recorded, speed not published)</summary>");
  ASSERT_NE(fold, std::string::npos) << section;
  EXPECT_EQ(Count(section.substr(0, fold), "ch-disturbed"), 0u);
  EXPECT_EQ(Count(section.substr(fold), "<li class=\"ch-disturbed\""), 1u);
}

// What ran for a cell is in its data: the proxies' depths and numbers, the repair and what it got, the float32
// reference run; a cell that ran as written alone has nothing there.
TEST(HtmlReporterTest, TheDataSaysWhatRanForACell) {
  testing::ReportFixture f = testing::MakeReportFixture();
  testing::AddProxiedAndRepairedCells(&f);
  const nlohmann::json data = Data(Render(f));
  auto cell = [&](const std::string& config) {
    for (const auto& c : data["configs"]) {
      if (c["config"] == config) return c["cells"][testing::kFixtureCpu];
    }
    return nlohmann::json();
  };
  const nlohmann::json proxies = cell("llama3_3/70B_lora")["record"]["ran"]["proxies"];
  ASSERT_EQ(proxies["ran"].size(), 2u) << proxies.dump();
  EXPECT_EQ(proxies["ran"][1]["layers"], 4);
  EXPECT_EQ(proxies["ran"][1]["step_time_s"], 3.5);
  EXPECT_EQ(proxies["ran"][1]["tokens_per_second"], 585.1);
  EXPECT_EQ(proxies["ran"][1]["peak_memory_gib"], 4.5);
  EXPECT_EQ(proxies["real_layers"], 80);
  EXPECT_EQ(proxies["ops_verified"], true);
  EXPECT_EQ(cell("llama3_3/70B_lora")["record"]["output_tail"],
            "Training llama3_3/70B_lora (4 of 80 layers) on cpu\nFinished: 3 steps\n");
  const nlohmann::json repaired = cell("tiny/qlora_single_device")["record"]["ran"];
  EXPECT_EQ(repaired["repair"]["overrides"], nlohmann::json::array({"optimizer=torch.optim.AdamW"}));
  EXPECT_EQ(repaired["repair"]["status"], "runs");
  EXPECT_EQ(repaired["reference"]["note"], "bf16 on cpu against float32 on cpu: first loss off by 0.12% (tolerance 2%)");
  EXPECT_EQ(repaired["reference"]["time_s"], 12.5);
  EXPECT_EQ(cell("tiny/full_single_device")["record"]["ran"], nlohmann::json::object());
}

// With the repository's address the page names it (for links to commits, and for a check to render it again);
// without one it names none and commits stay text.
TEST(HtmlReporterTest, ThePageNamesTheRepositoryItLinksCommitsTo) {
  testing::ReportFixture f = testing::MakeReportFixture();
  std::ostringstream linked;
  const std::string url = "https://example.com/o/r?a=\"<b>&";
  HtmlReporter(f.history, HtmlReportOptions{url}).Report(f.configs, {}, linked);
  EXPECT_NE(linked.str().find("<meta name=\"tm-repository\" content=\"https://example.com/o/r?a=&quot;&lt;b&gt;&amp;\">"),
            std::string::npos);
  EXPECT_EQ(PageRepositoryUrl(linked.str()), url);
  EXPECT_EQ(Data(linked.str())["repository"], url);
  const std::string plain = Render(f);
  EXPECT_EQ(PageRepositoryUrl(plain), "");
  EXPECT_FALSE(Data(plain).contains("repository"));
  EXPECT_EQ(PageRepositoryUrl("<html><head></head><body><meta name=\"tm-repository\" content=\"x\"></body>"), "");
}

TEST(HtmlReporterTest, NothingChangedSinceTheEarliestComparedMeasurement) {
  testing::ReportFixture f;
  auto run = [](const std::string& day, double tps) {
    return testing::FixtureRecord("tiny/full", "full_finetune_single_device", "cpu", CellStatus::kRuns,
                                  "2026-11-" + day + "T10:00:00Z", tps, 0.5, std::string(40, '1'));
  };
  testing::AddCell(&f, "tiny/full", "full_finetune_single_device", {run("20", 100), run("21", 101)});
  EXPECT_NE(Render(f).find("<p class=\"nothing\">Nothing changed since 2026-11-20 (each cell's newest "
                           "measurement against the one before it).</p>\n</section>"),
            std::string::npos);
  testing::ReportFixture once;
  testing::AddCell(&once, "tiny/full", "full_finetune_single_device", {run("20", 100)});
  EXPECT_NE(Render(once).find("No cell has been measured twice yet."), std::string::npos);
}

// A long summary shows its first eight lines; the rest fold into a <details>.
TEST(HtmlReporterTest, ALongSummaryFoldsAfterEightLines) {
  testing::ReportFixture f;
  for (int i = 0; i < 10; ++i) {
    std::string config = "tiny/c" + std::to_string(i);
    auto record = [&](CellStatus status, const std::string& day) {
      return testing::FixtureRecord(config, "full_finetune_single_device", "cpu", status,
                                    "2026-11-" + day + "T10:00:00Z", 100, 0.5, std::string(40, '1'));
    };
    testing::AddCell(&f, config, "full_finetune_single_device",
                     {record(CellStatus::kRuns, "20"), record(CellStatus::kFails, "21")});
  }
  std::string page = Render(f);
  size_t fold = page.find("<details><summary>2 more</summary>");
  ASSERT_NE(fold, std::string::npos);
  EXPECT_EQ(Count(page.substr(0, fold), "<li class=\"ch-newly-broken\""), 8u);
  EXPECT_EQ(Count(page.substr(fold), "<li class=\"ch-newly-broken\""), 2u);
}

// A cell that does not run shows its reason in the matrix, shortened; the title and the data keep all of it.
TEST(HtmlReporterTest, ACellThatDoesNotRunShowsItsReasonShortened) {
  testing::ReportFixture f = testing::MakeReportFixture();
  const std::string reason = "predicted peak memory 67.10 GiB exceeds 85% of cpu's 23.54 GiB\nand then some more "
                             "words that do not fit";
  for (ConfigSupport& c : f.configs) {
    if (c.config == "llama3_1/8B_lora_single_device") c.entries[testing::kFixtureCpu].reason = reason;  // too_large
  }
  std::string page = Render(f);
  EXPECT_NE(page.find("<span class=\"reason\">predicted peak memory 67.10 GiB exceeds 85% of cpu&apos;s 23.54 "
                      "GiB…</span>"),
            std::string::npos);
  EXPECT_NE(page.find("title=\"open llama3_1/8B_lora_single_device on cpu (avx512_bf16, torch 2.11.0): too_large: "
                      "predicted peak memory 67.10 "
                      "GiB exceeds 85% of cpu&apos;s 23.54 GiB and then some more words that do not fit\""),
            std::string::npos);
  // A cell that runs shows no reason; a disturbed one is marked, with why in its title.
  EXPECT_EQ(Count(page, "<span class=\"reason\">"), 5u);
  EXPECT_EQ(Count(page, "<span class=\"disturbed-mark\">⚠ disturbed</span>"), 1u);
  EXPECT_NE(page.find("(measured beside other work: other processes used 40% of the machine&apos;s CPU"),
            std::string::npos);
}

TEST(HtmlReporterTest, ShortenedCutsAtAWholeCharacter) {
  EXPECT_EQ(Shortened("short", 10), "short");
  EXPECT_EQ(Shortened("two\nlines", 20), "two lines");
  EXPECT_EQ(Shortened("abc def", 4), "abc…");
  EXPECT_EQ(Shortened("abc defgh", 6), "abc…");  // at a space when one is in the second half
  EXPECT_EQ(Shortened("abcdefgh", 6), "abcdef…");
  EXPECT_EQ(Shortened("ab→cd", 3), "ab…");  // "→" is three bytes: not cut inside it
}

TEST(HtmlReporterTest, FamilyIsTheConfigsFolder) {
  EXPECT_EQ(ConfigFamily("llama3_2/1B_lora_single_device"), "llama3_2");
  EXPECT_EQ(ConfigFamily("a/b/c"), "a/b");
  // A config outside any folder (torchtune's `generation`) gets a family of its own: "" is the filter's "all".
  EXPECT_EQ(ConfigFamily("plain"), "(top level)");
}

}  // namespace
}  // namespace tmx::matrix
