// Proxy cells: a cell too large or too slow for its device runs depth-reduced proxies of its config instead
// (harness/proxy.h cuts the layers; PlanCells plans the proxies that fit, at kProxyLayers). Every operation,
// dtype and shape of the config runs forward and backward there, so a proxy that fails says the config would
// not run with more memory or time either (`fails`, ops_verified false). When every proxy runs, the cell keeps
// its too_large or too_slow status, with ops_verified true and the real depth's step time, tokens/s and peak
// memory extrapolated from the proxies' (recorded as extrapolations, beside each proxy's measurements).
#pragma once

#include <vector>

#include "matrix/cell.h"
#include "matrix/extrapolate.h"
#include "matrix/plan.h"

namespace tmx::matrix {

// The cell as its proxy run `index` is started and read back: the proxy's output folder and the cell's steps.
PlannedCell ProxyView(const PlannedCell& cell, size_t index);

// The record of a proxied cell from its proxies' records (ResultFromOutcome of each ProxyView, shallowest
// first; fewer than the cell's proxies when one did not finish):
//   - every proxy ran: the cell's planned status (too_large or too_slow) and reason with what the proxies
//     showed, ops_verified true, each proxy's numbers and the extrapolations;
//   - a proxy failed (`fails`): the cell fails with that proxy's reason and output, ops_verified false;
//   - a proxy stopped otherwise (timeout, over the memory limit, refused): the planned status, with
//     proxy_note (also added to the reason) saying which proxy stopped and why, and nothing extrapolated; the
//     operations are verified when a proxy before it ran (every proxy runs every operation; the deeper ones
//     are there for the extrapolation), not when the first one stopped.
// Wall time and CPU time are the proxies' sums; the cell is disturbed when one of its proxies was; its output_tail
// is the deepest proxy's that printed (the page shows it), or the failing one's.
CellResult ResultFromProxies(const PlannedCell& cell, const std::vector<CellResult>& runs);

// Calibration (MatrixOptions::calibrate): a cell that ran in full (`full`, its own record) and its proxies too.
// The record is the full run's, status, reason and measurements as they were, with the proxies' numbers and
// extrapolations beside them, so the extrapolation's error is measured per cell (matrix/calibration.h). A
// proxy that did not run leaves proxy_note, not a verdict: the full run is the cell's verdict.
CellResult CalibratedResult(const PlannedCell& cell, const std::vector<CellResult>& proxies, CellResult full);

}  // namespace tmx::matrix
