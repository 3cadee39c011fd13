# Child processes for matrix cells (subprocess.h) and the cell runner the scheduler talks to (runner.h).
# Torch-free: nothing here includes LibTorch.
add_library(tm_process
  subprocess.cc
  runner.cc
)
target_include_directories(tm_process PUBLIC "${PROJECT_SOURCE_DIR}")
target_link_libraries(tm_process PUBLIC tm_harness_core)

if(TUNE_MATRIX_BUILD_TESTS)
  # A child that crashes, hangs, allocates or spews on request, for the tests below.
  add_executable(tm_misbehave testdata/misbehave.cc)
  set_target_properties(tm_misbehave PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")

  tm_add_test(subprocess_test SOURCES subprocess_test.cc LIBS tm_process)
  tm_add_test(runner_test SOURCES runner_test.cc LIBS tm_process)
  foreach(test subprocess_test runner_test)
    target_compile_definitions(${test} PRIVATE TM_MISBEHAVE_PATH="$<TARGET_FILE:tm_misbehave>")
    add_dependencies(${test} tm_misbehave)
  endforeach()
endif()
