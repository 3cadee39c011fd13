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

# tm_cpu_kernels(<target> <sources...>): the files of <target> that hold one-pass CPU loops
# (recipes/models/cpu_vector.h). Compiled without fused multiply-add contraction, so each loop gives the same bits
# on every CPU, and with OpenMP where the compiler has it: ATen's at::parallel_for is OpenMP written inline in
# its headers, and in a file compiled without -fopenmp it runs the whole range on one thread. The process still
# has one OpenMP runtime, LibTorch's (libgomp.so.1, one soname); without OpenMP the loops run on one thread.
find_package(OpenMP COMPONENTS CXX)
function(tm_cpu_kernels target)
  set(options "")
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    list(APPEND options -ffp-contract=off)
  endif()
  if(OpenMP_CXX_FOUND)
    separate_arguments(openmp_flags NATIVE_COMMAND "${OpenMP_CXX_FLAGS}")
    list(APPEND options ${openmp_flags})
    # The runtime only: OpenMP::OpenMP_CXX would also compile every file of the target and its users with
    # -fopenmp, where the precompiled header (built without it) cannot be used.
    target_link_libraries(${target} PUBLIC ${OpenMP_CXX_LIBRARIES})
  endif()
  # Their flags differ from the precompiled header's (-fopenmp defines _OPENMP).
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${options}"
                              SKIP_PRECOMPILE_HEADERS ON)
endfunction()

# tm_training_allocator(<executable>): the allocator of a process that trains. `tune` and the benchmarks that
# time its kernels and steps allocate through jemalloc where it is installed (Debian: libjemalloc-dev), with the
# settings of harness/jemalloc_conf.cc, so a kernel is timed with the memory reuse it gets in a step (under
# glibc's malloc a fresh 16 MB output faults in its pages on every call, which can outweigh the kernel). Without
# jemalloc (or TUNE_MATRIX_USE_JEMALLOC off, or a sanitizer build, whose allocator must be the sanitizer's) the
# program tunes glibc's malloc instead (harness/allocator.h). The target gets TM_WITH_JEMALLOC=1 with jemalloc.
if(TUNE_MATRIX_USE_JEMALLOC AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(TM_JEMALLOC IMPORTED_TARGET GLOBAL jemalloc)
  if(NOT TM_JEMALLOC_FOUND)
    message(WARNING "jemalloc not found (Debian: libjemalloc-dev): training processes use glibc's malloc, tuned by mallopt")
  endif()
endif()
function(tm_training_allocator target)
  if(NOT TARGET PkgConfig::TM_JEMALLOC)
    return()
  endif()
  # Listed before every other library so that malloc and free resolve to jemalloc in the whole process.
  target_link_libraries(${target} PRIVATE -Wl,--no-as-needed PkgConfig::TM_JEMALLOC -Wl,--as-needed)
  target_sources(${target} PRIVATE "${PROJECT_SOURCE_DIR}/harness/jemalloc_conf.cc")
  target_compile_definitions(${target} PRIVATE TM_WITH_JEMALLOC=1)
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
  # A run's kept matmul peaks (matrix/peak_cache.h) stay in the build folder, not in the user's cache.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${T_LABELS}"
                       ENVIRONMENT "TUNE_MATRIX_PEAK_CACHE=${CMAKE_BINARY_DIR}/test-peak-cache")
endfunction()
