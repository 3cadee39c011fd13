#!/usr/bin/env bash
# OpenMP's wait policy beside other work (benchmarks/README.md): 60 tiny training steps with 2 threads beside
# one spinning process, GNU OpenMP's default policy (an invalid OMP_WAIT_POLICY value: libgomp warns and keeps
# its default, and `tune run` leaves a value that is set alone) against PASSIVE, and 1 thread; repetitions
# interleaved, wall time of each whole run in seconds.
#   benchmarks/openmp_wait_policy.sh [REPETITIONS]     (default 3; BUILD_DIR as scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
tune="${BUILD_DIR:-build}/bin/tune"
out="$(mktemp -d)"
spin() { while :; do :; done; }
spin &
spinner=$!
trap 'kill $spinner; rm -rf "$out"' EXIT
sleep 1
one() {
  local start end
  start=$(date +%s.%N)
  env "$@" "$tune" run full_finetune_single_device --config tiny/full_single_device device=cpu max_steps_per_epoch=60 \
    save_checkpoints=False output_dir="$out/run" --force >"$out/log" 2>&1 || { tail -3 "$out/log" >&2; exit 1; }
  end=$(date +%s.%N)
  printf '%.2f' "$(echo "$end - $start" | bc)"
}
for rep in $(seq "${1:-3}"); do
  echo "rep $rep: 2 threads default $(one OMP_NUM_THREADS=2 OMP_WAIT_POLICY=libgomp-default) s," \
       "2 threads PASSIVE $(one OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE) s, 1 thread $(one OMP_NUM_THREADS=1) s" \
       "(load average $(cut -d' ' -f1 /proc/loadavg))"
done
