# Locates LibTorch. Order:
#   1. Torch_DIR or CMAKE_PREFIX_PATH given by the caller (for example the GPU machine's own PyTorch);
#   2. torch.utils.cmake_prefix_path of TUNE_MATRIX_PYTHON (the venv made by scripts/setup.sh).
# Sets TUNE_MATRIX_HAS_CUDA when the LibTorch found was built with CUDA.
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

set(TUNE_MATRIX_HAS_CUDA OFF)
if(TARGET torch_cuda OR CAFFE2_USE_CUDA OR TORCH_CUDA_LIBRARIES)
  set(TUNE_MATRIX_HAS_CUDA ON)
endif()
message(STATUS "LibTorch with CUDA: ${TUNE_MATRIX_HAS_CUDA}")
