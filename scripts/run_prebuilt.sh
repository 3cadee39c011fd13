#!/usr/bin/env bash
# Runs a pack made by scripts/pack_prebuilt.sh on a machine that has the device and PyTorch (of the version the
# build used) but no build tools: the pack's tests, then the matrix on DEVICE, journal only.
#
#   scripts/run_prebuilt.sh DEVICE OUT SECONDS [CONFIGS...]
#
#   DEVICE    the device to cover (cuda, cuda:0, xpu, ...)
#   OUT       folder for devices.txt, tests.txt, matrix.txt and journal-<device>.jsonl
#   SECONDS   wall-clock limit for the matrix part: the cells in flight then are stopped and not recorded, the
#             finished ones stay in the journal
#   CONFIGS   config patterns, one batch per argument, run in order (default: 'tiny/*', then every config);
#             a later batch skips the cells an earlier one recorded (--resume)
#
# The pack is $PREBUILT (default .prebuilt). Bring the journal back and merge it where the checkout lives:
#   build/bin/tune-matrix merge reports/journal.jsonl OUT/journal-<device>.jsonl
# Nothing in the checkout is rewritten here (--no-write-back).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PACK="${PREBUILT:-.prebuilt}"
[ "$#" -ge 3 ] || { sed -n '2,/^set /p' "$0" | sed '$d'; exit 2; }
DEVICE=$1 OUT=$2 SECONDS_LEFT=$3
shift 3
batches=("$@")
[ "${#batches[@]}" -gt 0 ] || batches=('tiny/*' '*')
[ -x "$PACK/bin/tune" ] || { echo "run_prebuilt: no pack in $PACK; make one with scripts/pack_prebuilt.sh" >&2; exit 2; }
mkdir -p "$OUT"
start=$SECONDS

# The shipped samples (stand-in tokenizers and data) are found through the environment; the tests' fixtures
# through the path of the checkout the pack was built in, linked to this one where it does not exist here.
export TUNE_MATRIX_SAMPLES_DIR="$ROOT/recipes/data/samples"
built_in=$(cat "$PACK/SOURCE_DIR")
if [ "$built_in" != "$ROOT" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$ROOT" "$built_in" && echo "run_prebuilt: linked $built_in -> $ROOT"
fi
# Records name the commit from .git/HEAD; a copied checkout may come without .git.
[ -e .git ] || { mkdir -p .git && cp "$PACK/COMMIT" .git/HEAD; }

site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') || {
  echo "run_prebuilt: python3 cannot import torch here; the pack needs this machine's LibTorch" >&2; exit 1; }
libs=/tmp/run_prebuilt_lib
mkdir -p "$libs"
for f in "$PACK"/lib/*; do  # only what this machine lacks: its own libraries stay in charge
  ldconfig -p | awk '{print $1}' | grep -qx "$(basename "$f")" || cp -a "$f" "$libs/"
done
cuda_libs=$(ls -d "$site"/nvidia/cu*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH="$libs:$site/torch/lib:${cuda_libs}${LD_LIBRARY_PATH:-}"
B="$ROOT/$PACK/bin"
if ldd "$B/tune" | grep "not found"; then echo "run_prebuilt: libraries missing (above)" >&2; exit 1; fi
python3 -c 'import torch; print("torch", torch.__version__)' | tee "$OUT/devices.txt"
"$B/tune" devices 2>&1 | tee -a "$OUT/devices.txt"
type=${DEVICE%%:*}
grep -q "^$type" "$OUT/devices.txt" || { echo "run_prebuilt: tune sees no $type device here; stopping" >&2; exit 1; }

for t in "$B"/*_test; do
  [ -x "$t" ] || continue
  echo "== $(basename "$t")" | tee -a "$OUT/tests.txt"
  timeout 300 "$t" 2>&1 | grep -E '^\[ *(RUN|OK|FAILED|SKIPPED|PASSED) *\]|Skipped|Failure|error' | tee -a "$OUT/tests.txt"
done

journal="$OUT/journal-${DEVICE//:/-}.jsonl"
resume=()
for batch in "${batches[@]}"; do
  left=$((SECONDS_LEFT - (SECONDS - start)))
  [ "$left" -gt 20 ] || { echo "run_prebuilt: out of time before batch '$batch'"; break; }
  echo "== cells '$batch' on $DEVICE, at most ${left}s" | tee -a "$OUT/matrix.txt"
  timeout --kill-after=15 "$left" "$B/tune-matrix" run --devices "$DEVICE" --configs "$batch" "${resume[@]}" \
    --no-write-back --journal "$journal" --work-dir /tmp/run_prebuilt_cells --job "${TUNE_MATRIX_JOB:-prebuilt-$type}" \
    2>&1 | tee -a "$OUT/matrix.txt" | grep -v '^  '
  resume=(--resume)
done
echo "run_prebuilt: $(wc -l < "$journal" 2>/dev/null || echo 0) records in $journal after $((SECONDS - start))s"
