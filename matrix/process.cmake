# The cell runner the scheduler talks to (runner.h), over base/'s subprocesses, and the cpu lanes it runs cells
# in side by side (lanes.h). Torch-free: nothing here includes LibTorch.
add_library(tm_process
  lanes.cc
  runner.cc
)
target_include_directories(tm_process PUBLIC "${PROJECT_SOURCE_DIR}")
target_link_libraries(tm_process PUBLIC tm_base tm_harness_core)

if(TUNE_MATRIX_BUILD_TESTS)
  tm_add_test(runner_test SOURCES runner_test.cc lanes_test.cc LIBS tm_process)
  target_compile_definitions(runner_test PRIVATE TM_MISBEHAVE_PATH="$<TARGET_FILE:tm_misbehave>")
  add_dependencies(runner_test tm_misbehave)
endif()
