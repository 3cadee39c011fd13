# Helpers shared by every area's CMakeLists.

# One precompiled header for LibTorch, built once and reused by every target that uses torch.
add_library(tm_torch_pch OBJECT "${PROJECT_SOURCE_DIR}/cmake/torch_pch.cc")
target_link_libraries(tm_torch_pch PUBLIC torch)
if(TUNE_MATRIX_USE_PCH)
  target_precompile_headers(tm_torch_pch PRIVATE "${PROJECT_SOURCE_DIR}/cmake/torch_pch.h")
endif()

# tm_use_torch(<target>): link LibTorch and reuse the shared precompiled header.
function(tm_use_torch target)
  target_link_libraries(${target} PUBLIC torch)
  if(TUNE_MATRIX_HAS_CUDA)
    target_compile_definitions(${target} PUBLIC TUNE_MATRIX_HAS_CUDA=1)
  endif()
  if(TUNE_MATRIX_USE_PCH)
    target_precompile_headers(${target} REUSE_FROM tm_torch_pch)
  endif()
endfunction()

# Shared test helpers (tests/scratch_dir.h), linked into every test program.
if(TUNE_MATRIX_BUILD_TESTS)
  add_library(tm_test_util STATIC "${PROJECT_SOURCE_DIR}/tests/scratch_dir.cc")
  target_include_directories(tm_test_util PUBLIC "${PROJECT_SOURCE_DIR}")
endif()

# tm_add_test(<name> SOURCES <files...> LIBS <targets...> [TORCH] [LABELS <labels...>])
# Builds a GoogleTest program and registers each of its tests with CTest.
function(tm_add_test name)
  if(NOT TUNE_MATRIX_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "TORCH" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests")
  target_link_libraries(${name} PRIVATE ${T_LIBS} tm_test_util GTest::gtest GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    TM_SOURCE_DIR="${PROJECT_SOURCE_DIR}" TM_BINARY_DIR="${CMAKE_BINARY_DIR}")
  if(T_TORCH)
    target_sources(${name} PRIVATE "${PROJECT_SOURCE_DIR}/tests/torch_test_main.cc")
    tm_use_torch(${name})
  else()
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  # One label per test program (gtest_discover_tests cannot pass a list through PROPERTIES).
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}")
endfunction()
