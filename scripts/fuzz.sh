#!/usr/bin/env bash
# Fuzzes configs, overrides, journals, write-back, safetensors headers, dataset files, tokenizer files and the Hub's listings for a
# while (default 600 s, shared between the targets; TARGET=NAME runs one, e.g. TARGET=dataset) and prints the
# number of inputs tried. A crash, hang or broken invariant stops it with a message naming the
# input (reproduce with the command it prints); the input is kept in the crash folder.
#   scripts/fuzz.sh [SECONDS] [SEED]
#   BUILD_DIR   build folder holding bin/tm_fuzz (default: build; scripts/sanitize.sh's folder works too)
#   CRASH_DIR   where the input being run is kept (default: $BUILD_DIR/fuzz-crashes)
#   LIBFUZZER=1 runs the hub_listing target under libFuzzer instead (coverage-guided, clang, ASan+UBSan), built
#               in build-libfuzzer; its corpus grows in build-libfuzzer/corpus and a finding lands in the
#               working folder as crash-*, with libFuzzer's command to reproduce it
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TOTAL="${1:-600}"
SEED="${2:-$(date +%s)}"
BUILD_DIR="${BUILD_DIR:-build}"
CRASH_DIR="${CRASH_DIR:-$BUILD_DIR/fuzz-crashes}"
if [ "${LIBFUZZER:-0}" = 1 ]; then
  FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  cmake -S . -B build-libfuzzer -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$FLAGS" -DTUNE_MATRIX_LIBFUZZER=ON \
    -DTUNE_MATRIX_BUILD_TESTS=OFF -DTUNE_MATRIX_BUILD_BENCHMARKS=OFF -DTUNE_MATRIX_USE_PCH=OFF >/dev/null
  cmake --build build-libfuzzer --target tm_libfuzzer_hub_listing >/dev/null
  mkdir -p build-libfuzzer/corpus
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
  TM_WRITE_SEEDS=build-libfuzzer/corpus build-libfuzzer/bin/tm_libfuzzer_hub_listing build-libfuzzer/corpus \
    -max_total_time="$SECONDS_TOTAL" -seed="$SEED" -max_len=65536 -rss_limit_mb=4096 -print_final_stats=1
  exit
fi
cmake --build "$BUILD_DIR" --target tm_fuzz >/dev/null
mkdir -p "$CRASH_DIR"
# Under AddressSanitizer (BUILD_DIR=build-sanitize) an input that allocates without end must fail, not take the
# machine's memory: tm_fuzz limits its address space itself in other builds.
export ASAN_OPTIONS="${ASAN_OPTIONS:-hard_rss_limit_mb=4096:detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
"$BUILD_DIR/bin/tm_fuzz" --target "${TARGET:-all}" --seconds "$SECONDS_TOTAL" --seed "$SEED" --crash-dir "$CRASH_DIR" --source-dir "$PWD"
