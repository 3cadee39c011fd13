#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest programs registered with CTest).
#   scripts/test.sh --sanitize   instead: the torch-free core under ASan+UBSan (scripts/sanitize.sh)
set -euo pipefail
if [[ "${1:-}" == "--sanitize" ]]; then
  exec bash "$(dirname "$0")/sanitize.sh"
fi
# One torch thread per test program: ctest runs programs in parallel, and spinning OpenMP threads that
# compete for the same cores make CPU tests many times slower.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "$(dirname "$0")/.."
source scripts/cores.sh
bash scripts/build.sh
echo "test: ctest -j $(cores), one torch thread per test program" >&2
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(cores)"
