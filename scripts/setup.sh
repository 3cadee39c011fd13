#!/usr/bin/env bash
# Installs everything tune-matrix needs on a fresh Debian bookworm machine. Idempotent: a second run
# only checks. LibTorch comes from the `torch` wheel on PyPI, in a virtual environment per version outside
# the checkout so every clone on the machine (CI's included) reuses it (scripts/torch_version.sh):
#
#   TUNE_MATRIX_TORCH_VERSION  torch version to install (default: the file torch-version, the pinned one)
#   TUNE_MATRIX_VENV           where the virtual environment lives
#                              (default: ~/.cache/tune-matrix/venv-torch-<version>)
#   CMAKE_PREFIX_PATH / Torch_DIR  when set to a LibTorch, no venv is made: that LibTorch is used.
#   TUNE_MATRIX_BROWSER=1      also install Chromium, for the test that opens reports/index.html in a
#                              browser (skipped without it); .ci/run sets it.
set -euo pipefail

source "$(dirname "$0")/torch_version.sh"
# A bad setting stops here, before anything is installed.
TORCH_VERSION="$(torch_version)"
VENV="$(torch_venv)"

log() { printf 'setup: %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_packages=(build-essential cmake ninja-build ccache pkg-config git
              libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
              libsentencepiece-dev libpcre2-dev libutf8proc-dev
              libgloo-dev libjemalloc-dev libcurl4-openssl-dev zlib1g-dev
              python3 python3-venv)
if [ "${TUNE_MATRIX_BROWSER:-0}" = 1 ]; then
  apt_packages+=(chromium)
fi

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ -n "${Torch_DIR:-}" ] || { [ -n "${CMAKE_PREFIX_PATH:-}" ] && \
     ls "${CMAKE_PREFIX_PATH%%:*}"/Torch/TorchConfig.cmake >/dev/null 2>&1; }; then
  log "using the LibTorch given by CMAKE_PREFIX_PATH/Torch_DIR; no virtual environment made"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ] || \
   [ "$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" != "$TORCH_VERSION" ]; then
  log "creating $VENV with torch==$TORCH_VERSION (a large download, done once per machine)"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet "torch==$TORCH_VERSION"
fi
log "LibTorch $TORCH_VERSION ready in $VENV"
