#!/usr/bin/env bash
# Sourced by the scripts: which torch this checkout builds against, and where its virtual environment is.
# CMake reads the same setting the same way (cmake/TorchSetting.cmake), so the venv scripts/setup.sh makes is
# the one the build uses:
#   TUNE_MATRIX_TORCH_VERSION  the version, when set and not empty
#   torch-version              otherwise: the file at the checkout's root (its first line that is not a comment)
#   TUNE_MATRIX_VENV           the venv (default: ~/.cache/tune-matrix/venv-torch-<version>)

_tm_torch_version_file="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/torch-version"

# torch_version: prints the version (for example 2.11.0); with a bad setting, names it and returns 1.
torch_version() {
  local version from
  if [ -n "${TUNE_MATRIX_TORCH_VERSION:-}" ]; then
    version="$TUNE_MATRIX_TORCH_VERSION"
    from="TUNE_MATRIX_TORCH_VERSION"
  else
    from="$_tm_torch_version_file"
    if [ ! -r "$from" ]; then
      printf 'torch version: %s is missing. Fix: restore it from git, or set TUNE_MATRIX_TORCH_VERSION\n' "$from" >&2
      return 1
    fi
    version="$(grep -v -E '^[[:space:]]*(#|$)' "$from" | head -n 1 | tr -d '[:space:]')"
  fi
  if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    printf "torch version: %s gives '%s', not a release such as 2.11.0. Fix: name a torch release on PyPI\n" \
      "$from" "$version" >&2
    return 1
  fi
  printf '%s\n' "$version"
}

# torch_venv: prints the virtual environment that holds (or will hold) that version.
torch_venv() {
  local version
  version="$(torch_version)" || return 1
  printf '%s\n' "${TUNE_MATRIX_VENV:-$HOME/.cache/tune-matrix/venv-torch-$version}"
}
