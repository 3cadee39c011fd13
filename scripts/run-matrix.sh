#!/usr/bin/env bash
# Sets up, builds and runs the main job: every built-in config on every device of this machine, with the
# results written into each config's metadata block and into reports/. Extra arguments go to
# `tune-matrix run` (for example --configs 'tiny/*' or --resume).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build/bin/tune ls
exec build/bin/tune-matrix run "$@"
