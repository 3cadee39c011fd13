#include "matrix/repair_cell.h"

#include "base/text.h"
#include "matrix/support_entry.h"

namespace tmx::matrix {

CellResult RepairedResult(const PlannedCell& cell, CellResult repaired) {
  if (cell.repair.empty()) return repaired;
  CellResult r = std::move(repaired);
  r.repair = cell.repair;
  r.repaired_status = r.status;
  r.status = CellStatus::kInvalid;
  r.problems = cell.written.problems;
  r.reason = cell.written.reason + "; " + RepairedOutcome(CellStatusName(*r.repaired_status), r.repair.size()) +
             " (" + JoinStrings(r.repair, " ") + ")" + (r.reason.empty() ? "" : ": " + r.reason);
  return r;
}

}  // namespace tmx::matrix
