# matrix/records.cmake: what the matrix records and writes: cell results (JSON), the journal, the support
# metadata written back into configs, the history of measurements, the reports, JUnit XML, merging journals,
# checking claims against observations, comparing journals, and sharding. Torch-free.

# The support page's stylesheet and script are files here, compiled in as strings (html_report_assets.cc);
# editing either reconfigures.
set(tm_html_assets "${CMAKE_CURRENT_SOURCE_DIR}/html_report.css" "${CMAKE_CURRENT_SOURCE_DIR}/html_report.js")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${tm_html_assets})
file(READ "${CMAKE_CURRENT_SOURCE_DIR}/html_report.css" TM_HTML_REPORT_CSS)
file(READ "${CMAKE_CURRENT_SOURCE_DIR}/html_report.js" TM_HTML_REPORT_JS)
if(TM_HTML_REPORT_CSS MATCHES "\\)tm_asset\"" OR TM_HTML_REPORT_JS MATCHES "\\)tm_asset\"")
  message(FATAL_ERROR "matrix/html_report.{css,js} must not contain )tm_asset\" (it ends the raw string)")
endif()
configure_file(html_report_assets.cc.in "${CMAKE_CURRENT_BINARY_DIR}/html_report_assets.cc" @ONLY)

add_library(tm_records
  cell.cc
  journal.cc
  escape.cc
  support_block.cc
  support_entry.cc
  report.cc
  publish.cc
  merge.cc
  check.cc
  junit.cc
  shard.cc
  speed.cc
  history.cc
  html_report.cc
  "${CMAKE_CURRENT_BINARY_DIR}/html_report_assets.cc"
  git_show.cc
  compare.cc
  calibration.cc
  extrapolate.cc
  record_rules.cc
  tensor_check.cc
)
target_include_directories(tm_records PUBLIC "${PROJECT_SOURCE_DIR}")
# tm_process for git_show (a git child process).
target_link_libraries(tm_records PUBLIC tm_process tm_harness_core yaml-cpp nlohmann_json::nlohmann_json)

tm_add_test(cell_test SOURCES cell_test.cc LIBS tm_records)
tm_add_test(tensor_check_test SOURCES tensor_check_test.cc LIBS tm_records)
tm_add_test(journal_test SOURCES journal_test.cc record_rules_test.cc LIBS tm_records)
tm_add_test(support_block_test SOURCES support_block_test.cc support_entry_test.cc escape_test.cc
            escape_reports_test.cc LIBS tm_records)
tm_add_test(report_test SOURCES report_test.cc LIBS tm_records)
tm_add_test(merge_test SOURCES merge_test.cc LIBS tm_records)
tm_add_test(check_test SOURCES check_test.cc LIBS tm_records)
tm_add_test(junit_test SOURCES junit_test.cc LIBS tm_records)
tm_add_test(shard_test SOURCES shard_test.cc LIBS tm_records)
tm_add_test(speed_test SOURCES speed_test.cc LIBS tm_records)
tm_add_test(history_test SOURCES history_test.cc LIBS tm_records)
tm_add_test(publish_test SOURCES publish_test.cc LIBS tm_records)
tm_add_test(html_report_test SOURCES html_report_test.cc LIBS tm_records)
tm_add_test(git_show_test SOURCES git_show_test.cc LIBS tm_records)
tm_add_test(compare_test SOURCES compare_test.cc calibration_test.cc extrapolate_test.cc LIBS tm_records)
# The page in a real browser: headless Chromium (the Debian package `chromium`; TUNE_MATRIX_CHROMIUM names
# another) loads it from disk; skipped with the reason where none is installed. Label `browser`.
tm_add_test(html_report_browser_test SOURCES html_report_browser_test.cc LIBS tm_records LABELS browser)
