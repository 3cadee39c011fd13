#!/usr/bin/env bash
# Builds the torch-free core (tm_base, tm_harness_core, the matrix records and process libraries, the fuzzer) with
# AddressSanitizer and UndefinedBehaviorSanitizer in its own folder and runs its tests, the short fuzz test
# included. Any memory error, leak or undefined behaviour fails the test that met it.
#   SANITIZE_BUILD_DIR  build folder (default: build-sanitize)
#   JOBS                parallel compile jobs and tests (default: number of cores)
# Called by `scripts/test.sh --sanitize`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cores.sh
BUILD_DIR="${SANITIZE_BUILD_DIR:-build-sanitize}"
JOBS="${JOBS:-$(cores)}"
# The GoogleTest programs that link no LibTorch; the sanitizers instrument all of their code.
TARGETS=(
  harness_config_test harness_yaml_bounds_test harness_registry_test harness_cli_test base_text_test
  base_files_test base_system_test harness_system_test cell_test journal_test support_block_test report_test merge_test check_test junit_test
  shard_test subprocess_test runner_test fuzzer_test history_test compare_test speed_test publish_test
  tokenizers_byte_bpe_test tokenizers_sentencepiece_test tokenizers_tiktoken_test tokenizers_unicode_test
  tokenizers_hf_tokenizer_test tokenizers_sentencepiece_model_test data_records_test data_sources_test
  data_packing_test checkpoint_safetensors_header_test harness_hub_download_test
)
SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
start=$(date +%s)
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS="$SANITIZE" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DTUNE_MATRIX_BUILD_BENCHMARKS=OFF -DTUNE_MATRIX_USE_PCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" --target "${TARGETS[@]}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS=1
# Only the programs built above: the others (LibTorch, the matrix cells, the end-to-end tests) are not built
# here and show up as *_NOT_BUILT.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -E '_NOT_BUILT$' -LE '^(matrix|e2e)$'
echo "sanitize: ${#TARGETS[@]} test programs built with ASan+UBSan and passed in $(( $(date +%s) - start )) s"
