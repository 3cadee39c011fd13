// The tiny configs' matrix cells as CTest tests, generated from the registry and the device table (so a device
// type or a tiny config added there gets its cells without a CMake edit). `tune-matrix ctest-cells` writes the
// script after every link of tune-matrix; CTest includes it (matrix/CMakeLists.txt).
#pragma once

#include <string>
#include <vector>

#include "harness/registry.h"

namespace tmx::matrix {

// The configs that get CTest cells: every built-in config under tiny/, sorted.
std::vector<std::string> CtestCellConfigs(const Registry& registry);

// The device types that get CTest cells: those that train and whose backend this LibTorch has (cpu, and cuda in a
// CUDA build even on a machine without a GPU, where its cells skip with the reason).
std::vector<std::string> CtestCellDeviceTypes();

// A CTest script: per config and device type, `add_test(matrix.<config>.<type> <tune_matrix> cell <config>
// --device <type> --timeout 600 --work-dir <work_dir>)` labelled `matrix;<type>`, skipped on exit 77, with
// CTest's limit above the cell's own (900 s), and one slot of the `gpus` resource for a type that takes an index.
std::string CtestCellsScript(const std::vector<std::string>& configs, const std::vector<std::string>& device_types,
                             const std::string& tune_matrix, const std::string& work_dir);

}  // namespace tmx::matrix
