// Repaired cells: a config invalid on a device whose every problem has a known override (a paged optimizer on
// cpu -> AdamW, activation offloading on cpu -> off; harness/registry.h DeviceRefusal::repair) runs with those
// overrides applied, so the matrix says not only "invalid as written" but whether, and how fast, the config
// runs there once repaired. PlanCells plans the repaired config like any other (in full, proxied, or too large
// or too slow); RepairedResult makes what it got into the cell's record.
#pragma once

#include <string>
#include <vector>

#include "matrix/cell.h"
#include "matrix/plan.h"

namespace tmx::matrix {

// The record of a repaired cell from the record its repaired config got (a run's, proxies', or the plan's
// preset): status invalid with the config's problems and reason as written (cell.written), `repair` and
// `repaired_status` set, the measurements those of the repaired config, and the reason saying what the repair
// gave. A cell without a repair is returned unchanged.
CellResult RepairedResult(const PlannedCell& cell, CellResult repaired);

}  // namespace tmx::matrix
