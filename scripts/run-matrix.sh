#!/usr/bin/env bash
# Sets up, builds and runs the main job: the built-in configs on every device of this machine, with the
# results written into each config's metadata block and into reports/. Extra arguments go to
# `tune-matrix run` (for example --configs 'tiny/*' or --resume).
#
# The run is a rolling refresh of at most 55 minutes of cells (`--time-limit 3300`): the cells with the
# oldest records first, the rest keep theirs for the next run. The whole cpu matrix takes hours on a 2-core
# machine (`tune-matrix plan` predicts it); pass --time-limit 0 to run every cell.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/bin/tune ls
limit=(--time-limit 3300)
for arg in "$@"; do
  case "$arg" in --time-limit|--time-limit=*) limit=() ;; esac
done
exec build/bin/tune-matrix run "${limit[@]}" "$@"
