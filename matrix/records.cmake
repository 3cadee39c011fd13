# matrix/records.cmake: what the matrix records and writes: cell results (JSON), the journal, the support
# metadata written back into configs, the reports, JUnit XML, merging journals, checking claims against
# observations, and sharding. Torch-free.
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
)
target_include_directories(tm_records PUBLIC "${PROJECT_SOURCE_DIR}")
target_link_libraries(tm_records PUBLIC tm_harness_core yaml-cpp nlohmann_json::nlohmann_json)

tm_add_test(cell_test SOURCES cell_test.cc LIBS tm_records)
tm_add_test(journal_test SOURCES journal_test.cc LIBS tm_records)
tm_add_test(support_block_test SOURCES support_block_test.cc support_entry_test.cc escape_test.cc LIBS tm_records)
tm_add_test(report_test SOURCES report_test.cc LIBS tm_records)
tm_add_test(merge_test SOURCES merge_test.cc LIBS tm_records)
tm_add_test(check_test SOURCES check_test.cc LIBS tm_records)
tm_add_test(junit_test SOURCES junit_test.cc LIBS tm_records)
tm_add_test(shard_test SOURCES shard_test.cc LIBS tm_records)
