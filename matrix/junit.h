// JUnit XML for CI pages: one <testcase> per matrix cell, so a CI system shows the matrix natively. A cell
// that runs passes; one that fails or times out is a <failure> whose message is the reason; one that was not
// started because the device cannot take it (invalid, too_large) is <skipped> with the reason, never a
// silent pass.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "matrix/cell.h"

namespace tmx::matrix {

// Writes <testsuites name="tune-matrix"> with one <testsuite> per device ("tune-matrix.cpu",
// "tune-matrix.cuda:0"), each test case named by its config with its wall time; failures carry the child's
// output tail. Text is escaped for XML 1.0 (characters XML cannot hold are dropped). Deterministic: cells
// sorted by device then config.
void WriteJUnit(const std::vector<CellResult>& cells, std::ostream& out);

// WriteJUnit into `path`, atomically (the folder must exist).
Status WriteJUnitFile(const std::vector<CellResult>& cells, const std::string& path);

}  // namespace tmx::matrix
