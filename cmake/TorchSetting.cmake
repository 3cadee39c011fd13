# The torch version this checkout builds against and the virtual environment scripts/setup.sh makes for it,
# read the way scripts/torch_version.sh reads them (cmake/torch_setting_test.cc checks that the two agree):
#   $ENV{TUNE_MATRIX_TORCH_VERSION}  the version, when set and not empty
#   <root>/torch-version             otherwise: its first line that is not a comment
#   $ENV{TUNE_MATRIX_VENV}           the venv (default: ~/.cache/tune-matrix/venv-torch-<version>)
# A bad setting is a fatal error naming where it came from.
#
# Also runs as a script, printing the two lines `version=...` and `venv=...`:
#   cmake -DROOT=<checkout> -P cmake/TorchSetting.cmake

# tm_torch_setting(<root> <version_var> <venv_var>)
function(tm_torch_setting root version_var venv_var)
  if(NOT "$ENV{TUNE_MATRIX_TORCH_VERSION}" STREQUAL "")
    set(version "$ENV{TUNE_MATRIX_TORCH_VERSION}")
    set(from "TUNE_MATRIX_TORCH_VERSION")
  else()
    set(from "${root}/torch-version")
    if(NOT EXISTS "${from}")
      message(FATAL_ERROR "torch version: ${from} is missing. Fix: restore it from git, or set TUNE_MATRIX_TORCH_VERSION")
    endif()
    file(STRINGS "${from}" lines REGEX "^[ \t]*[^# \t]")
    set(version "")
    if(lines)
      list(GET lines 0 version)
      string(STRIP "${version}" version)
    endif()
  endif()
  if(NOT version MATCHES "^[0-9]+\\.[0-9]+\\.[0-9]+$")
    message(FATAL_ERROR "torch version: ${from} gives '${version}', not a release such as 2.11.0. "
                        "Fix: name a torch release on PyPI")
  endif()
  set(venv "$ENV{TUNE_MATRIX_VENV}")
  if(venv STREQUAL "")
    set(venv "$ENV{HOME}/.cache/tune-matrix/venv-torch-${version}")
  endif()
  set(${version_var} "${version}" PARENT_SCOPE)
  set(${venv_var} "${venv}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  tm_torch_setting("${ROOT}" _version _venv)
  message("version=${_version}\nvenv=${_venv}")
endif()
