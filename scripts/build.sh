#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and builds everything into build/ (binaries in build/bin/).
#   BUILD_DIR   build folder (default: build)
#   JOBS        parallel compile jobs (default: number of cores)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cores.sh
bash scripts/setup.sh
BUILD_DIR="${BUILD_DIR:-build}"
JOBS="${JOBS:-$(cores)}"
echo "build: $JOBS parallel jobs on $(cores) cores" >&2
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
