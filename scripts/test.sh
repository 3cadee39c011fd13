#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GoogleTest programs registered with CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
