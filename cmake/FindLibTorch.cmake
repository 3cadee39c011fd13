# Locates LibTorch. Order:
#   1. Torch_DIR or CMAKE_PREFIX_PATH given by the caller (for example the GPU machine's own PyTorch);
#   2. torch.utils.cmake_prefix_path of TUNE_MATRIX_PYTHON, the venv scripts/setup.sh makes for the torch
#      version this checkout asks for (cmake/TorchSetting.cmake: TUNE_MATRIX_TORCH_VERSION, else the file
#      torch-version).
# Then: links the libraries the torch wheel depends on ahead of the machine's (tm_link_wheel_libraries),
# compiles everything in the C++ standard LibTorch asks for (tm_choose_cxx_standard), and sets
# TUNE_MATRIX_HAS_CUDA when the LibTorch found was built with CUDA and a CUDA toolkit is here to compile the
# CUDA-only code (allocator statistics, device properties) against.
include("${CMAKE_CURRENT_LIST_DIR}/TorchSetting.cmake")
tm_torch_setting("${PROJECT_SOURCE_DIR}" TUNE_MATRIX_TORCH_VERSION TUNE_MATRIX_VENV)
set(TUNE_MATRIX_PYTHON "${TUNE_MATRIX_VENV}/bin/python")
# The torch minor versions built and tested (README: "Torch versions"); outside them the build warns.
set(TUNE_MATRIX_TORCH_OLDEST 2.11)
set(TUNE_MATRIX_TORCH_NEWEST 2.15)

# A build folder configured against another venv (the setting changed) forgets what it found there: every
# cached path into the old venv (Torch_DIR, Caffe2_DIR, the library paths TorchConfig found), so that
# find_package looks again.
if(DEFINED CACHE{TUNE_MATRIX_TORCH_VENV_USED} AND NOT TUNE_MATRIX_TORCH_VENV_USED STREQUAL TUNE_MATRIX_VENV)
  message(STATUS "LibTorch: the torch setting moved from ${TUNE_MATRIX_TORCH_VENV_USED} to ${TUNE_MATRIX_VENV}")
  get_cmake_property(_tm_cached CACHE_VARIABLES)
  foreach(_tm_var IN LISTS _tm_cached)
    get_property(_tm_value CACHE "${_tm_var}" PROPERTY VALUE)
    string(FIND "${_tm_value}" "${TUNE_MATRIX_TORCH_VENV_USED}/" _tm_at)
    if(NOT _tm_at EQUAL -1)
      unset("${_tm_var}" CACHE)
    endif()
  endforeach()
  unset(TUNE_MATRIX_TORCH_VENV_USED CACHE)
endif()

# A LibTorch built with CUDA (the PyPI wheel is) makes find_package(Torch) demand a CUDA toolkit, even for
# CPU-only code, and fail on machines without one (a hosted CI runner, a laptop). Without a toolkit, stand
# in for the one CUDA target torch's config looks up (its cuda.cmake returns early when torch::cudart
# exists); libtorch_cuda finds the CUDA runtime the wheel ships through its own RPATH.
include(CheckLanguage)
check_language(CUDA)
set(TUNE_MATRIX_CUDA_TOOLKIT ON)
if(NOT CMAKE_CUDA_COMPILER AND NOT TARGET torch::cudart)
  set(TUNE_MATRIX_CUDA_TOOLKIT OFF)
  add_library(torch::cudart INTERFACE IMPORTED)
endif()

find_package(Torch QUIET CONFIG)
if(Torch_FOUND AND NOT DEFINED CACHE{TUNE_MATRIX_TORCH_VENV_USED})
  message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR} (given by Torch_DIR/CMAKE_PREFIX_PATH)")
else()
  if(NOT Torch_FOUND)
    if(NOT EXISTS "${TUNE_MATRIX_PYTHON}")
      message(FATAL_ERROR
        "LibTorch not found: no Torch_DIR/CMAKE_PREFIX_PATH names one and ${TUNE_MATRIX_PYTHON} (torch "
        "${TUNE_MATRIX_TORCH_VERSION}) does not exist.\n"
        "Fix: run scripts/setup.sh, or pass -DCMAKE_PREFIX_PATH=\"$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')\".")
    endif()
    execute_process(
      COMMAND "${TUNE_MATRIX_PYTHON}" -c "import torch; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _tm_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _tm_rc)
    if(NOT _tm_rc EQUAL 0)
      message(FATAL_ERROR "${TUNE_MATRIX_PYTHON} cannot import torch. Fix: run scripts/setup.sh.")
    endif()
    list(APPEND CMAKE_PREFIX_PATH "${_tm_torch_prefix}")
    find_package(Torch REQUIRED CONFIG)
    set(TUNE_MATRIX_TORCH_VENV_USED "${TUNE_MATRIX_VENV}" CACHE INTERNAL "The venv whose LibTorch this build found")
  endif()
  if(NOT Torch_VERSION VERSION_EQUAL TUNE_MATRIX_TORCH_VERSION)
    message(FATAL_ERROR "${TUNE_MATRIX_VENV} holds torch ${Torch_VERSION}, but this checkout asks for "
                        "${TUNE_MATRIX_TORCH_VERSION} (TUNE_MATRIX_TORCH_VERSION or the file torch-version). "
                        "Fix: run scripts/setup.sh, which installs the version asked for.")
  endif()
  message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR} (the venv of scripts/setup.sh)")
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _tm_torch_minor "${Torch_VERSION}")
if(_tm_torch_minor VERSION_LESS TUNE_MATRIX_TORCH_OLDEST OR _tm_torch_minor VERSION_GREATER TUNE_MATRIX_TORCH_NEWEST)
  message(WARNING "LibTorch ${Torch_VERSION} is outside the torch versions tune-matrix is built and tested "
                  "with (${TUNE_MATRIX_TORCH_OLDEST} to ${TUNE_MATRIX_TORCH_NEWEST}): it may not compile, "
                  "or behave differently.")
endif()
# What scripts/pack_prebuilt.sh prints as the LibTorch built against.
set(TUNE_MATRIX_LIBTORCH_VERSION "${Torch_VERSION}" CACHE INTERNAL "The version of the LibTorch found")

# tm_link_wheel_libraries(): when LibTorch is a wheel's (a venv's, or the site-packages that Torch_DIR is in),
# asks the package metadata (cmake/wheel_library_dirs.py) for the folders holding the libraries of the
# distributions torch depends on (NCCL, cuDNN, the CUDA runtime...) and gives them to the linker as
# -rpath-link. The linker resolves libtorch_cuda.so's own dependencies there before the system's folders,
# where a CUDA toolkit may keep an older libnccl.so.2 than the wheel was built against (undefined references
# to ncclCommGrow... at link time). At run time libtorch_cuda's RPATH already names the wheel's folders.
# A LibTorch from no wheel (a libtorch zip) has no metadata: nothing is added. Sets
# TUNE_MATRIX_WHEEL_LIBRARY_DIRS to the folders (cmake/torch_setting_test.cc checks what the programs load).
function(tm_link_wheel_libraries)
  set(TUNE_MATRIX_WHEEL_LIBRARY_DIRS "" PARENT_SCOPE)
  set(python "")
  set(site_packages "")
  if(DEFINED CACHE{TUNE_MATRIX_TORCH_VENV_USED})
    set(python "${TUNE_MATRIX_PYTHON}")
  else()
    get_filename_component(site_packages "${Torch_DIR}/../../../.." ABSOLUTE)
    file(GLOB dist_info "${site_packages}/torch-*.dist-info")
    find_program(TUNE_MATRIX_PYTHON3 NAMES python3 python)
    if(dist_info AND TUNE_MATRIX_PYTHON3)
      set(python "${TUNE_MATRIX_PYTHON3}")
    endif()
  endif()
  if(python STREQUAL "")
    message(STATUS "LibTorch: no wheel metadata beside ${Torch_DIR}; the linker finds its dependencies itself")
    return()
  endif()
  execute_process(COMMAND "${python}" "${PROJECT_SOURCE_DIR}/cmake/wheel_library_dirs.py" ${site_packages}
                  OUTPUT_VARIABLE dirs ERROR_VARIABLE error RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(WARNING "LibTorch: cmake/wheel_library_dirs.py failed (${rc}): ${error}The linker finds the "
                    "wheel's dependencies itself, and may take older system copies (NCCL).")
    return()
  endif()
  string(REPLACE "\n" ";" dirs "${dirs}")
  list(LENGTH dirs count)
  list(JOIN dirs ":" joined)
  set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:-rpath-link,${joined}")
  set(TUNE_MATRIX_WHEEL_LIBRARY_DIRS "${dirs}" PARENT_SCOPE)
  message(STATUS "LibTorch: the linker takes the wheel's dependencies from its ${count} library folders first")
endfunction()
tm_link_wheel_libraries()

# tm_choose_cxx_standard(): every target compiles in one standard, the newer of the project's C++17 and what
# LibTorch asks for (2.15's TorchConfig asks for cxx_std_20 as a compile feature, which would otherwise raise
# only the targets that link torch); TUNE_MATRIX_CXX20 asks for C++20 with any LibTorch.
function(tm_choose_cxx_standard)
  set(standard 17)
  get_target_property(features torch INTERFACE_COMPILE_FEATURES)
  get_target_property(options torch INTERFACE_COMPILE_OPTIONS)
  foreach(feature IN LISTS features)
    if(feature MATCHES "^cxx_std_([0-9]+)$" AND CMAKE_MATCH_1 GREATER standard)
      set(standard "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  foreach(option IN LISTS options)
    if(option MATCHES "-std=c\\+\\+([0-9]+)" AND CMAKE_MATCH_1 GREATER standard)
      set(standard "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(TUNE_MATRIX_CXX20 AND standard LESS 20)
    set(standard 20)
  endif()
  set(CMAKE_CXX_STANDARD "${standard}" PARENT_SCOPE)
  message(STATUS "C++${standard} (LibTorch ${Torch_VERSION})")
endfunction()
tm_choose_cxx_standard()

# TUNE_MATRIX_TORCH_HAS_CUDA: the LibTorch can run on CUDA devices (the matrix registers cuda cells).
# TUNE_MATRIX_HAS_CUDA: also the CUDA-only code here is compiled (device names and memory, allocator peaks).
set(TUNE_MATRIX_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  set(TUNE_MATRIX_TORCH_HAS_CUDA ON)
endif()
set(TUNE_MATRIX_HAS_CUDA OFF)
if(TUNE_MATRIX_TORCH_HAS_CUDA AND TUNE_MATRIX_CUDA_TOOLKIT)
  set(TUNE_MATRIX_HAS_CUDA ON)
elseif(TUNE_MATRIX_TORCH_HAS_CUDA)
  message(WARNING "LibTorch has CUDA, but no CUDA toolkit (nvcc) was found: the CUDA-only code is left out. "
                  "Cells still run on GPUs, but without the GPU's name, its memory (no too_large prediction) or "
                  "the allocator's peak. On a GPU machine, install the CUDA toolkit.")
endif()
message(STATUS "LibTorch with CUDA: ${TUNE_MATRIX_HAS_CUDA}")
