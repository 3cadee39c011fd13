#!/usr/bin/env bash
# Packs this checkout's build for a machine that has a device and PyTorch but cannot build or install anything
# (no compiler packages, no network; for example a lent GPU machine). Run it here after scripts/build.sh, copy
# the checkout with DIR to that machine, and run scripts/run_prebuilt.sh there.
#
#   scripts/pack_prebuilt.sh [DIR] [TEST...]
#
#   DIR    where the pack goes, inside the checkout (default: .prebuilt; add it to .git/info/exclude)
#   TEST   test programs of build/tests/ to take along (default: the ones with device-only cases:
#          recipes_adamw8bit_test harness_device_hooks_test checkpoint_safetensors_test
#          models_checkpointing_test)
#
# DIR/bin holds tune, tune-matrix and the tests, stripped; DIR/lib the shared libraries they load from this
# machine's system folders, except the C and C++ runtimes (run_prebuilt.sh uses one only where that machine
# lacks it); DIR/COMMIT the checkout's commit, which records name; DIR/SOURCE_DIR this checkout's path. LibTorch and the CUDA runtime are not
# packed: the other machine's PyTorch must be the version the build used (printed below).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-.prebuilt}"
shift || true
tests=("$@")
[ "${#tests[@]}" -gt 0 ] || tests=(recipes_adamw8bit_test harness_device_hooks_test checkpoint_safetensors_test
                                           models_checkpointing_test)
BUILD_DIR="${BUILD_DIR:-build}"

for f in "$BUILD_DIR/bin/tune" "$BUILD_DIR/bin/tune-matrix"; do
  [ -x "$f" ] || { echo "pack_prebuilt: $f is missing; run scripts/build.sh first" >&2; exit 1; }
done
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib"
programs=("$BUILD_DIR/bin/tune" "$BUILD_DIR/bin/tune-matrix")
for t in "${tests[@]}"; do
  if [ -x "$BUILD_DIR/tests/$t" ]; then programs+=("$BUILD_DIR/tests/$t"); else echo "pack_prebuilt: no $BUILD_DIR/tests/$t, left out" >&2; fi
done
for p in "${programs[@]}"; do strip -o "$DIR/bin/$(basename "$p")" "$p"; done

# The system libraries the programs load, minus the C and C++ runtimes every machine has.
for p in "${programs[@]}"; do ldd "$p"; done | awk '$3 ~ /^\/(usr\/)?lib/ {print $3}' | sort -u |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|librt|libdl|libutil|libresolv)\.so' |
  while read -r lib; do cp -L "$lib" "$DIR/lib/"; done

git rev-parse HEAD > "$DIR/COMMIT"
pwd > "$DIR/SOURCE_DIR"  # compiled into the tests (their fixtures); run_prebuilt.sh links it to the copy
torch_version=$(grep -o '^TUNE_MATRIX_LIBTORCH_VERSION:[A-Z]*=.*' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | cut -d= -f2 || true)
echo "pack_prebuilt: $DIR ($(du -sh "$DIR" | cut -f1)): ${#programs[@]} programs, $(ls "$DIR/lib" | wc -l) libraries," \
     "commit $(cut -c1-12 "$DIR/COMMIT")${torch_version:+, built against LibTorch $torch_version}"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "pack_prebuilt: warning: the checkout has uncommitted changes; records will name $(cut -c1-12 "$DIR/COMMIT")" >&2
fi
