# Locates LibTorch. Order:
#   1. Torch_DIR or CMAKE_PREFIX_PATH given by the caller (for example the GPU machine's own PyTorch);
#   2. torch.utils.cmake_prefix_path of TUNE_MATRIX_PYTHON (the venv made by scripts/setup.sh).
# Sets TUNE_MATRIX_HAS_CUDA when the LibTorch found was built with CUDA and a CUDA toolkit is here to
# compile the CUDA-only code (allocator statistics, device properties) against.

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
if(NOT Torch_FOUND)
  if(NOT EXISTS "${TUNE_MATRIX_PYTHON}")
    message(FATAL_ERROR
      "LibTorch not found: no Torch_DIR/CMAKE_PREFIX_PATH names one and ${TUNE_MATRIX_PYTHON} does not exist.\n"
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
endif()
message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR}")

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
